"""A per-day result over a table, kept from run to run and recomputed only for the days whose files changed.

Some small answers were read from a whole table on every run (the GPU models each cluster has, each day's mean
demand): a year of daily files costs a scan of 365 files, and only today's file changes in an hourly run. The
day's answer is kept with the (path, mtime, size) of the day's files, under `_state/analytics/memo/<name>.parquet`;
a day whose files changed (new rows, compaction) is computed again, and a day whose files are gone is dropped.
`compute` must depend on the day's rows only.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

import polars as pl

from gpuledger import schema
from gpuledger.atomic import write_atomic
from gpuledger.lake import scan


def _stamps(lake: Path, table: str) -> dict[dt.date, str]:
    days: dict[dt.date, list] = {}
    for f in sorted(Path(lake, table).glob(schema.table(table).file_glob)):
        st = f.stat()
        d = dt.date.fromisoformat(f.parent.name.removeprefix("date="))
        days.setdefault(d, []).append([f.name, st.st_mtime_ns, st.st_size])
    return {d: json.dumps(v) for d, v in days.items()}


def by_day(lake: Path, table: str, name: str, compute: Callable[[pl.LazyFrame], pl.DataFrame]) -> pl.DataFrame:
    """compute(one day's rows of `table`) for every day of it, concatenated in day order."""
    path = Path(lake) / "_state" / "analytics" / "memo" / f"{name}.parquet"
    stamps = _stamps(lake, table)
    kept = pl.read_parquet(path) if path.exists() else None
    parts, fresh = [], False
    for d, stamp in sorted(stamps.items()):
        old = None if kept is None else kept.filter((pl.col("_day") == d) & (pl.col("_stamp") == stamp))
        if old is not None and old.height:
            parts.append(old)
            continue
        out = compute(scan(lake, table, date=d))
        # A day with no answer keeps one marker row (nulls), so that it is not computed again.
        out = (
            out if out.height else pl.DataFrame([{}]).select(*(pl.lit(None, t).alias(c) for c, t in out.schema.items()))
        )
        parts.append(out.with_columns(pl.lit(d).alias("_day"), pl.lit(stamp).alias("_stamp")))
        fresh = True
    if not parts:
        return compute(scan(lake, table))
    everything = pl.concat(parts, how="vertical_relaxed")
    if fresh or kept is None or kept.height != everything.height:
        write_atomic(path, lambda tmp: everything.write_parquet(tmp))
    values = everything.drop("_day", "_stamp")
    return values.filter(~pl.all_horizontal(pl.all().is_null()))
