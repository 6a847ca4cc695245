"""The latest state of every job, kept from run to run, so that a run reads only the jobs files that changed.

The jobs table is append-only (one row per observed state); what every job-level table starts from is each job's
newest row (`jobs.latest`). Re-deriving that from the whole table made every run read every state ever written
(1.5M rows a year of 1,000 GPUs). Here it lives under `<lake>/_state/analytics/incremental/jobs/`:
- `live.parquet`: the newest row of each job not finished (pending or running): these change run after run;
- `sealed/date=D.parquet`: the newest row of each job that finished on UTC day D.

A run reads the jobs files whose (mtime, size) changed since the last run (compaction rewrites a day's files: that
day is read again, which changes nothing), merges their rows with the newest rows it kept for those jobs, and
reports the jobs whose newest row changed. Only `live` and the sealed days those jobs left or joined are rewritten.

Why by the day a job finished: a run needs the jobs that overlap a recent window (the hours it recomputes), and a
finished job overlaps [t, now) only if it finished after t; so `rows_from(day)` reads `live` and the sealed days
from `day` on, whatever the length of the history. A row arriving for a job finished long ago (a late event)
costs a search of the sealed days from its submission on: rare, and bounded by that job's age.

Rows are never removed from the jobs table except with their whole day (retention); a jobs day that lost all of
its files makes the caller rebuild this state from the table (`NeedsRebuild`).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl

from gpuledger import schema
from gpuledger.analytics.jobs import latest
from gpuledger.atomic import write_atomic
from gpuledger.lake import file_stamps, scan, stamp_day
from gpuledger.store import LakeRef

KEY = ["cluster", "job_id"]
_COLUMNS = [c for c in schema.table("jobs").column_names if c != "date"]


class NeedsRebuild(Exception):
    """The kept state cannot be brought up to date from the changed files alone; the message says why."""


def _empty() -> pl.DataFrame:
    return pl.DataFrame(schema={c: schema.table("jobs").polars_schema[c] for c in _COLUMNS})


def _row_hash(frame: pl.DataFrame) -> pl.Series:
    return frame.select(_COLUMNS).hash_rows(seed=0)


class JobStore:
    """Newest row per job (module docstring); `refresh` brings it up to date, `save` writes what changed."""

    def __init__(self, state_dir: Path, lake: LakeRef):
        self.dir, self.lake = Path(state_dir) / "jobs", lake
        self._sealed: dict[dt.date, pl.DataFrame] = {}  # sealed days read or changed in this run
        self._changed_days: set[dt.date] = set()
        self.live = _empty()
        self.stamps: dict[str, list[int]] = {}

    # -- reading ------------------------------------------------------------------------------------------------
    def _on_disk_days(self) -> list[dt.date]:
        return sorted(
            stamp_day(str(p.relative_to(self.dir / "sealed"))) for p in self.dir.glob("sealed/date=*/*.parquet")
        )

    def sealed_days(self) -> list[dt.date]:
        return sorted(set(self._on_disk_days()) | set(self._sealed))

    def _day(self, d: dt.date) -> pl.DataFrame:
        if d not in self._sealed:
            p = self.dir / "sealed" / f"date={d.isoformat()}" / "part.parquet"
            self._sealed[d] = pl.read_parquet(p) if p.exists() else _empty()
        return self._sealed[d]

    def rows_from(self, day: dt.date | None) -> pl.DataFrame:
        """The newest row of every job still live or finished on `day` or later (every job when `day` is None)."""
        days = [d for d in self.sealed_days() if day is None or d >= day]
        parts = [self.live, *(self._day(d) for d in days)]
        return pl.concat([p for p in parts if p.height] or [_empty()], how="vertical_relaxed")

    # -- updating -----------------------------------------------------------------------------------------------
    def refresh(self, old_stamps: dict[str, list[int]] | None) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Read the jobs files changed since `old_stamps` (all of them when None: a rebuild).

        Returns (before, after): the newest rows, before and after, of the jobs whose newest row changed (`before`
        lacks the jobs seen for the first time)."""
        self.stamps = file_stamps(self.lake, "jobs")
        if old_stamps is None:
            rows = latest(scan(self.lake, "jobs").collect().lazy()).collect().select(_COLUMNS)
            # Every day starts empty (not from its file), and is rewritten: those without jobs now are removed.
            self._sealed = {d: _empty() for d in self._on_disk_days()}
            self._changed_days = set(self._sealed)
            self.live = _empty()
            self._place(rows)
            return _empty(), rows
        changed = {stamp_day(r) for r, s in self.stamps.items() if old_stamps.get(r) != s}
        dropped = {stamp_day(r) for r in old_stamps if r not in self.stamps}
        have = {stamp_day(r) for r in self.stamps}
        if dropped - have:
            raise NeedsRebuild(f"jobs files of {', '.join(sorted(d.isoformat() for d in dropped - have))} were removed")
        days = sorted(changed | dropped)
        live_path = self.dir / "live.parquet"
        self.live = pl.read_parquet(live_path) if live_path.exists() else _empty()
        if not days:
            return _empty(), _empty()
        rows = pl.concat([scan(self.lake, "jobs", date=d).collect() for d in days]).select(_COLUMNS)
        keys = rows.select(KEY).unique()
        before = pl.concat([self.live.join(keys, on=KEY, how="semi"), self._find(rows, keys)], how="vertical_relaxed")
        merged = latest(pl.concat([before, rows], how="vertical_relaxed").lazy()).collect()
        same = before.with_columns(_row_hash(before).alias("_h")).select(*KEY, "_h")
        after = (
            merged.with_columns(_row_hash(merged).alias("_h"))
            .join(same, on=[*KEY, "_h"], how="anti", nulls_equal=True)
            .drop("_h")
        )
        before = before.join(after.select(KEY), on=KEY, how="semi")
        self._remove(before)
        self._place(after)
        return before, after

    def _find(self, rows: pl.DataFrame, keys: pl.DataFrame) -> pl.DataFrame:
        """The sealed rows of these jobs: in the days from the earliest submission among them on."""
        rest = keys.join(self.live.select(KEY), on=KEY, how="anti")
        if rest.is_empty():
            return _empty()
        first = rows.join(rest, on=KEY, how="semi")["submitted_at"].min()
        days = [d for d in self.sealed_days() if first is None or d >= first.date()]
        found = [self._day(d).join(rest, on=KEY, how="semi") for d in days]
        return pl.concat([f for f in found if f.height] or [_empty()])

    def _remove(self, rows: pl.DataFrame) -> None:
        keys = rows.select(KEY)
        self.live = self.live.join(keys, on=KEY, how="anti")
        for (d,) in (
            rows.filter(pl.col("finished_at").is_not_null())
            .select(pl.col("finished_at").dt.date())
            .unique()
            .iter_rows()
        ):
            self._sealed[d] = self._day(d).join(keys, on=KEY, how="anti")
            self._changed_days.add(d)

    def _place(self, rows: pl.DataFrame) -> None:
        self.live = pl.concat([self.live, rows.filter(pl.col("finished_at").is_null())], how="vertical_relaxed")
        done = rows.filter(pl.col("finished_at").is_not_null()).with_columns(
            pl.col("finished_at").dt.date().alias("_d")
        )
        for (d,), part in done.partition_by("_d", as_dict=True).items():
            self._sealed[d] = pl.concat([self._day(d), part.drop("_d")], how="vertical_relaxed")
            self._changed_days.add(d)

    def save(self) -> None:
        """Write `live` and the sealed days that changed (sorted: the same rows give the same files)."""
        for d in sorted(self._changed_days):
            p = self.dir / "sealed" / f"date={d.isoformat()}" / "part.parquet"
            part = self._sealed.get(d, _empty())
            if part.is_empty():
                p.unlink(missing_ok=True)
                continue
            part = part.sort(KEY)
            write_atomic(p, lambda tmp, f=part: f.write_parquet(tmp))
        live = self.live.sort(KEY)
        write_atomic(self.dir / "live.parquet", lambda tmp: live.write_parquet(tmp))
        self._changed_days = set()
