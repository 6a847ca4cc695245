"""GPU rollups: per GPU and 5-minute bucket (from samples), and per UTC hour (from the 5-minute rows).

A pure function of the samples (LazyFrame in, LazyFrame out); IO lives in analytics/runner.py.
Ratios are over samples, which equals time when a GPU is sampled at a steady interval (every source here).
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from gpuledger.analytics.sums import exact_mean, exact_sum
from gpuledger.vendors import has_vendor, vendor_expr

# A sample is one GPU at one instant: the same (cluster, gpu_uuid, ts) written twice (an overlapping simulate, a
# spool replayed after its flush had landed) is one sample. The lake is append-only, so readers count it once.
SAMPLE_KEY = ("cluster", "gpu_uuid", "ts")


def once(samples: pl.LazyFrame) -> pl.LazyFrame:
    """Each sample once: of the rows sharing SAMPLE_KEY, the first in the scan's order (files in path order, rows in
    file order), as the gpu_samples view keeps the least (filename, file_row_number), so reruns pick the same."""
    return samples.unique(subset=list(SAMPLE_KEY), keep="first")


def ahead(samples: pl.LazyFrame, bound: dt.datetime) -> pl.LazyFrame:
    """The samples timed after `bound` (the run's end plus the clock-skew allowance), counted per node and source:
    a node whose clock runs ahead writes them, and no run charges them (its window ends at its own now)."""
    return (
        samples.filter(pl.col("ts") > pl.lit(bound).dt.cast_time_unit("us"))
        .group_by("node", "source")
        .agg(pl.len().alias("rows"))
        .sort("rows", "node", "source", descending=[True, False, False], nulls_last=True)
    )


def _has_profile(frame: pl.LazyFrame) -> pl.LazyFrame:
    """The frame with a `mig_profile` column, null where it had none (a gpu_5min frame built before the column, or
    samples built by hand): a partition row's profile is what the fragmentation inventory reads its type from."""
    if "mig_profile" in frame.collect_schema().names():
        return frame
    return frame.with_columns(pl.lit(None, pl.String).alias("mig_profile"))


def gpu_5min(samples: pl.LazyFrame, index: bool = False) -> pl.LazyFrame:
    """Per GPU and 5-minute bucket, from the raw samples, each sample counted once (the one pass over telemetry).
    With `index`, a `_gpu_index` column (the least NVML index the GPU reported in the bucket): not a gpu_5min
    column, but what analytics/node_claims.py finds two machines under one node name from, at no second read.

    A `unique` over a day's samples made the pass ~7x slower (8.6M rows, benchmarks/RESULTS.md), and almost every
    day has no duplicate. So the rollup counts each bucket's distinct times too, and only the GPUs with a bucket
    holding fewer distinct times than rows are rolled up again from their samples made unique. Computed here (the
    check needs the rollup), returned lazy like the other rollups."""
    five = rollup_5min(samples, distinct=True, index=index).collect()
    twice = five.filter(pl.col("_distinct") < pl.col("samples"))["gpu_uuid"].unique()
    five = five.drop("_distinct")
    if twice.is_empty():
        return five.lazy()
    again = rollup_5min(once(samples.filter(pl.col("gpu_uuid").is_in(twice.implode()))), index=index).collect()
    return pl.concat([five.filter(~pl.col("gpu_uuid").is_in(twice.implode())), again.select(five.columns)]).lazy()


def rollup_5min(samples: pl.LazyFrame, distinct: bool = False, index: bool = False) -> pl.LazyFrame:
    """gpu_5min of samples unique by SAMPLE_KEY (streamable); with `distinct`, a `_distinct` column counting each
    bucket's distinct times, which is below `samples` where a sample was written twice; with `index`, gpu_5min's
    `_gpu_index`."""
    bucket = pl.col("ts").dt.truncate("5m").alias("bucket_start")
    n = pl.len()
    span_s = (pl.col("ts").max() - pl.col("ts").min()).dt.total_microseconds() / 1e6
    # Time covered: the span between first and last sample plus one interval (span x n / (n - 1)), at most the
    # bucket; unknown for a lone sample. No sort needed, so the group-by streams.
    covered_s = pl.when(n > 1).then((span_s * n / (n - 1)).clip(upper_bound=300.0))
    return (
        _has_profile(has_vendor(samples))
        .group_by("cluster", "node", "gpu_uuid", "parent_gpu_uuid", bucket)
        .agg(
            pl.col("model").drop_nulls().last(),
            pl.col("vendor").drop_nulls().last(),
            pl.col("mig_profile").drop_nulls().last(),
            n.cast(pl.Int64).alias("samples"),
            pl.col("pod").is_not_null().mean().alias("allocated_ratio"),
            (pl.col("util_gpu_pct") > 0).mean().alias("busy_ratio"),
            pl.col("util_gpu_pct").mean().cast(pl.Float64).alias("util_gpu_pct_mean"),
            pl.col("sm_active_ratio").mean().cast(pl.Float64).alias("sm_active_ratio_mean"),
            pl.col("mem_used_bytes").max().alias("mem_used_bytes_max"),
            pl.col("power_w").mean().cast(pl.Float64).alias("power_w_mean"),
            (pl.col("power_w").mean() * covered_s / 3600.0).cast(pl.Float64).alias("energy_wh"),
            *([pl.col("ts").n_unique().cast(pl.Int64).alias("_distinct")] if distinct else []),
            *([pl.col("gpu_index").min().alias("_gpu_index")] if index else []),
        )
        .with_columns(pl.col("bucket_start").dt.date().alias("date"), vendor_expr())
    )


def gpu_hourly(five_min: pl.LazyFrame) -> pl.LazyFrame:
    """Per GPU and UTC hour, rolled up from gpu_5min: means weighted by samples, peaks, energy summed.

    A weighted mean is sum(value x samples) / sum(samples) over the buckets where the value is known; null when
    it is known in none. Both sums are plain column sums (precomputed products), which polars' group-by runs on
    its fast path: a filter or a when/then inside the aggregation made this rollup ~6x slower.
    """
    s = pl.col("samples")
    means = ("allocated_ratio", "busy_ratio", "util_gpu_pct_mean", "sm_active_ratio_mean", "power_w_mean")
    weights = [
        expr
        for c in means
        for expr in (
            (pl.col(c) * s).alias(f"_{c}_x"),
            pl.when(pl.col(c).is_not_null() & (s > 0)).then(s).otherwise(0).alias(f"_{c}_n"),
        )
    ]
    # The float sums are exact (analytics/sums.py): summed in whatever order polars' threads finish, they differed
    # in the last bit between two runs of one lake (4 of 576 rows), and between a local run and a Dask worker's.
    sums = [exact_sum(pl.col(f"_{c}_x")).alias(f"_{c}_x") for c in means] + [pl.col(f"_{c}_n").sum() for c in means]
    return (
        _has_profile(has_vendor(five_min))
        .with_columns(*weights, pl.col("energy_wh").is_not_null().alias("_energy_known"))
        .group_by(
            "cluster", "node", "gpu_uuid", "parent_gpu_uuid", pl.col("bucket_start").dt.truncate("1h").alias("hour")
        )
        .agg(
            pl.col("model").drop_nulls().last(),
            pl.col("vendor").drop_nulls().last(),
            pl.col("mig_profile").drop_nulls().last(),
            s.sum().alias("samples"),
            *sums,
            pl.col("mem_used_bytes_max").max(),
            exact_sum(pl.col("energy_wh")).alias("energy_wh"),
            pl.col("_energy_known").any(),
        )
        .with_columns(
            *[pl.when(pl.col(f"_{c}_n") > 0).then(pl.col(f"_{c}_x") / pl.col(f"_{c}_n")).alias(c) for c in means],
            pl.when(pl.col("_energy_known")).then(pl.col("energy_wh")).alias("energy_wh"),
            pl.col("hour").dt.date().alias("date"),
            vendor_expr(),  # gpu_5min files written before the column read it back as null
        )
        .select(
            "cluster",
            "node",
            "gpu_uuid",
            "parent_gpu_uuid",
            "hour",
            "model",
            "samples",
            "allocated_ratio",
            "busy_ratio",
            "util_gpu_pct_mean",
            "sm_active_ratio_mean",
            "mem_used_bytes_max",
            "power_w_mean",
            "energy_wh",
            "vendor",
            "mig_profile",
            "date",
        )
    )


# How a physical GPU known by its partitions only gets each gpu_hourly column from its partitions' rows (any other
# column: the first partition's value that is not null, by gpu_uuid).
_PARTITION_MEAN = ("allocated_ratio", "busy_ratio", "util_gpu_pct_mean", "sm_active_ratio_mean")
_PARTITION_SUM = ("energy_wh", "power_w_mean", "mem_used_bytes_max")


def physical(hourly: pl.LazyFrame) -> pl.LazyFrame:
    """gpu_hourly rows (or gpu_5min's, by `bucket_start`) as one row per physical GPU and hour: the supply the
    capacity and idle-cost figures count.

    A GPU with a row of its own (a whole GPU; a MIG GPU, whose NVML/DCGM source writes the parent row besides its
    instances; the simulator's partitioned GPUs) is that row, its partitions left out: they are part of its supply,
    not more of it. A GPU known by its partitions only (the AMD exporter writes a GPU in DPX/QPX/CPX mode as one
    series per partition, each with the GPU's serial as parent_gpu_uuid, and none of the GPU) is one row built from
    the partitions that reported in the hour, with parent_gpu_uuid and mig_profile null as a GPU's own row has them:
    - allocated_ratio, busy_ratio, util and SM-active means: the partitions' mean (of those that know the value).
      That is the mean weighted by each partition's share (the GPU-equivalents held or busy) because an AMD mode
      splits a GPU into equal partitions (partition_share, which gpu_hourly does not carry, is one value per GPU);
    - energy_wh, power_w_mean, mem_used_bytes_max: the partitions' sums (the exporter reports socket power and
      energy on partition 0 and 0 W / nothing on the others; memory is each partition's own); null when none knows;
    - samples: the most any partition has (they are sampled at the same instants: one GPU sampled that often);
    - node, model, vendor and any other column: the first partition's (by gpu_uuid) that is not null.
    analytics/frag_series.py's inventory is this rule too: fragmentation.gpus counts such a GPU as fleet_hourly does."""
    names = hourly.collect_schema().names()
    time = "hour" if "hour" in names else "bucket_start"
    key = [c for c in ("cluster", time) if c in names]
    parent = pl.col("parent_gpu_uuid")
    own = hourly.filter(parent.is_null())
    alone = (
        hourly.filter(parent.is_not_null())
        .join(own.select(*key, pl.col("gpu_uuid").alias("parent_gpu_uuid")), on=[*key, "parent_gpu_uuid"], how="anti")
        .sort("gpu_uuid")
    )

    schema = own.collect_schema()

    def rule(c: str) -> pl.Expr:
        # float sums exact (analytics/sums.py): a rerun writes the same bits whatever order the threads add in
        exact = schema[c].is_float()
        if c in _PARTITION_MEAN:
            return exact_mean(pl.col(c)) if exact else pl.col(c).mean()
        if c in _PARTITION_SUM:
            return pl.when(pl.col(c).is_not_null().any()).then(exact_sum(pl.col(c)) if exact else pl.col(c).sum())
        if c == "samples":
            return pl.col(c).max()
        return pl.col(c).drop_nulls().first()

    rest = [c for c in names if c not in (*key, "gpu_uuid", "parent_gpu_uuid", "mig_profile")]
    built = (
        alone.group_by(*key, "parent_gpu_uuid")
        .agg(*(rule(c).alias(c) for c in rest))
        .with_columns(
            parent.alias("gpu_uuid"),
            pl.lit(None, pl.String).alias("parent_gpu_uuid"),
            *([pl.lit(None, pl.String).alias("mig_profile")] if "mig_profile" in names else []),
        )
    )
    return pl.concat([own, built.select(names).cast(dict(schema))])
