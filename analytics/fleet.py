"""fleet_hourly: supply, allocation, activity and waiting demand per GPU model and UTC hour.

The capacity questions ("do we have enough H100s?") compare what the fleet had with what was asked of it, hour by
hour. Both sides come from tables the analytics already wrote: gpu_hourly, one row per physical GPU and hour
(analytics/gpu_hourly.py `physical`: a MIG instance is part of its GPU's supply, not more of it, and an AMD GPU in
CPX mode, which the exporter writes as its partitions only, is one GPU built from them), and queue_depth (5-minute
ticks with jobs waiting; a tick with nobody waiting has no row, so an hour's mean pending divides by its 12 ticks,
not by the rows present). A year of a 1,000-GPU fleet is 35,000 rows here against 8.8M in gpu_hourly, which is what
lets the dashboards draw a year in one query.
"""

from __future__ import annotations

import polars as pl

from gpuledger.analytics.gpu_hourly import physical
from gpuledger.analytics.sums import exact_sum
from gpuledger.vendors import has_vendor, vendor_expr

TICKS_PER_HOUR = 12  # queue_depth's 5-minute ticks
UNKNOWN_MODEL = "unknown"


def fleet_hourly(hourly: pl.LazyFrame, queue: pl.LazyFrame) -> pl.LazyFrame:
    key = ["cluster", "gpu_model", "hour"]
    supply = (
        physical(has_vendor(hourly))
        .rename({"model": "gpu_model"})
        # dcgm-exporter before 2.x's modelName label names no model: such GPUs still count, as "unknown".
        .with_columns(pl.col("gpu_model").fill_null(UNKNOWN_MODEL))
        .group_by(key)
        .agg(
            pl.len().cast(pl.Int64).alias("gpus"),
            exact_sum(pl.col("allocated_ratio").fill_null(0.0)).alias("allocated_gpus"),
            exact_sum(pl.col("busy_ratio").fill_null(0.0)).alias("busy_gpus"),
            (exact_sum(pl.col("energy_wh").fill_null(0.0)) / 1000).alias("energy_kwh"),
            pl.col("vendor").drop_nulls().first(),
        )
    )
    waiting = (
        queue.filter(pl.col("gpu_model").is_not_null())
        .with_columns(pl.col("ts").dt.truncate("1h").alias("hour"))
        .group_by(key)
        .agg(
            (exact_sum(pl.col("pending_gpus")) / TICKS_PER_HOUR).alias("pending_gpus"),
            pl.col("pending_gpus").max().alias("pending_gpus_max"),
            pl.col("pending_jobs").max().cast(pl.Int64).alias("pending_jobs_max"),
        )
    )
    return (
        supply.join(waiting, on=key, how="full", coalesce=True)
        .with_columns(
            pl.col("gpus").fill_null(0),
            *(pl.col(c).fill_null(0.0) for c in ("allocated_gpus", "busy_gpus", "energy_kwh")),
            *(pl.col(c).fill_null(0.0) for c in ("pending_gpus", "pending_gpus_max")),
            pl.col("pending_jobs_max").fill_null(0),
        )
        # an hour with only waiting jobs of a model has no samples: its vendor is the model name's
        .with_columns(
            (pl.col("allocated_gpus") + pl.col("pending_gpus")).alias("demand_gpus"), vendor_expr("gpu_model")
        )
        .select(
            "hour",
            "cluster",
            "gpu_model",
            "gpus",
            "allocated_gpus",
            "busy_gpus",
            "pending_gpus",
            "pending_gpus_max",
            "pending_jobs_max",
            "demand_gpus",
            "energy_kwh",
            "vendor",
        )
        .sort("hour", "cluster", "gpu_model")
    )
