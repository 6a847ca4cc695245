"""Queue time: how long jobs waited for GPUs, by any grouping, and how many waited at each moment.

wait = scheduled_at - submitted_at over jobs that were scheduled (a pending job's wait is not final yet).
Percentiles interpolate linearly between order statistics (numpy's default), so a group's p50 is its median.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from gpuledger.analytics.sums import exact_sum

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
    """Jobs (and GPUs) waiting at each `every` tick in [start, end): submitted <= t and not yet scheduled at t.

    From events, not a cross join: +1 at submission, -1 when bound (or when it ended unbound, e.g. cancelled
    while pending); the running sum per group, read at each tick (as of the tick, inclusive).
    """
    j = stats.select(*by, "gpus", "submitted_at", pl.coalesce("scheduled_at", "finished_at").alias("left_at"))
    events = (
        pl.concat(
            [
                j.select(
                    *by, pl.col("submitted_at").alias("t"), pl.lit(1).alias("d_jobs"), pl.col("gpus").alias("d_gpus")
                ),
                j.filter(pl.col("left_at").is_not_null()).select(
                    *by, pl.col("left_at").alias("t"), pl.lit(-1).alias("d_jobs"), (-pl.col("gpus")).alias("d_gpus")
                ),
            ]
        )
        .group_by(*by, "t")
        .agg(pl.col("d_jobs").sum(), exact_sum(pl.col("d_gpus")))
        .sort(*by, "t")
        .with_columns(
            pl.col("d_jobs").cum_sum().over(by or None).alias("pending_jobs")
            if by
            else pl.col("d_jobs").cum_sum().alias("pending_jobs"),
            pl.col("d_gpus").cum_sum().over(by or None).alias("pending_gpus")
            if by
            else pl.col("d_gpus").cum_sum().alias("pending_gpus"),
        )
        .select(*by, "t", "pending_jobs", "pending_gpus")
    )
    ticks = pl.LazyFrame({"ts": pl.datetime_range(start, end, every, closed="left", time_zone="UTC", eager=True)})
    groups = events.select(*by).unique() if by else pl.LazyFrame({"_one": [1]})
    grid = ticks.join(groups, how="cross").sort(*by, "ts") if by else ticks
    out = grid.join_asof(
        events.sort(*by, "t") if by else events.sort("t"),
        left_on="ts",
        right_on="t",
        by=list(by) or None,
        strategy="backward",
    )
    return (
        out.with_columns(pl.col("pending_jobs").fill_null(0), pl.col("pending_gpus").fill_null(0.0))
        .filter(pl.col("pending_jobs") > 0)
        .select("ts", *by, "pending_jobs", "pending_gpus")
        .sort("ts", *by)
    )


def _running(e: pl.Expr, by: tuple[str, ...]) -> pl.Expr:
    return e.cum_sum().over(by) if by else e.cum_sum()
