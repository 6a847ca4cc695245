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

from analytics.fragmentation import node_fragmentation, stranded_whole_gpus, typical_task_types

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


def node_states(gpus: pl.DataFrame, allocs: pl.DataFrame, at: dt.datetime) -> pl.DataFrame:
    """node, model, cpu_free_milli, gpu_free_milli (per GPU) at instant `at`.

    gpus: (node, gpu_uuid, model) physical GPUs present; allocs: (gpu_uuid, share, start, end) with MIG slices
    already mapped to their parent GPU.
    """
    held = (
        allocs.filter((pl.col("start") <= at) & (pl.col("end") > at))
        .group_by("gpu_uuid")
        .agg(pl.col("share").sum().alias("held"))
    )
    per_gpu = gpus.join(held, on="gpu_uuid", how="left").with_columns(
        (1000 - (pl.col("held").fill_null(0) * 1000).round()).clip(0, 1000).cast(pl.Int64).alias("free")
    )
    return (
        per_gpu.sort("node", "gpu_uuid")
        .group_by("node", maintain_order=True)
        .agg(pl.col("model").first(), pl.col("free").alias("gpu_free_milli"))
        .with_columns(pl.lit(10**9).alias("cpu_free_milli"))  # no CPU data: CPU never blocks
    )


def fragmentation_series(
    hourly: pl.LazyFrame,
    allocs: pl.DataFrame,
    jobs: pl.DataFrame,
    start: dt.datetime,
    end: dt.datetime,
    cluster: str = "default",
) -> pl.DataFrame:
    """One row per (hour, gpu_model) in [start, end): gpus, free_gpus, fragmented_gpus, frag_rate, stranded_*."""
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
    allocs = (
        allocs.join(parents, on="gpu_uuid", how="left")
        .with_columns(pl.coalesce("parent_gpu_uuid", "gpu_uuid").alias("gpu_uuid"))
        .filter(pl.col("gpu_uuid").is_not_null())
    )
    types = {m: task_types_of(jobs.filter(pl.col("gpu_model") == m)) for m in inv["model"].unique().to_list()}
    rows = []
    for (hour,), at_hour in inv.partition_by("hour", as_dict=True, maintain_order=True).items():
        state = node_states(at_hour.select("node", "gpu_uuid", "model"), allocs, hour)
        stranded = stranded_whole_gpus(state, SIZES).filter(pl.col("model").is_not_null())
        for (model,), nodes in state.partition_by("model", as_dict=True).items():
            tt = types.get(model)
            free = int(nodes["gpu_free_milli"].list.sum().sum())
            frag = None
            if tt is not None and tt.height:
                frag = int(node_fragmentation(nodes, tt)["frag_milli"].sum())
            st = stranded.filter(pl.col("model") == model)
            row = {
                "ts": hour,
                "cluster": cluster,
                "gpu_model": model,
                "gpus": int(nodes["gpu_free_milli"].list.len().sum()),
                "free_gpus": free / 1000,
                "fragmented_gpus": None if frag is None else frag / 1000,
                "frag_rate": None if frag is None or free == 0 else frag / free,
            }
            for n in SIZES:
                v = st.filter(pl.col("job_gpus") == n)["stranded_whole_gpus"]
                row[f"stranded_{n}gpu"] = int(v[0]) if len(v) else 0
            rows.append(row)
    return pl.DataFrame(rows, schema_overrides={"ts": pl.Datetime("us", "UTC")})
