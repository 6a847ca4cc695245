"""Who held which GPU when: one interval per (job, GPU or GPU share).

From the jobs table: a job bound to GPUs it names (`gpu_uuids`, from the scheduler or the simulator) gets one
row per GPU with its share of that GPU: whole-GPU jobs hold 1.0 of each; a fractional or time-sliced job
holds its `gpus` (0.5 = half); a MIG job holds its profile's slice share. Where the jobs table does not name
GPUs (a Kubernetes pod without scheduler annotations), telemetry can: dcgm-exporter's pod labels on
gpu_samples name the GPU a pod used (`gpu_of_pod`). A job with neither keeps one row with a null GPU and its
whole request as the share, so its GPU-hours still count for its tenant.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from analytics.jobs import latest


def gpu_of_pod(samples: pl.LazyFrame) -> pl.LazyFrame:
    """(cluster, namespace, pod) -> the GPUs telemetry saw it on."""
    return (
        samples.filter(pl.col("pod").is_not_null())
        .group_by("cluster", "namespace", "pod")
        .agg(pl.col("gpu_uuid").unique().sort().alias("seen_gpu_uuids"))
    )


def allocations(jobs: pl.LazyFrame, now: dt.datetime, pods: pl.LazyFrame | None = None) -> pl.LazyFrame:
    """Columns: cluster, job_id, tenant, namespace, pod, node, gpu_model, gpu_uuid, share, start, end, open."""
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
    # The share each named GPU holds: whole jobs 1.0 per GPU; below one GPU, the request itself.
    per_gpu = pl.when(pl.col("gpus") >= 1).then(pl.col("gpus") / n).otherwise(pl.col("gpus"))
    return (
        j.with_columns(
            pl.when(n > 0).then(per_gpu).otherwise(pl.col("gpus")).alias("share"),
            pl.when(n > 0)
            .then(pl.col("gpu_uuids"))
            .otherwise(pl.lit([None], dtype=pl.List(pl.String)))
            .alias("gpu_uuid"),
            pl.col("scheduled_at").alias("start"),
            pl.coalesce("finished_at", now_lit).alias("end"),
            pl.col("finished_at").is_null().alias("open"),
        )
        .explode("gpu_uuid")
        .filter(pl.col("end") > pl.col("start"))
        .select(
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
        )
        .sort("start", "job_id", "gpu_uuid", nulls_last=True)
    )
