"""task_types: the target workload M of the FGD metric, built from a pod list the way the artifact does.

Artifact: `GetTypicalPods` in pkg/utils/frag.go, run by generate_config_and_run.py with isInvolvedCpuPods=true,
podPopularityThreshold=95, podIncreaseStep=1 and gpuResWeight=0 (FRAGMENTATION.md, "How the artifact builds M").

Partitions (gpuledger/partitions.py): a pod may carry `profile`, the instance type it asks for (MIG 1g.10gb, AMD
cpx, Ascend vnpu-2c; null or "" for whole GPUs or a share). Its num_gpu then counts instances and its gpu_milli is
one instance's share x 1000. The profile is part of a task type's key: two asks of the same share but a different
instance type fit different devices.
"""

from __future__ import annotations

import polars as pl

from gpuledger.partitions import instance_type

KEY = ("cpu_milli", "gpu_milli", "num_gpu", "gpu_spec", "profile")
PROFILE = "profile"  # optional on pods and task types: the instance type asked, "" or null for none
TASK_TYPE_SCHEMA = pl.Schema(
    {
        "cpu_milli": pl.Int64,
        "gpu_milli": pl.Int64,
        "num_gpu": pl.Int64,
        "gpu_spec": pl.String,
        "profile": pl.String,
        "count": pl.Int64,
        "p": pl.Float64,
    }
)


def require_columns(frame: pl.DataFrame, what: str, columns) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} lacks column(s) {', '.join(missing)}; it has {', '.join(frame.columns) or 'none'}")


POD_COUNT = "pods"  # an optional column of `pods`: how many pods the row stands for (default one)


def canonical_profiles(column: pl.Series, what: str) -> pl.Series:
    """A profile column in canonical instance types (`instance_type`: `1g.10gb+me` -> `1g.10gb`, `cpx.nps4` -> `cpx`,
    `Ascend910-8c` -> `vnpu-8c`), "" for none; ValueError naming the first value that is no partition profile.
    Each distinct value is read once: a year of pods holds a handful of profiles."""
    column = column.cast(pl.String).fill_null("")
    table = {}
    for raw in column.unique().to_list():
        canonical = instance_type(raw) if raw.strip() else ""
        if canonical is None:
            raise ValueError(
                f"{what}: profile {raw!r} is no partition profile (MIG 1g.10gb, AMD cpx, Ascend vnpu-2c or vir02)"
            )
        table[raw] = canonical
    return column.replace_strict(table, return_dtype=pl.String)


def pod_shapes(pods: pl.DataFrame) -> pl.DataFrame:
    """The (cpu_milli, gpu_milli, num_gpu, gpu_spec, profile) of each pod as the artifact reads it.

    A pod that asks for no GPU carries no GPU annotations in the artifact (pod_csv_to_yaml.py writes them only
    when num_gpu != 0), so its gpu_milli, gpu_spec and profile are dropped; a missing gpu_spec means any model.
    profile is the canonical instance type ("" for none, and for pods without the column).
    """
    no_gpu = (pl.col("num_gpu") == 0) | (pl.col("gpu_milli") == 0)
    spec = pl.col("gpu_spec").fill_null("") if "gpu_spec" in pods.columns else pl.lit("")
    profile = pl.lit(canonical_profiles(pods[PROFILE], "pods")) if PROFILE in pods.columns else pl.lit("")
    weight = [pl.col(POD_COUNT)] if POD_COUNT in pods.columns else []
    return pods.select(
        *weight,
        pl.col("cpu_milli").cast(pl.Int64),
        pl.when(no_gpu).then(0).otherwise(pl.col("gpu_milli")).cast(pl.Int64).alias("gpu_milli"),
        pl.when(no_gpu).then(0).otherwise(pl.col("num_gpu")).cast(pl.Int64).alias("num_gpu"),
        pl.when(no_gpu).then(pl.lit("")).otherwise(spec).alias("gpu_spec"),
        pl.when(no_gpu).then(pl.lit("")).otherwise(profile).alias(PROFILE),
    )


def typical_task_types(pods: pl.DataFrame, coverage: float = 0.95) -> pl.DataFrame:
    """The most common task types that together cover at least `coverage` of the pods, with popularity p.

    pods: one row per pod with cpu_milli, gpu_milli (per-GPU share), num_gpu and optionally gpu_spec (allowed
    models, '|'-separated; empty or null = any), profile (the instance type asked; null or "" = none) and `pods`,
    the number of pods the row stands for (a year of jobs as a few hundred counted shapes rather than a row each).
    CPU-only pods count: they are part of M.
    Returns cpu_milli, gpu_milli, num_gpu, gpu_spec ("" = any), profile (canonical, "" = none; only when the pods
    have the column, so a frame without it gives what it gave before partitions), count (pods of that type) and
    p (count over the pods of the kept types, so p sums to 1), most popular first; ties go to the larger key
    (cpu_milli, then gpu_milli, num_gpu, gpu_spec, profile), as the artifact's reversed sort does. Types are kept
    one at a time until the kept pods reach `coverage` of all pods. The artifact takes a CPU request of 0 as
    Kubernetes' non-zero default of 100 m; we keep the request as given (no openb pod asks for 0 CPU).
    """
    require_columns(pods, "pods", ("cpu_milli", "gpu_milli", "num_gpu"))
    if not 0 < coverage <= 1:
        raise ValueError(f"coverage must be in (0, 1], got {coverage}")
    schema = (
        TASK_TYPE_SCHEMA
        if PROFILE in pods.columns
        else pl.Schema({c: t for c, t in TASK_TYPE_SCHEMA.items() if c != PROFILE})
    )
    if pods.height == 0:
        return pl.DataFrame(schema=schema)
    weighted = POD_COUNT in pods.columns
    total = int(pods[POD_COUNT].sum()) if weighted else pods.height
    counts = (
        pod_shapes(pods)
        .group_by(KEY)
        .agg((pl.col(POD_COUNT).sum() if weighted else pl.len()).cast(pl.Int64).alias("count"))
        .sort(["count", *KEY], descending=True)
    )
    # Keep a type while the pods before it fall short of the threshold: the loop `for cum < expected`.
    before = pl.col("count").cum_sum() - pl.col("count")
    kept = counts.filter(before < coverage * total)
    out = kept.with_columns((pl.col("count") / pl.col("count").sum()).alias("p"))
    return out.select(schema.names()).cast(schema)
