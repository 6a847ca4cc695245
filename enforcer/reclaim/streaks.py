"""Idle time as Run:ai counts it: whole windows of `window_s` (30 s) that were fully idle, back from now until the
first window that was not; any activity starts the count again.

A window is fully idle when every sample of the GPU in it is below the job's class threshold (`idle_below_pct`).
Samples are points: the value a sample reads holds until the next one, so a scrape interval longer than the window
(60 s scrapes, or a simulated lake's hourly rows) still fills every window between two idle samples. Held over at
most `max_gap_s`: samples further apart leave the time between them unobserved, and unobserved time is no evidence
of idleness, so the run starts again after such a gap (as the waste rule treats an hour without telemetry).

The run's start is the latest of these break points, each rounded to a window boundary so that only whole windows
count:
- a sample at or above the threshold (or without a utilization) at t: the window after t's (t's was not idle);
- the first sample after a gap, or the first sample read, at t: the first window starting at or after t (a window
  before it was partly unobserved);
and the run ends with the last complete window before `now`, provided the newest sample is no older than
`max_gap_s` (a GPU that stopped reporting is not known to be idle now). The streak is end - start, at least 0.

A job is as idle as its least idle GPU: it is idle when all its GPUs are, and a GPU it holds without any sample in
the window counts as not idle.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

US = 1_000_000

STREAK_SCHEMA = pl.Schema(
    {
        "job_id": pl.String,
        "idle_since": pl.Datetime("us", "UTC"),
        "idle_s": pl.Float64,
        "since_lookback": pl.Boolean,
    }
)


def _us(t: dt.datetime) -> int:
    return int(round(t.timestamp() * US))


def gpu_streaks(
    samples: pl.LazyFrame,
    holds: pl.LazyFrame,
    now: dt.datetime,
    *,
    window_s: float,
    max_gap_s: float,
    read_from: dt.datetime,
) -> pl.LazyFrame:
    """Per (job_id, gpu_uuid) a job holds (`holds`: job_id, gpu_uuid, start, idle_below_pct), its idle streak now:
    idle_since (null when not idle), idle_s, and since_lookback (the run reaches back to the first sample read, at
    `read_from`: it may be longer than measured). `samples`: ts, gpu_uuid, util_gpu_pct; only those from the
    allocation's start to `now` count (earlier ones were another job's)."""
    w = int(round(window_s * US))
    gap = int(round(max_gap_s * US))
    now_us, read_us = _us(now), _us(read_from)
    ts = pl.col("ts").dt.epoch("us")
    prev = ts.shift(1).over("job_id", "gpu_uuid", order_by="ts")
    busy = pl.col("util_gpu_pct").is_null() | (pl.col("util_gpu_pct") >= pl.col("idle_below_pct"))
    after_busy = (ts // w + 1) * w
    ceil = -((-ts) // w) * w  # the first window boundary at or after ts
    restart = prev.is_null() | ((ts - prev) > gap)
    rows = (
        samples.select("ts", "gpu_uuid", "util_gpu_pct")
        .join(holds.select("job_id", "gpu_uuid", "start", "idle_below_pct"), on="gpu_uuid")
        .filter((pl.col("ts") >= pl.col("start")) & (ts <= now_us))
        .with_columns(
            pl.max_horizontal(
                pl.when(busy).then(after_busy),
                pl.when(restart).then(ceil),
            ).alias("_break"),
            # the first sample read, read from the start of the lookback, and idle: a run from there may be longer
            pl.when(prev.is_null() & ~busy & (pl.col("start").dt.epoch("us") < read_us) & (ts - read_us <= gap))
            .then(ceil)
            .alias("_lb_break"),
        )
    )
    per_gpu = rows.group_by("job_id", "gpu_uuid").agg(
        pl.col("_break").max().alias("_start"),
        ts.max().alias("_last"),
        pl.col("_lb_break").max().alias("_lb"),
    )
    end = (now_us // w) * w
    idle_us = pl.when(pl.lit(now_us) - pl.col("_last") <= gap).then(
        pl.max_horizontal(pl.lit(end) - pl.col("_start"), pl.lit(0))
    )
    idle_us = idle_us.otherwise(0)
    return per_gpu.select(
        "job_id",
        "gpu_uuid",
        pl.when(idle_us > 0)
        .then(pl.col("_start"))
        .cast(pl.Datetime("us"))
        .dt.replace_time_zone("UTC")
        .alias("idle_since"),
        (idle_us / US).cast(pl.Float64).alias("idle_s"),
        ((idle_us > 0) & (pl.col("_lb") == pl.col("_start")).fill_null(False)).alias("since_lookback"),
    )


def job_streaks(gpus: pl.LazyFrame, holds: pl.LazyFrame) -> pl.LazyFrame:
    """Per job of `holds`, its streak from its GPUs' (`gpu_streaks`): the least idle GPU's; a GPU without samples
    counts as 0 s idle. STREAK_SCHEMA."""
    return (
        holds.select("job_id", "gpu_uuid")
        .unique()
        .join(gpus, on=["job_id", "gpu_uuid"], how="left")
        .with_columns(pl.col("idle_s").fill_null(0.0), pl.col("since_lookback").fill_null(False))
        .group_by("job_id")
        .agg(
            pl.col("idle_s").min(),
            pl.col("idle_since").max(),
            pl.col("since_lookback").all(),
        )
        .select(
            "job_id",
            pl.when(pl.col("idle_s") > 0).then(pl.col("idle_since")).alias("idle_since"),
            "idle_s",
            (pl.col("since_lookback") & (pl.col("idle_s") > 0)).alias("since_lookback"),
        )
    )
