"""Job-level figures: the latest state of each job, and per job its wait, run time, GPU-hours and size bucket.

Pure functions: LazyFrames in, LazyFrames out (IO lives in analytics/runner.py). `now` closes open intervals
(a running job has used its GPUs up to now; a pending job has waited up to now).
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl

from gpuledger.schema import JOB_FINAL_STATUSES, JOB_OPEN_STATUSES, JOB_STATS, JOBS

FINAL = JOB_FINAL_STATUSES
# Later states win a tie on updated_at (a job submitted and bound in the same instant): pending, running, then ended.
_RANK = pl.col("status").replace_strict(
    {s: i for i, s in enumerate(JOB_OPEN_STATUSES)}, default=len(JOB_OPEN_STATUSES), return_dtype=pl.Int8
)
# job_stats' columns that are the job's latest state as it is (the rest it computes), in job_stats' order.
_AS_IS = tuple(c for c in JOB_STATS.column_names if c in JOBS.column_names and c not in JOB_STATS.path_columns)


def latest(jobs: pl.LazyFrame) -> pl.LazyFrame:
    """One row per (cluster, job_id): its newest state. The same rule as the `jobs` view in sql/jobs.sql."""
    return (
        jobs.with_columns(_RANK.alias("_rank"))
        .sort("updated_at", "_rank")
        .unique(subset=["cluster", "job_id"], keep="last", maintain_order=True)
        .drop("_rank")
    )


def size_bucket(gpus: pl.Expr) -> pl.Expr:
    """<1 (a share of a GPU), 1, 2, 3-4, 5-8, >8 GPUs."""
    return (
        pl.when(gpus < 1)
        .then(pl.lit("<1"))
        .when(gpus == 1)
        .then(pl.lit("1"))
        .when(gpus <= 2)
        .then(pl.lit("2"))
        .when(gpus <= 4)
        .then(pl.lit("3-4"))
        .when(gpus <= 8)
        .then(pl.lit("5-8"))
        .otherwise(pl.lit(">8"))
    )


def held_until(now_lit: pl.Expr) -> pl.Expr:
    """When a job's GPUs are last counted as held: its finish, else now, and never after now (a state timed ahead
    of the run, from a node's clock or a simulation past it, is not charged for time that has not come)."""
    return pl.min_horizontal(pl.coalesce("finished_at", now_lit), now_lit)


def job_stats(jobs: pl.LazyFrame, now: dt.datetime) -> pl.LazyFrame:
    """Per job: queue_s, run_s, held_s (GPU held: bound -> end), gpu_hours, expansion factor, size bucket.

    queue_s = scheduled_at - submitted_at (for a job still pending: now - submitted_at, flagged by status);
    run_s = end - (started_at, else scheduled_at); held_s = end - scheduled_at; end = finished_at, else now, and
    never after now (held_until);
    gpu_hours = gpus x held_s / 3600; expansion = (queue_s + run_s) / run_s.
    """
    now_lit = pl.lit(now).dt.cast_time_unit("us")
    end = held_until(now_lit)
    secs = lambda e: e.dt.total_microseconds() / 1e6  # noqa: E731 - a tiny local spelling helper
    wait = secs(pl.coalesce("scheduled_at", end) - pl.col("submitted_at"))
    run = secs(end - pl.coalesce("started_at", "scheduled_at"))
    held = secs(end - pl.col("scheduled_at"))
    return latest(jobs).select(
        *_AS_IS,
        size_bucket(pl.col("gpus")).alias("size_bucket"),
        wait.clip(lower_bound=0).alias("queue_s"),
        run.clip(lower_bound=0).alias("run_s"),
        held.clip(lower_bound=0).alias("held_s"),
        (pl.col("gpus") * held.clip(lower_bound=0) / 3600).alias("gpu_hours"),
        pl.when(run > 0).then((wait.clip(lower_bound=0) + run) / run).alias("expansion"),
    )


def _segment_sums(frame: pl.DataFrame, key: list[str], cols: list[str]) -> pl.DataFrame:
    """Per run of equal `key` values (frame sorted by key): each col's sum, added left to right by numpy.

    Not polars' group_by: its threads add partial sums whose split depends on the frame's size, so a job's sum would
    differ in its last bits between a run that sums one job and one that sums all; here it depends on its rows only."""
    ids = frame.select(pl.struct(key).rle_id()).to_series().to_numpy()
    starts = np.flatnonzero(np.diff(ids, prepend=-1))
    sums = {c: np.add.reduceat(frame[c].fill_null(0.0).to_numpy().astype(np.float64), starts) for c in cols}
    return pl.DataFrame({**{k: frame[k].gather(starts) for k in key}, **sums})


def use_and_cost(job_hours: pl.DataFrame, allocated_cost: pl.DataFrame) -> pl.DataFrame:
    """Per job (cluster, job_id): what it did with its GPUs and what that cost, job_stats' last columns.

    From job_hourly: allocated, busy and idle (waste rule) GPU-hours; efficiency = busy / allocated, both over the
    hours its GPUs reported in (an hour without telemetry is neither busy nor idle). From cost_allocation: cost_usd, the
    sum of its rows, null when any of them is unpriced (never a partial sum passed off as the whole). Each job's rows
    are summed in a fixed order, so the figures do not depend on which other jobs were summed with it.
    """
    key = ["cluster", "job_id"]
    h = job_hours.sort(*key, "hour").with_columns(
        pl.when(pl.col("measured")).then(pl.col("allocated_gpu_hours")).otherwise(0.0).alias("_measured_h"),
        pl.when(pl.col("measured")).then(pl.col("busy_gpu_hours")).otherwise(0.0).alias("_measured_busy_h"),
    )
    cols = ["allocated_gpu_hours", "busy_gpu_hours", "idle_gpu_hours", "_measured_h", "_measured_busy_h"]
    if h.height:
        use = _segment_sums(h, key, cols)
    else:
        use = pl.DataFrame(schema={"cluster": pl.String, "job_id": pl.String, **dict.fromkeys(cols, pl.Float64)})
    use = use.with_columns(
        pl.when(pl.col("_measured_h") > 0).then(pl.col("_measured_busy_h") / pl.col("_measured_h")).alias("efficiency")
    ).drop("_measured_h", "_measured_busy_h")
    c = allocated_cost.filter(pl.col("job_id").is_not_null()).sort(
        *key, "period_start", "gpu_uuid", "slice_uuid", nulls_last=True
    )
    if c.height:
        cost = _segment_sums(
            c.with_columns(pl.col("cost_usd").is_null().cast(pl.Float64).alias("_unpriced")),
            key,
            ["cost_usd", "_unpriced"],
        )
        cost = cost.with_columns(pl.when(pl.col("_unpriced") == 0).then(pl.col("cost_usd")).alias("cost_usd")).drop(
            "_unpriced"
        )
    else:
        cost = pl.DataFrame(schema={"cluster": pl.String, "job_id": pl.String, "cost_usd": pl.Float64})
    return use.join(cost, on=key, how="full", coalesce=True, nulls_equal=True).sort(key)
