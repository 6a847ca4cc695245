"""Who held which GPU when: one interval per (job, GPU or GPU share).

From the jobs table: a job bound to GPUs it names (`gpu_uuids`, from the scheduler or the simulator) gets one
row per GPU with its share of that GPU: whole-GPU jobs hold 1.0 of each; a fractional or time-sliced job
holds its `gpus` (0.5 = half); a MIG or other partition job holds its profile's slice share on each instance
(`gpus` / the instances it names). Where the jobs table does not name
GPUs (a Kubernetes pod without scheduler annotations), telemetry can: dcgm-exporter's pod labels on
gpu_samples name the GPU a pod used (`gpu_of_pod`). A job with neither keeps one row with a null GPU and its
whole request as the share, so its GPU-hours still count for its tenant.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from gpuledger.analytics.jobs import held_until, latest


def gpu_of_pod(samples: pl.LazyFrame) -> pl.LazyFrame:
    """(cluster, namespace, pod) -> the GPUs telemetry saw it on."""
    return (
        samples.filter(pl.col("pod").is_not_null())
        .group_by("cluster", "namespace", "pod")
        .agg(pl.col("gpu_uuid").unique().sort().alias("seen_gpu_uuids"))
    )


def split_time_sliced(rows: pl.LazyFrame) -> pl.LazyFrame:
    """Time-sliced replicas (`nvidia.com/gpu.shared`) on one GPU split it by their replica counts, moment by moment.

    The pod asks for replicas, not a share: two pods with one replica each on a GPU hold half each while both run,
    and the one left alone holds all of it. Each time-sliced row is cut at every start and end on its GPU, and
    each piece's share is its replicas / all replicas on that GPU during the piece.
    """
    ts = rows.filter((pl.col("gpu_sharing") == "time-sliced") & pl.col("gpu_uuid").is_not_null())
    rest = rows.filter((pl.col("gpu_sharing") != "time-sliced").fill_null(True) | pl.col("gpu_uuid").is_null())
    bounds = (
        pl.concat([ts.select("gpu_uuid", pl.col("start").alias("b")), ts.select("gpu_uuid", pl.col("end").alias("b"))])
        .unique()
        .sort("gpu_uuid", "b")
        .with_columns(pl.col("b").shift(-1).over("gpu_uuid").alias("b_end"))
        .drop_nulls("b_end")
    )
    pieces = (
        ts.join(bounds, on="gpu_uuid")
        .filter((pl.col("b") >= pl.col("start")) & (pl.col("b_end") <= pl.col("end")))
        .with_columns(pl.col("gpus").alias("_replicas"))
        .with_columns((pl.col("_replicas") / pl.col("_replicas").sum().over("gpu_uuid", "b")).alias("share"))
        .with_columns(pl.col("b").alias("start"), pl.col("b_end").alias("end"))
        .drop("b", "b_end", "_replicas")
    )
    return pl.concat([rest, pieces.select(rest.collect_schema().names())])


def allocations(jobs: pl.LazyFrame, now: dt.datetime, pods: pl.LazyFrame | None = None) -> pl.LazyFrame:
    """Columns: cluster, job_id, tenant, namespace, pod, node, gpu_model, gpu_uuid, share, start, end, open,
    workload_class."""
    now_lit = pl.lit(now).dt.cast_time_unit("us")
    j = latest(jobs).filter(pl.col("scheduled_at").is_not_null())
    if pods is not None:
        j = j.join(pods, on=["cluster", "namespace", "pod"], how="left").with_columns(
            pl.when(pl.col("gpu_uuids").list.len().fill_null(0) > 0)
            .then(pl.col("gpu_uuids"))
            .otherwise(pl.col("seen_gpu_uuids"))
            .alias("gpu_uuids")
        )
    n = pl.col("gpu_uuids").list.len().fill_null(0)
    # The share each named GPU holds: whole jobs 1.0 per GPU; below one GPU, the request itself; a partition ask
    # (MIG, AMD CPX, vNPU) naming its instances, its request over them (two 1g.10gb slices: 1/7 each, not 2/7 each).
    parts = pl.col("gpu_sharing").is_in(["mig", "partition"]).fill_null(False)
    per_gpu = pl.when((pl.col("gpus") >= 1) | parts).then(pl.col("gpus") / n).otherwise(pl.col("gpus"))
    rows = (
        j.with_columns(
            pl.when(n > 0).then(per_gpu).otherwise(pl.col("gpus")).alias("share"),
            pl.when(n > 0)
            .then(pl.col("gpu_uuids"))
            .otherwise(pl.lit([None], dtype=pl.List(pl.String)))
            .alias("gpu_uuid"),
            pl.col("scheduled_at").alias("start"),
            held_until(now_lit).alias("end"),  # a finish still ahead of now leaves the job open at now
            (pl.col("finished_at").is_null() | (pl.col("finished_at") > now_lit)).alias("open"),
        )
        .explode("gpu_uuid")
        .filter(pl.col("end") > pl.col("start"))
    )
    cols = [
        "cluster",
        "job_id",
        "tenant",
        "namespace",
        "pod",
        "node",
        "gpu_model",
        "gpu_uuid",
        "share",
        "start",
        "end",
        "open",
        "workload_class",
    ]
    return (
        split_time_sliced(rows.select(*cols, "gpu_sharing", "gpus"))
        .select(cols)
        .sort("start", "job_id", "gpu_uuid", nulls_last=True)
    )
