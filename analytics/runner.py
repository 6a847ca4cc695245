"""Runs the analytics jobs over the lake: incremental (a watermark per job) and idempotent.

Telemetry jobs (gpu_hourly) recompute every (UTC day, node) partition touched since the watermark minus a
look-back (late samples from a spool flush land within it) and rewrite that partition's single output file.
Job-level tables (job_stats, gpu_allocations) are small next to telemetry (one row per job, not per sample):
they are recomputed whole each run, and files of partitions a job left (its node was set when it was bound)
are removed after the new ones are in place. The same input gives the same files, so re-running changes nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from analytics.allocation import allocations, gpu_of_pod
from analytics.gpu_hourly import gpu_hourly
from analytics.jobs import job_stats
from gpuledger.atomic import write_bytes_atomic
from gpuledger.config import Config
from gpuledger.lake import LakeWriter, Partition, has_data, scan

LOOKBACK_S = 2 * 3600
JOBS = {"gpu_hourly": ("gpu_samples", gpu_hourly)}
# Recomputed whole: name -> compute(lake, now) returning the table's rows.
WHOLE = {
    "job_stats": lambda lake, now: job_stats(scan(lake, "jobs"), now),
    "gpu_allocations": lambda lake, now: allocations(scan(lake, "jobs"), now, gpu_of_pod(scan(lake, "gpu_samples"))),
}


@dataclass
class RunReport:
    job: str
    days: int
    rows: int


def _watermark_path(lake: Path, job: str) -> Path:
    return Path(lake) / "_state" / "analytics" / f"{job}.json"


def watermark(lake: Path, job: str) -> float | None:
    p = _watermark_path(lake, job)
    return json.loads(p.read_text())["done_until_s"] if p.exists() else None


def run(lake: Path, until_s: float | None = None, from_s: float | None = None) -> list[RunReport]:
    until_s = time.time() if until_s is None else until_s
    writer = LakeWriter(lake)
    reports = []
    for job, (source, compute) in JOBS.items():
        src = scan(lake, source)
        start = from_s
        if start is None:
            wm = watermark(lake, job)
            if wm is not None:
                start = wm - LOOKBACK_S
            else:
                first = src.select(pl.col("date").min()).collect().item()
                if first is None:
                    continue
                start = dt.datetime.combine(first, dt.time(), dt.timezone.utc).timestamp()
        d0 = dt.datetime.fromtimestamp(start, dt.timezone.utc).date()
        d1 = dt.datetime.fromtimestamp(until_s, dt.timezone.utc).date()
        out = compute(src.filter(pl.col("date").is_between(d0, d1))).collect()
        for (date, node), part in out.partition_by(["date", "node"], as_dict=True).items():
            writer.write_partition(Partition(job, date, node or "_none"), part.drop("date", "node"), job)
        write_bytes_atomic(_watermark_path(lake, job), json.dumps({"done_until_s": until_s}).encode())
        reports.append(RunReport(job, (d1 - d0).days + 1, out.height))
    now = dt.datetime.fromtimestamp(until_s, dt.timezone.utc)
    if has_data(lake, "jobs"):
        for job, compute in WHOLE.items():
            reports.append(_run_whole(lake, writer, job, compute(lake, now)))
    return reports


def _run_whole(lake: Path, writer: LakeWriter, job: str, lf: pl.LazyFrame) -> RunReport:
    from gpuledger import schema

    t = schema.table(job)
    out = lf.with_columns(pl.col(t.time_column).dt.date().alias("date")).collect()
    written = set()
    for (date, node), part in out.partition_by(["date", "node"], as_dict=True).items():
        written.add(
            writer.write_partition(Partition(job, date, node or schema.NO_NODE), part.drop("date", "node"), job)
        )
    for old in Path(lake, job).glob(f"date=*/node=*/part-{job}.parquet"):
        if old not in written:
            old.unlink()  # a partition this table no longer has rows in (e.g. a job that got its node)
    days = out["date"].n_unique() if out.height else 0
    return RunReport(job, days, out.height)


def schedule(scheduler, cfg: Config, lake: Path, every_s: float = 300) -> None:
    """Called by `gpuledger up`: run the analytics every `every_s` seconds (never two at once)."""
    scheduler.add_job(
        lambda: run(lake),
        "interval",
        seconds=every_s,
        id="analytics",
        coalesce=True,
        max_instances=1,
        next_run_time=dt.datetime.now(dt.timezone.utc),
    )
