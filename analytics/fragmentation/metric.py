"""metric: the FGD fragmentation F_n(M) of each node, cluster totals, and the whole-GPU view.

A node state is a frame with node, model (null or "" for a CPU-only node), cpu_free_milli (allocatable minus the
CPU requested by the pods bound to it) and gpu_free_milli (a list, one entry per GPU, 0..1000). Memory is not
part of the metric (FRAGMENTATION.md, "details that move the number").

Everything is computed on arrays of shape (nodes, GPUs per node, task types), so thousands of nodes against tens
of task types take milliseconds (benchmarks/fragmentation.py). GPU lists are padded with 0: a padded GPU has no
room for any GPU task and no unallocated milli, so it changes neither count, leftovers nor totals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from gpuledger.analytics.fragmentation.task_types import require_columns

MILLI = 1000
NODE_STATE_COLUMNS = ("node", "model", "cpu_free_milli", "gpu_free_milli")
JOB_SIZES = (1, 2, 4, 8)


@dataclass(frozen=True)
class Workload:
    """Task types as arrays. `allowed[v, t]`: a node of model `models[v]` may host type t (its GPU-model check)."""

    cpu: np.ndarray  # (T,) CPU request c_m, milli
    milli: np.ndarray  # (T,) per-GPU share d_m
    gpus: np.ndarray  # (T,) number of GPUs k_m
    uses_gpu: np.ndarray  # (T,) False for CPU-only types, which never fit: all unallocated GPU milli is theirs
    # (T,) pod counts when known, else p. Integer sums are exact, so equal node states get equal F and FGD's
    # truncated score sees a change of exactly 0 (score 50) where nothing changed.
    weight: np.ndarray
    allowed: np.ndarray  # (V, T)

    @property
    def total_weight(self) -> float:
        return float(self.weight.sum())


def allowed_models(spec: str | None, models: Sequence[str]) -> np.ndarray:
    """Which of `models` a task with this gpu_spec may use: any model when the spec names none.

    As the artifact's IsNodeAccessibleToPodByType: a spec naming models never matches a CPU-only node (model "").
    """
    wanted = {m for m in (spec or "").split("|") if m}
    if not wanted:
        return np.ones(len(models), dtype=bool)
    return np.array([m in wanted for m in models], dtype=bool)


def workload_arrays(task_types: pl.DataFrame, models: Sequence[str]) -> Workload:
    require_columns(task_types, "task_types", ("cpu_milli", "gpu_milli", "num_gpu"))
    if "count" not in task_types.columns and "p" not in task_types.columns:
        raise ValueError("task_types needs a popularity column: count or p")
    if task_types.height == 0:
        raise ValueError("task_types is empty: the metric needs at least one task type")
    milli = task_types["gpu_milli"].cast(pl.Int64).to_numpy()
    gpus = task_types["num_gpu"].cast(pl.Int64).to_numpy()
    if "count" in task_types.columns:
        weight = task_types["count"].cast(pl.Int64).to_numpy()
    else:
        weight = task_types["p"].cast(pl.Float64).to_numpy()
    specs = task_types["gpu_spec"].to_list() if "gpu_spec" in task_types.columns else [None] * task_types.height
    allowed = np.stack([allowed_models(s, models) for s in specs], axis=1)
    return Workload(
        cpu=task_types["cpu_milli"].cast(pl.Int64).to_numpy(),
        milli=milli,
        gpus=gpus,
        uses_gpu=(milli > 0) & (gpus > 0),
        weight=weight,
        allowed=allowed,
    )


def gpu_terms(free: np.ndarray, w: Workload) -> tuple[np.ndarray, np.ndarray]:
    """Per node and task type: GPUs with room for the type (r >= d_m), and the milli on GPUs without (r < d_m)."""
    room = free[:, :, None] >= w.milli
    return room.sum(axis=1), np.where(room, 0, free[:, :, None]).sum(axis=1)


def weighted_frag(
    count: np.ndarray, small: np.ndarray, total: np.ndarray, cpu: np.ndarray, model: np.ndarray, w: Workload
) -> np.ndarray:
    """sum_m weight_m * F_n(m) per node; divide by the total weight for F_n(M) in milli-GPU.

    F_n(m) is the leftovers too small for m when m can run on n, else every unallocated milli on n. The model
    check comes first in the artifact; since every "cannot run" case counts the same, only the verdict matters.
    """
    fits = w.allowed[model] & (cpu[:, None] >= w.cpu) & (count >= w.gpus) & w.uses_gpu
    return np.where(fits, small, total[:, None]) @ w.weight


@dataclass(frozen=True)
class NodeArrays:
    models: list[str]  # vocabulary; model[i] indexes it
    model: np.ndarray  # (N,)
    cpu: np.ndarray  # (N,) free CPU, milli
    free: np.ndarray  # (N, G) free milli per GPU, 0-padded
    gpus: np.ndarray  # (N,) GPUs on the node


def pad_lists(lists: pl.Series, width: int | None = None) -> np.ndarray:
    """A list column as an (rows, width) int64 matrix, 0-padded on the right."""
    lengths = lists.list.len().fill_null(0).cast(pl.Int64).to_numpy()
    width = max(int(lengths.max(initial=0)), 1) if width is None else width
    out = np.zeros((len(lists), width), dtype=np.int64)
    rows = np.repeat(np.arange(len(lists)), lengths)
    cols = np.arange(len(rows)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    out[rows, cols] = lists.explode().drop_nulls().cast(pl.Int64).to_numpy()
    return out


def node_arrays(nodes: pl.DataFrame) -> NodeArrays:
    require_columns(nodes, "nodes", NODE_STATE_COLUMNS)
    model_names = nodes["model"].fill_null("").to_list()
    models = sorted(set(model_names))
    index = {m: i for i, m in enumerate(models)}
    free = pad_lists(nodes["gpu_free_milli"])
    bad = np.flatnonzero(((free < 0) | (free > MILLI)).any(axis=1))
    if len(bad):
        raise ValueError(f"node {nodes['node'][int(bad[0])]!r}: gpu_free_milli must lie in 0..1000")
    return NodeArrays(
        models=models,
        model=np.array([index[m] for m in model_names], dtype=np.int64),
        cpu=nodes["cpu_free_milli"].cast(pl.Int64).to_numpy(),
        free=free,
        gpus=nodes["gpu_free_milli"].list.len().fill_null(0).cast(pl.Int64).to_numpy(),
    )


def node_fragmentation(nodes: pl.DataFrame, task_types: pl.DataFrame) -> pl.DataFrame:
    """F_n(M) of every node, in milli-GPU.

    nodes: node state (node, model, cpu_free_milli, gpu_free_milli: list of per-GPU free milli).
    task_types: cpu_milli, gpu_milli, num_gpu, gpu_spec ('|'-separated models, ""/null = any) and a
    popularity: count (preferred: sums stay exact integers) or p. `typical_task_types` returns both.
    Returns node, model, gpus, unallocated_milli (sum of free milli) and frag_milli (F_n(M)), in input order.
    """
    a = node_arrays(nodes)
    w = workload_arrays(task_types, a.models)
    count, small = gpu_terms(a.free, w)
    unallocated = a.free.sum(axis=1)
    frag = weighted_frag(count, small, unallocated, a.cpu, a.model, w) / w.total_weight
    return nodes.select("node", "model").with_columns(
        pl.Series("gpus", a.gpus, dtype=pl.Int64),
        pl.Series("unallocated_milli", unallocated, dtype=pl.Int64),
        pl.Series("frag_milli", frag, dtype=pl.Float64),
    )


def cluster_fragmentation(node_frag: pl.DataFrame, by: str | Sequence[str] = ()) -> pl.DataFrame:
    """Cluster totals of a `node_fragmentation` frame, overall or per group (e.g. by="model").

    Returns [by...,] gpus, unallocated_milli, frag_milli (F(M)), frag_rate (F over unallocated milli; null when
    nothing is unallocated) and frag_fleet_share (F over 1000 x GPUs: the paper's "fragmented % of GPUs" / 100).
    """
    require_columns(node_frag, "node_frag", ("gpus", "unallocated_milli", "frag_milli"))
    keys = [by] if isinstance(by, str) else list(by)
    sums = [pl.col("gpus").sum(), pl.col("unallocated_milli").sum(), pl.col("frag_milli").sum()]
    totals = node_frag.group_by(keys, maintain_order=True).agg(sums).sort(keys) if keys else node_frag.select(sums)
    return totals.with_columns(
        pl.when(pl.col("unallocated_milli") > 0)
        .then(pl.col("frag_milli") / pl.col("unallocated_milli"))
        .alias("frag_rate"),
        pl.when(pl.col("gpus") > 0).then(pl.col("frag_milli") / (MILLI * pl.col("gpus"))).alias("frag_fleet_share"),
    )


def stranded_whole_gpus(nodes: pl.DataFrame, sizes: Sequence[int] = JOB_SIZES) -> pl.DataFrame:
    """Free whole GPUs that no N-GPU job can use, because their node has fewer than N whole free GPUs.

    nodes: node state (node, model, gpu_free_milli). A GPU is whole-free at 1000 milli. CPU is not considered.
    Returns model, job_gpus (N), free_whole_gpus and stranded_whole_gpus, per GPU model (sorted) and then for the
    whole fleet, where model is null (a rollup row per N).
    """
    require_columns(nodes, "nodes", ("model", "gpu_free_milli"))
    # Nodes without GPUs add nothing, and their null model would read as the fleet rollup.
    per_node = nodes.filter(pl.col("gpu_free_milli").list.len() > 0).select(
        pl.col("model").fill_null(""),
        pl.col("gpu_free_milli").list.eval(pl.element() == MILLI).list.sum().cast(pl.Int64).alias("whole"),
    )
    per_size = per_node.join(pl.DataFrame({"job_gpus": list(sizes)}, schema={"job_gpus": pl.Int64}), how="cross")
    whole = pl.col("whole")
    aggs = [
        whole.sum().alias("free_whole_gpus"),
        pl.when(whole < pl.col("job_gpus")).then(whole).otherwise(0).sum().alias("stranded_whole_gpus"),
    ]
    by_model = per_size.group_by("model", "job_gpus").agg(aggs).sort("model", "job_gpus")
    fleet = per_size.group_by("job_gpus").agg(aggs).sort("job_gpus")
    return pl.concat([by_model, fleet.select(pl.lit(None, pl.String).alias("model"), pl.all())])
