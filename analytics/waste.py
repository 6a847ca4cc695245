"""Waste: GPU time allocated to a job while the GPU sat idle.

The rule (configurable): an allocated GPU-hour is idle when the GPU's mean utilization in that hour is below
`threshold_pct`; idle hours count as waste only inside a run of at least `window_h` consecutive idle hours of the
same job on the same GPU (a pause between two training steps is not waste; a notebook parked for an afternoon
is). Waste is in GPU-hours of the job's share of the GPU, so half a GPU idle for an hour is 0.5.
"""

from __future__ import annotations

import polars as pl

DEFAULT_THRESHOLD_PCT = 5.0
DEFAULT_WINDOW_H = 1


def allocation_buckets(allocs: pl.LazyFrame, every: str = "1h", name: str = "hour") -> pl.LazyFrame:
    """Allocation intervals cut into UTC buckets of `every`: the bucket, and GPU-hours held in it (x share)."""
    step = pl.duration(hours=1) if every == "1h" else pl.duration(minutes=int(every.removesuffix("m")))
    buckets = (
        allocs.filter(pl.col("gpu_uuid").is_not_null())
        .with_columns(
            pl.datetime_ranges(
                pl.col("start").dt.truncate(every), pl.col("end") - pl.duration(microseconds=1), every
            ).alias(name)
        )
        .explode(name)
    )
    b_start = pl.max_horizontal(pl.col("start"), pl.col(name))
    b_end = pl.min_horizontal(pl.col("end"), pl.col(name) + step)
    return buckets.with_columns(
        ((b_end - b_start).dt.total_microseconds() / 3.6e9 * pl.col("share")).alias("gpu_hours")
    )


def allocation_hours(allocs: pl.LazyFrame) -> pl.LazyFrame:
    """Allocation intervals cut into UTC hours: hour, and the GPU-hours held in it (x share)."""
    return allocation_buckets(allocs, "1h", "hour")


def idle_allocated(
    allocs: pl.LazyFrame,
    hourly: pl.LazyFrame,
    threshold_pct: float = DEFAULT_THRESHOLD_PCT,
    window_h: int = DEFAULT_WINDOW_H,
) -> pl.LazyFrame:
    """Per job, GPU and hour: allocated gpu_hours, util, idle (below threshold), wasted (idle inside a long run)."""
    h = allocation_hours(allocs).join(
        hourly.select("gpu_uuid", "hour", "util_gpu_pct_mean"),
        on=["gpu_uuid", "hour"],
        how="left",
        maintain_order="left",
    )
    # No telemetry for an hour is not evidence of idleness: it is neither idle nor busy (and never waste).
    idle = (pl.col("util_gpu_pct_mean") < threshold_pct).fill_null(False)
    run = ("cluster", "job_id", "gpu_uuid")  # a job is (cluster, job_id): ids repeat across clusters
    run_id = (idle != idle.shift(1).over(run, order_by="hour")).fill_null(True).cum_sum().over(run, order_by="hour")
    return (
        h.with_columns(idle.alias("idle"))
        .with_columns(run_id.alias("_run"))
        .with_columns(pl.len().over(*run, "_run").alias("_run_len"))
        .with_columns((pl.col("idle") & (pl.col("_run_len") >= window_h)).alias("wasted"))
        .drop("_run", "_run_len")
    )


def waste_by(idle_hours: pl.LazyFrame, by: tuple[str, ...] = ("tenant",)) -> pl.LazyFrame:
    """Allocated and wasted GPU-hours per group, and the wasted share."""
    return (
        idle_hours.group_by(*by)
        .agg(
            pl.col("gpu_hours").sum().alias("allocated_gpu_hours"),
            pl.col("gpu_hours").filter(pl.col("wasted")).sum().alias("idle_gpu_hours"),
        )
        .with_columns((pl.col("idle_gpu_hours") / pl.col("allocated_gpu_hours")).alias("idle_share"))
        .sort("idle_gpu_hours", descending=True)
    )


def top_offenders(idle_hours: pl.LazyFrame, n: int = 10) -> pl.LazyFrame:
    """The jobs holding the most idle GPU-hours, with their tenant and how long their longest idle run was."""
    return (
        idle_hours.filter(pl.col("wasted"))
        .group_by("cluster", "job_id", "tenant", "namespace", "pod")
        .agg(
            pl.col("gpu_hours").sum().alias("idle_gpu_hours"),
            pl.col("gpu_uuid").n_unique().alias("gpus"),
            pl.col("hour").min().alias("idle_since"),
        )
        .sort("idle_gpu_hours", "cluster", "job_id", descending=[True, False, False])
        .head(n)
    )


def idle_holds(open_allocs: pl.LazyFrame, hourly: pl.LazyFrame, threshold_pct: float, now) -> pl.LazyFrame:
    """Each GPU an open job holds that is idle now, with since when: what the enforcer's idle-hog gate reads.

    Each hold carries its job's workload class (the allocation's): the gate counts a hold once it has idled its
    class's time. Intervals built without a class (tests, imports) give null.

    Idle now: the last complete hour was below `threshold_pct`, and the hour in progress is not above it (a job
    that woke up ten minutes ago is not hogging). `idle_since` starts the unbroken run of idle hours that ends at
    the last complete hour, no earlier than the allocation; an hour without telemetry breaks the run, as it is
    no evidence of idleness. Hour-grained, like the waste rule: T in the enforcer is measured in these hours.
    """
    if "workload_class" not in open_allocs.collect_schema().names():
        open_allocs = open_allocs.with_columns(pl.lit(None, pl.String).alias("workload_class"))
    now_lit = pl.lit(now).dt.cast_time_unit("us")
    last = now_lit.dt.truncate("1h") - pl.duration(hours=1)
    h = idle_allocated(open_allocs, hourly, threshold_pct, 1)
    key = ("cluster", "job_id", "gpu_uuid")
    done = h.filter(pl.col("hour") <= last)
    # The last hour that was not idle (busy or unobserved) before the run; none when idle since the start.
    broke = done.filter(~pl.col("idle")).group_by(key).agg(pl.col("hour").max().alias("_broke"))
    busy_now = h.filter(
        (pl.col("hour") == last + pl.duration(hours=1)) & (pl.col("util_gpu_pct_mean") >= threshold_pct)
    ).select(key)
    runs = (
        done.filter(pl.col("idle"))
        .join(broke, on=key, how="left")
        .filter(pl.col("_broke").is_null() | (pl.col("hour") > pl.col("_broke")))
        .group_by(key)
        .agg(
            pl.col("hour").max().alias("_last"),
            pl.max_horizontal(pl.col("hour").min(), pl.col("start").min()).alias("idle_since"),
            *(
                pl.col(c).first()
                for c in ("tenant", "gpu_model", "namespace", "pod", "node", "share", "workload_class")
            ),
        )
        .filter(pl.col("_last") == last)
        .join(busy_now, on=key, how="anti")
    )
    return runs.select(
        pl.lit(now).dt.cast_time_unit("us").alias("computed_at"),
        "cluster",
        "tenant",
        "gpu_model",
        "namespace",
        "pod",
        "job_id",
        "node",
        "gpu_uuid",
        "share",
        "idle_since",
        ((last + pl.duration(hours=1) - pl.col("idle_since")).dt.total_microseconds() / 1e6).alias("idle_s"),
        "workload_class",
    ).sort("cluster", "tenant", "idle_since", "job_id", "gpu_uuid")
