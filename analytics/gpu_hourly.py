"""gpu_hourly: per GPU and UTC hour, how much of the hour it was allocated and busy, its memory and energy.

A pure function of the samples (LazyFrame in, LazyFrame out); IO lives in analytics/runner.py.
Ratios are over samples, which equals time when a GPU is sampled at a steady interval (every source here).
"""

from __future__ import annotations

import polars as pl


def gpu_hourly(samples: pl.LazyFrame) -> pl.LazyFrame:
    return gpu_rollup(samples, "1h", "hour", 3600.0)


def gpu_5min(samples: pl.LazyFrame) -> pl.LazyFrame:
    return gpu_rollup(samples, "5m", "bucket_start", 300.0)


def gpu_rollup(samples: pl.LazyFrame, every: str, name: str, bucket_s: float) -> pl.LazyFrame:
    """Per GPU and time bucket of `every`: samples, allocated and busy ratios, means, peak memory, energy."""
    bucket = pl.col("ts").dt.truncate(every).alias(name)
    gap_s = pl.col("ts").sort().diff().dt.total_microseconds().median() / 1e6
    return (
        samples.group_by("cluster", "node", "gpu_uuid", "parent_gpu_uuid", bucket)
        .agg(
            pl.col("model").drop_nulls().last(),
            pl.len().cast(pl.Int64).alias("samples"),
            pl.col("pod").is_not_null().mean().alias("allocated_ratio"),
            (pl.col("util_gpu_pct") > 0).mean().alias("busy_ratio"),
            pl.col("util_gpu_pct").mean().cast(pl.Float64).alias("util_gpu_pct_mean"),
            pl.col("sm_active_ratio").mean().cast(pl.Float64).alias("sm_active_ratio_mean"),
            pl.col("mem_used_bytes").max().alias("mem_used_bytes_max"),
            pl.col("power_w").mean().cast(pl.Float64).alias("power_w_mean"),
            # Time covered: samples x their median spacing, at most the bucket; unknown for a lone sample.
            (pl.col("power_w").mean() * (pl.len() * gap_s).clip(upper_bound=bucket_s) / 3600.0)
            .cast(pl.Float64)
            .alias("energy_wh"),
        )
        .with_columns(pl.col(name).dt.date().alias("date"))
        .sort("node", "gpu_uuid", name)
    )
