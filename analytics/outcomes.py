"""Job outcomes: how jobs end, by tenant and size, and the GPU-hours spent on jobs that failed."""

from __future__ import annotations

import polars as pl

from gpuledger.analytics.jobs import FINAL


def outcomes(stats: pl.LazyFrame, by: tuple[str, ...] = ("tenant", "size_bucket")) -> pl.LazyFrame:
    """Over ended jobs: counts and rates of succeeded/failed/cancelled/preempted, GPU-hours by outcome."""
    ended = stats.filter(pl.col("status").is_in(FINAL))
    n = pl.len()
    return (
        ended.group_by(*by)
        .agg(
            n.alias("jobs"),
            *[(pl.col("status") == s).sum().alias(f"{s}") for s in FINAL],
            *[((pl.col("status") == s).sum() / n).alias(f"{s}_rate") for s in FINAL],
            pl.col("gpu_hours").sum().alias("gpu_hours"),
            pl.col("gpu_hours").filter(pl.col("status") == "failed").sum().alias("failed_gpu_hours"),
        )
        .sort(*by, nulls_last=True)
    )


def failure_reasons(stats: pl.LazyFrame, by: tuple[str, ...] = ("tenant",)) -> pl.LazyFrame:
    """Failed jobs per reason (OOMKilled, Evicted, Error, ...) and the GPU-hours they burnt."""
    return (
        stats.filter(pl.col("status") == "failed")
        .group_by(*by, "reason")
        .agg(pl.len().alias("jobs"), pl.col("gpu_hours").sum().alias("gpu_hours"))
        .sort(*by, "jobs", descending=[False] * len(by) + [True], nulls_last=True)
    )
