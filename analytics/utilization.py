"""Utilization of allocated GPUs, per job and hour (roll up to tenant, model, node or fleet by summing).

For each hour a job held (a share of) a GPU: allocated GPU-hours = share x fraction of the hour held;
busy GPU-hours = allocated x the GPU's duty cycle that hour (mean util_gpu_pct / 100, the share of time a
kernel ran); SM-active GPU-hours = allocated x mean SM activity (where DCGM or the source gives it).
Efficiency of any group = busy / allocated, i.e. weighted by GPU-hours, never a mean of ratios.
Co-located jobs on one GPU (fractions, time slicing) are each credited the GPU's duty cycle on their share.
"""

from __future__ import annotations

import polars as pl

from gpuledger.analytics.sums import exact_sum
from gpuledger.analytics.waste import (
    DEFAULT_THRESHOLD_PCT,
    DEFAULT_WINDOW_H,
    allocation_buckets,
    allocation_hours,
    idle_allocated,
)

# A job's node, tenant and model are the same on every one of its rows: taking them once per group, rather than
# grouping by them too, keeps the group key short (a third of job_5min's time went to hashing six strings).
_ATTRS = ("node", "tenant", "gpu_model")
_GROUP = ("cluster", "hour", "job_id", *_ATTRS)


def _job_attrs(*more: str) -> list[pl.Expr]:
    return [pl.col(c).first() for c in (*_ATTRS, *more)]


def _gpu_hour_aggs() -> list[pl.Expr]:
    """Allocated, busy and SM-active GPU-hours of a group of allocation pieces (the rules in the docstring)."""
    return [
        exact_sum(pl.col("gpu_hours")).alias("allocated_gpu_hours"),
        exact_sum(pl.col("gpu_hours") * pl.col("util_gpu_pct_mean") / 100).alias("busy_gpu_hours"),
        # Null when no GPU of the job reported SM activity (a sum of nulls would read as 0).
        pl.when(pl.col("sm_active_ratio_mean").is_not_null().any())
        .then(exact_sum(pl.col("gpu_hours") * pl.col("sm_active_ratio_mean")))
        .alias("sm_active_gpu_hours"),
    ]


def job_hourly(
    allocs: pl.LazyFrame,
    hourly: pl.LazyFrame,
    threshold_pct: float = DEFAULT_THRESHOLD_PCT,
    window_h: int = DEFAULT_WINDOW_H,
) -> pl.LazyFrame:
    """Per job and hour; `idle_gpu_hours` is the waste by the threshold x window rule of analytics/waste.py."""
    if "workload_class" not in allocs.collect_schema().names():  # intervals built before classes (imports, tests)
        allocs = allocs.with_columns(pl.lit(None, pl.String).alias("workload_class"))
    wasted = (
        idle_allocated(allocs, hourly, threshold_pct, window_h)
        .filter(pl.col("wasted"))
        .group_by("cluster", "job_id", "hour")
        .agg(exact_sum(pl.col("gpu_hours")).alias("idle_gpu_hours"))
    )
    # Joins keep the left order: each group's floats are then added in one order, run after run (identical output).
    h = allocation_hours(allocs).join(
        hourly.select("gpu_uuid", "hour", "util_gpu_pct_mean", "sm_active_ratio_mean", "mem_used_bytes_max", "model"),
        on=["gpu_uuid", "hour"],
        how="left",
        maintain_order="left",
    )
    return (
        h.group_by("cluster", "job_id", "hour")
        .agg(
            *_job_attrs("workload_class"),
            *_gpu_hour_aggs(),
            pl.col("mem_used_bytes_max").max(),
            pl.col("util_gpu_pct_mean").is_not_null().all().alias("measured"),
        )
        .join(wasted, on=["cluster", "job_id", "hour"], how="left")  # job ids repeat across clusters
        .with_columns(pl.col("idle_gpu_hours").fill_null(0.0))
        .select("cluster", "hour", "node", "tenant", "job_id", "gpu_model", pl.exclude(_GROUP))
        .sort("hour", "cluster", "job_id")
    )


def job_5min(allocs: pl.LazyFrame, five_min: pl.LazyFrame) -> pl.LazyFrame:
    """Per job and 5-minute bucket: allocated, busy and SM-active GPU-hours (same rules as job_hourly)."""
    h = allocation_buckets(allocs, "5m", "bucket_start").join(
        five_min.select("gpu_uuid", "bucket_start", "util_gpu_pct_mean", "sm_active_ratio_mean"),
        on=["gpu_uuid", "bucket_start"],
        how="left",
        maintain_order="left",  # each group's floats are then added in one order: every run writes the same rows
    )
    return (
        h.group_by("cluster", "job_id", "bucket_start")
        .agg(*_job_attrs(), *_gpu_hour_aggs())
        .select("cluster", "bucket_start", "node", "tenant", "job_id", "gpu_model", pl.exclude(_GROUP, "bucket_start"))
        .sort("bucket_start", "cluster", "job_id")
    )


def efficiency(job_hours: pl.LazyFrame, by: tuple[str, ...]) -> pl.LazyFrame:
    """Allocated and busy GPU-hours per group and their ratio (GPU-hour weighted)."""
    return (
        job_hours.group_by(*by)
        .agg(pl.col("allocated_gpu_hours").sum(), pl.col("busy_gpu_hours").sum(), pl.col("sm_active_gpu_hours").sum())
        .with_columns((pl.col("busy_gpu_hours") / pl.col("allocated_gpu_hours")).alias("efficiency"))
        .sort(*by, nulls_last=True)
    )
