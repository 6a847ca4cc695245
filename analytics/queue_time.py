"""Queue time: how long jobs waited for GPUs, by any grouping, and how many waited at each moment.

wait = scheduled_at - submitted_at over jobs that were scheduled (a pending job's wait is not final yet).
Percentiles interpolate linearly between order statistics (numpy's default), so a group's p50 is its median.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

DEFAULT_BY = ("tenant", "queue", "gpu_model", "size_bucket")


def queue_stats(stats: pl.LazyFrame, by: tuple[str, ...] = DEFAULT_BY) -> pl.LazyFrame:
    """From job_stats: jobs, mean/p50/p90/p99/max wait and mean expansion factor per group."""
    w = pl.col("queue_s")
    return (
        stats.filter(pl.col("scheduled_at").is_not_null())
        .group_by(*by)
        .agg(
            pl.len().alias("jobs"),
            w.mean().alias("wait_mean_s"),
            w.quantile(0.5, "linear").alias("wait_p50_s"),
            w.quantile(0.9, "linear").alias("wait_p90_s"),
            w.quantile(0.99, "linear").alias("wait_p99_s"),
            w.max().alias("wait_max_s"),
            pl.col("expansion").mean().alias("expansion_mean"),
        )
        .sort(*by, nulls_last=True)
    )


def queue_depth(
    stats: pl.LazyFrame, start: dt.datetime, end: dt.datetime, every: str = "5m", by: tuple[str, ...] = ("gpu_model",)
) -> pl.LazyFrame:
    """Jobs (and GPUs) waiting at each `every` tick in [start, end): submitted <= t and not yet scheduled at t."""
    ticks = pl.LazyFrame({"ts": pl.datetime_range(start, end, every, closed="left", time_zone="UTC", eager=True)})
    waiting = stats.select(*by, "gpus", "submitted_at", "scheduled_at", "finished_at")
    joined = ticks.join(waiting, how="cross").filter(
        (pl.col("submitted_at") <= pl.col("ts"))
        & (pl.col("scheduled_at").is_null() | (pl.col("scheduled_at") > pl.col("ts")))
        & (pl.col("finished_at").is_null() | (pl.col("finished_at") > pl.col("ts")))
    )
    return (
        joined.group_by("ts", *by)
        .agg(pl.len().alias("pending_jobs"), pl.col("gpus").sum().alias("pending_gpus"))
        .sort("ts", *by)
    )
