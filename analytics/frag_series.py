"""Fragmentation over time: at each hour, each GPU model's free capacity and how much of it the typical job of
that model cannot use (FGD, analytics/fragmentation), plus the whole-GPU view (free GPUs no N-GPU job can use).

The node state at an instant comes from the lake: a node's physical GPUs are those that reported in that hour
(gpu_hourly), and a GPU's free share is 1 minus the shares of the allocations holding it at that instant (a MIG
slice's share counts on its parent GPU). The workload M is each model's own jobs (their GPU requests as FGD
task types); jobs carry no CPU request, so CPU never blocks a task here. Per model, because a job that asked for
an H100 cannot run on an L4 node: across models the metric would only restate the fleet's mix.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from analytics.fragmentation import node_fragmentation, typical_task_types

SIZES = (1, 2, 4, 8)


def task_types_of(jobs: pl.DataFrame) -> pl.DataFrame:
    """FGD task types from job requests: a share of one GPU is (1 GPU, share x 1000 milli); k GPUs are (k, 1000)."""
    pods = jobs.filter(pl.col("gpus") > 0).select(
        pl.lit(0).alias("cpu_milli"),
        pl.when(pl.col("gpus") < 1)
        .then((pl.col("gpus") * 1000).round().cast(pl.Int64))
        .otherwise(1000)
        .alias("gpu_milli"),
        pl.when(pl.col("gpus") < 1).then(1).otherwise(pl.col("gpus").ceil().cast(pl.Int64)).alias("num_gpu"),
        pl.lit("").alias("gpu_spec"),
    )
    return typical_task_types(pods)


def fragmentation_series(
    hourly: pl.LazyFrame,
    allocs: pl.DataFrame,
    jobs: pl.DataFrame,
    start: dt.datetime,
    end: dt.datetime,
    cluster: str = "default",
) -> pl.DataFrame:
    """One row per (hour, gpu_model) in [start, end): gpus, free_gpus, fragmented_gpus, frag_rate, stranded_*.

    Vectorised over hours: each (hour, node) is one row of node state, so the FGD metric runs once per GPU model
    for the whole window instead of once per hour.
    """
    inv = (
        hourly.filter((pl.col("hour") >= start) & (pl.col("hour") < end) & pl.col("parent_gpu_uuid").is_null())
        .select("hour", "node", "gpu_uuid", "model")
        .collect()
    )
    if inv.is_empty():
        return pl.DataFrame()
    parents = (
        hourly.filter(pl.col("parent_gpu_uuid").is_not_null()).select("gpu_uuid", "parent_gpu_uuid").unique().collect()
    )
    a = (
        allocs.join(parents, on="gpu_uuid", how="left")
        .with_columns(pl.coalesce("parent_gpu_uuid", "gpu_uuid").alias("gpu_uuid"))
        .filter(pl.col("gpu_uuid").is_not_null())
    )
    # The hour starts (instants) each allocation covers: start <= h < end.
    first_h = pl.col("start").dt.truncate("1h")
    first_h = pl.when(first_h < pl.col("start")).then(first_h + pl.duration(hours=1)).otherwise(first_h)
    held = (
        a.filter(pl.col("end") > pl.col("start"))
        .with_columns(pl.datetime_ranges(first_h, pl.col("end") - pl.duration(microseconds=1), "1h").alias("hour"))
        .explode("hour")
        .drop_nulls("hour")
        .group_by("hour", "gpu_uuid")
        .agg(pl.col("share").sum().alias("held"))
    )
    per_gpu = inv.join(held, on=["hour", "gpu_uuid"], how="left").with_columns(
        (1000 - (pl.col("held").fill_null(0) * 1000).round()).clip(0, 1000).cast(pl.Int64).alias("free")
    )
    state = (
        per_gpu.sort("hour", "node", "gpu_uuid")
        .group_by("hour", "node", maintain_order=True)
        .agg(
            pl.col("model").first(),
            pl.col("free").alias("gpu_free_milli"),
            (pl.col("free") == 1000).sum().alias("whole"),
        )
        .with_columns(
            pl.lit(10**9).alias("cpu_free_milli"),  # no CPU data: CPU never blocks
            (pl.col("hour").cast(pl.Int64).cast(pl.String) + "/" + pl.col("node")).alias("key"),
        )
    )
    frags = []
    for (model,), nodes in state.partition_by("model", as_dict=True).items():
        tt = task_types_of(jobs.filter(pl.col("gpu_model") == model))
        if tt.height:
            f = node_fragmentation(
                nodes.select(pl.col("key").alias("node"), "model", "cpu_free_milli", "gpu_free_milli"), tt
            )
            frags.append(f.select(pl.col("node").alias("key"), "frag_milli"))
    frag = pl.concat(frags) if frags else pl.DataFrame(schema={"key": pl.String, "frag_milli": pl.Float64})
    w = pl.col("whole")
    out = (
        state.join(frag, on="key", how="left")
        .group_by("hour", "model")
        .agg(
            pl.col("gpu_free_milli").list.len().sum().cast(pl.Int64).alias("gpus"),
            (pl.col("gpu_free_milli").list.sum().sum() / 1000).alias("free_gpus"),
            pl.when(pl.col("frag_milli").is_not_null().all())
            .then(pl.col("frag_milli").sum() / 1000)
            .alias("fragmented_gpus"),
            *[pl.when(w < n).then(w).otherwise(0).sum().cast(pl.Int64).alias(f"stranded_{n}gpu") for n in SIZES],
        )
        .with_columns(
            pl.when(pl.col("free_gpus") > 0).then(pl.col("fragmented_gpus") / pl.col("free_gpus")).alias("frag_rate"),
            pl.lit(cluster).alias("cluster"),
        )
        .select(
            pl.col("hour").alias("ts"),
            "cluster",
            pl.col("model").alias("gpu_model"),
            "gpus",
            "free_gpus",
            pl.col("fragmented_gpus").cast(pl.Float64),
            "frag_rate",
            *[f"stranded_{n}gpu" for n in SIZES],
        )
        .sort("ts", "gpu_model")
    )
    return out
