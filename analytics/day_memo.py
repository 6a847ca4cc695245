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

from gpuledger.analytics.state_store import state_dir
from gpuledger.atomic import write_atomic, write_bytes_atomic
from gpuledger.lake import file_stamps, scan, stamp_day
from gpuledger.store import LakeRef


def _stamps(lake: LakeRef, table: str) -> dict[str, str]:
    """{day: its files' names, stamps and sizes}, from the table's file stamps (gpuledger.lake.file_stamps)."""
    days: dict[str, list] = {}
    for rel, (stamp, size) in file_stamps(lake, table).items():
        days.setdefault(stamp_day(rel).isoformat(), []).append([Path(rel).name, stamp, size])
    return {d: json.dumps(v) for d, v in days.items()}


def by_day(
    lake: LakeRef, table: str, name: str, compute: Callable[[pl.LazyFrame], pl.DataFrame], read_only: bool = False
) -> pl.DataFrame:
    """compute(one day's rows of `table`) for every day of it, concatenated in day order.

    read_only: compute over the whole table and keep nothing, for a reader that must not write into the lake (the
    webhook on an object-store lake)."""
    if read_only:
        return compute(scan(lake, table))
    memo = state_dir(lake) / "memo"
    values_path, stamps_path = memo / f"{name}.parquet", memo / f"{name}.json"
    stamps = _stamps(lake, table)
    try:
        old = json.loads(stamps_path.read_text()) if values_path.exists() else {}
    except (FileNotFoundError, ValueError):
        old = {}
    same = sorted(d for d, s in stamps.items() if old.get(d) == s)
    parts = []
    if same:  # one filter of the kept rows, not one per day
        parts.append(
            pl.read_parquet(values_path).filter(pl.col("_day").is_in([dt.date.fromisoformat(d) for d in same]))
        )
    todo = sorted(set(stamps) - set(same))
    for d in todo:
        day = dt.date.fromisoformat(d)
        parts.append(compute(scan(lake, table, date=day)).with_columns(pl.lit(day).alias("_day")))
    if not parts:
        return compute(scan(lake, table))
    everything = pl.concat(parts, how="vertical_relaxed").sort("_day", maintain_order=True)
    if todo or set(old) != set(stamps):
        # The values first: a run stopped between the two writes recomputes the days whose stamps it did not save.
        write_atomic(values_path, lambda tmp: everything.write_parquet(tmp))
        write_bytes_atomic(stamps_path, json.dumps(stamps, sort_keys=True).encode())
    return everything.drop("_day")
