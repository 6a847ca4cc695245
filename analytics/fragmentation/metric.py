"""metric: the FGD fragmentation F_n(M) of each node, cluster totals, and the whole-GPU view.

A node state is a frame with node, model (null or "" for a CPU-only node), cpu_free_milli (allocatable minus the
CPU requested by the pods bound to it) and gpu_free_milli (a list, one entry per GPU, 0..1000). Memory is not
part of the metric (FRAGMENTATION.md, "details that move the number").

Everything is computed on arrays of shape (nodes, GPUs per node, task types), so thousands of nodes against tens
of task types take milliseconds (benchmarks/fragmentation.py). GPU lists are padded with 0: a padded GPU has no
room for any GPU task and no unallocated milli, so it changes neither count, leftovers nor totals.

Partitioned devices (MIG, AMD CPX/DPX..., Ascend vNPU), by gpuledger/partitions.py's rules: a node state may carry
`gpu_partitions`, a list aligned with gpu_free_milli: null for a whole device, else the types of its *free*
instances joined by "," ("" when none is free). Task types may carry `profile` (the instance type asked; num_gpu
then counts instances). Per GPU g and task type t, the units g offers t:
- a whole device and t without profile: one when r[n,g] >= d_t (as the paper);
- a partitioned device and t without profile: none (rule 2, the mode: no whole device and no share, even with
  every instance free);
- a whole device and t with a profile: none (rule 2 the other way);
- a partitioned device and t with profile p: its free instances of p (rule 1: whole instances, not thousandths:
  seven 1g.10gb fit an all-1g GPU whose 7 x 143 milli would not).
t runs on n when the units summed over n's GPUs reach k_t, and its leftovers are the free milli on the GPUs that
offer it no unit. With no partitioned GPU and no profile the arrays and the arithmetic are exactly the paper's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from gpuledger.analytics.fragmentation.task_types import PROFILE, canonical_profiles, require_columns
from gpuledger.partitions import instance_type

MILLI = 1000
NODE_STATE_COLUMNS = ("node", "model", "cpu_free_milli", "gpu_free_milli")
PARTITIONS = "gpu_partitions"  # optional on a node state: per GPU, null (whole) or its free instances' types
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
    # The instance types the task types ask (sorted) and, per type, its index there (-1: no profile). A type with a
    # profile counts instances, not GPUs: num_gpu is the instances it takes.
    profiles: tuple[str, ...] = ()
    profile: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def total_weight(self) -> float:
        return float(self.weight.sum())

    @property
    def profiled(self) -> np.ndarray:
        """(T,) True for a type asking instances of a profile."""
        return self.profile >= 0

    @property
    def has_profiles(self) -> bool:
        return bool(self.profiles)


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
    uses_gpu = (milli > 0) & (gpus > 0)
    profiles: tuple[str, ...] = ()
    profile = np.full(task_types.height, -1, dtype=np.int64)
    if PROFILE in task_types.columns:
        # A type asking no GPU asks no instance either (pod_shapes drops its profile likewise).
        names = np.array(canonical_profiles(task_types[PROFILE], "task_types").to_list(), dtype=object)
        names[~uses_gpu] = ""
        profiles = tuple(sorted(set(names.tolist()) - {""}))
        index = {p: i for i, p in enumerate(profiles)}
        profile = np.array([index.get(p, -1) for p in names], dtype=np.int64)
    return Workload(
        cpu=task_types["cpu_milli"].cast(pl.Int64).to_numpy(),
        milli=milli,
        gpus=gpus,
        uses_gpu=uses_gpu,
        weight=weight,
        allowed=allowed,
        profiles=profiles,
        profile=profile,
    )


def task_profiles(task_types: pl.DataFrame) -> tuple[str, ...]:
    """The instance types a workload asks, as `workload_arrays` orders them (the node state counts only these)."""
    if PROFILE not in task_types.columns:
        return ()
    asks = task_types.filter((pl.col("gpu_milli") > 0) & (pl.col("num_gpu") > 0))[PROFILE]
    return tuple(sorted(set(canonical_profiles(asks, "task_types").to_list()) - {""}))


def gpu_terms(
    free: np.ndarray, w: Workload, whole: np.ndarray | None = None, inst: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per node and task type: the units the node offers the type (GPUs with r >= d_m, or free instances of its
    profile) and the milli on the GPUs that offer it none.

    whole: (N, G) False for a partitioned GPU, None when no GPU is; inst: (N, G, P) free instances of each of
    w.profiles per GPU (0 on whole GPUs), None when the workload asks no profile. With neither, the paper's rule.
    """
    if whole is None and not w.has_profiles:
        room = free[:, :, None] >= w.milli
        return room.sum(axis=1), np.where(room, 0, free[:, :, None]).sum(axis=1)
    room = free[:, :, None] >= w.milli
    if whole is not None:
        room &= whole[:, :, None]  # rule 2: a partitioned GPU offers no whole GPU and no share
    units = room.astype(np.int64)
    if w.has_profiles:
        asked = w.profiled
        # A type with a profile: the free instances of it; never a whole GPU (inst is 0 there).
        units[:, :, asked] = inst[:, :, w.profile[asked]] if inst is not None else 0
    return units.sum(axis=1), np.where(units > 0, 0, free[:, :, None]).sum(axis=1)


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
    whole: np.ndarray | None = None  # (N, G) False for a partitioned GPU; None when none is
    inst: np.ndarray | None = None  # (N, G, P) free instances of each asked profile; None when none is asked


def pad_lists(lists: pl.Series, width: int | None = None) -> np.ndarray:
    """A list column as an (rows, width) int64 matrix, 0-padded on the right."""
    lengths = lists.list.len().fill_null(0).cast(pl.Int64).to_numpy()
    width = max(int(lengths.max(initial=0)), 1) if width is None else width
    out = np.zeros((len(lists), width), dtype=np.int64)
    rows = np.repeat(np.arange(len(lists)), lengths)
    cols = np.arange(len(rows)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    out[rows, cols] = lists.explode().drop_nulls().cast(pl.Int64).to_numpy()
    return out


def partition_lists(nodes: pl.DataFrame) -> pl.DataFrame:
    """The partitioned GPUs of a node state: row (the node's position), gpu (its index), part (its free instances'
    text); a null entry or list is a whole device. ValueError naming the node when a list's length is not its
    gpu_free_milli's."""
    nodes = nodes.with_columns(pl.col(PARTITIONS).cast(pl.List(pl.String)))  # an all-null column reads as whole
    lengths = nodes.select(
        pl.col("gpu_free_milli").list.len().fill_null(0).alias("free"),
        pl.col(PARTITIONS).list.len().alias("parts"),
    )
    bad = np.flatnonzero((lengths["parts"].is_not_null() & (lengths["parts"] != lengths["free"])).to_numpy())
    if len(bad):
        i = int(bad[0])
        raise ValueError(
            f"node {nodes['node'][i]!r}: gpu_partitions has {lengths['parts'][i]} entries, gpu_free_milli "
            f"{lengths['free'][i]} (one per GPU: null for a whole device, else its free instances)"
        )
    return (
        nodes.select(pl.col(PARTITIONS).alias("part"))
        .with_row_index("row")
        .filter(pl.col("part").list.len() > 0)
        .explode("part")
        .with_columns(pl.int_range(pl.len()).over("row").alias("gpu"))
        .filter(pl.col("part").is_not_null())
    )


def partition_arrays(nodes: pl.DataFrame, width: int, profiles: Sequence[str]):
    """(whole, inst) of a node state's gpu_partitions (see `gpu_terms`), or (None, None) when it names no partitioned
    GPU. Every instance type is checked (an unknown one: ValueError naming the node), only the asked ones counted.
    Vectorised: one row per free instance, each distinct text read once."""
    if PARTITIONS not in nodes.columns:
        return None, None
    per_gpu = partition_lists(nodes)
    split = per_gpu.filter(pl.col("part").is_not_null())
    if split.height == 0:
        return None, None
    whole = np.ones((nodes.height, width), dtype=bool)
    whole[split["row"].to_numpy(), split["gpu"].to_numpy()] = False
    each = split.with_columns(pl.col("part").str.split(",")).explode("part")
    each = each.filter(pl.col("part").str.strip_chars() != "")  # "": a partitioned GPU with nothing free
    table = {}
    for raw in each["part"].unique().to_list():
        table[raw] = instance_type(raw)
        if table[raw] is None:
            row = int(each.filter(pl.col("part") == raw)["row"][0])
            raise ValueError(
                f"node {nodes['node'][row]!r}: gpu_partitions names {raw!r}, no partition profile (MIG 1g.10gb, "
                "AMD cpx, Ascend vnpu-2c)"
            )
    inst = np.zeros((nodes.height, width, len(profiles)), dtype=np.int64)
    index = {p: i for i, p in enumerate(profiles)}
    col = each["part"].replace_strict({k: index.get(v, -1) for k, v in table.items()}, return_dtype=pl.Int64)
    col = col.cast(pl.Int64).to_numpy()
    asked = col >= 0
    rows, gpus = each["row"].cast(pl.Int64).to_numpy(), each["gpu"].cast(pl.Int64).to_numpy()
    np.add.at(inst, (rows[asked], gpus[asked], col[asked]), 1)
    return whole, inst


def node_arrays(nodes: pl.DataFrame, profiles: Sequence[str] = ()) -> NodeArrays:
    """The node state as arrays; `profiles`: the instance types the workload asks (`task_profiles`)."""
    require_columns(nodes, "nodes", NODE_STATE_COLUMNS)
    model_names = nodes["model"].fill_null("").to_list()
    models = sorted(set(model_names))
    index = {m: i for i, m in enumerate(models)}
    free = pad_lists(nodes["gpu_free_milli"])
    bad = np.flatnonzero(((free < 0) | (free > MILLI)).any(axis=1))
    if len(bad):
        raise ValueError(f"node {nodes['node'][int(bad[0])]!r}: gpu_free_milli must lie in 0..1000")
    whole, inst = partition_arrays(nodes, free.shape[1], profiles)
    if inst is None and profiles:
        inst = np.zeros((*free.shape, len(profiles)), dtype=np.int64)  # asked, but no GPU is partitioned
    return NodeArrays(
        models=models,
        model=np.array([index[m] for m in model_names], dtype=np.int64),
        cpu=nodes["cpu_free_milli"].cast(pl.Int64).to_numpy(),
        free=free,
        gpus=nodes["gpu_free_milli"].list.len().fill_null(0).cast(pl.Int64).to_numpy(),
        whole=whole,
        inst=inst,
    )


def node_fragmentation(nodes: pl.DataFrame, task_types: pl.DataFrame) -> pl.DataFrame:
    """F_n(M) of every node, in milli-GPU.

    nodes: node state (node, model, cpu_free_milli, gpu_free_milli: list of per-GPU free milli; optionally
    gpu_partitions, aligned with it: null for a whole device, else its free instances' types joined by ",").
    task_types: cpu_milli, gpu_milli, num_gpu, gpu_spec ('|'-separated models, ""/null = any), optionally profile
    (the instance type asked, ""/null = none) and a popularity: count (preferred: sums stay exact integers) or p.
    `typical_task_types` returns both.
    Returns node, model, gpus, unallocated_milli (sum of free milli) and frag_milli (F_n(M)), in input order.
    """
    a = node_arrays(nodes, task_profiles(task_types))
    w = workload_arrays(task_types, a.models)
    count, small = gpu_terms(a.free, w, a.whole, a.inst)
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

    nodes: node state (node, model, gpu_free_milli, optionally gpu_partitions). A GPU is whole-free at 1000 milli
    and not partitioned: a partitioned GPU offers no whole device even with every instance free (partitions.py's
    rule 2: the device plugin lists its instances, not the GPU), so it is never counted here. CPU is not considered.
    Returns model, job_gpus (N), free_whole_gpus and stranded_whole_gpus, per GPU model (sorted) and then for the
    whole fleet, where model is null (a rollup row per N).
    """
    require_columns(nodes, "nodes", ("model", "gpu_free_milli"))
    # Nodes without GPUs add nothing, and their null model would read as the fleet rollup.
    per_node = nodes.filter(pl.col("gpu_free_milli").list.len() > 0).select(
        pl.col("model").fill_null(""),
        pl.col("gpu_free_milli").list.eval(pl.element() == MILLI).list.sum().cast(pl.Int64).alias("whole"),
    )
    if PARTITIONS in nodes.columns:
        require_columns(nodes, "nodes", ("node",))
        free = pad_lists(nodes["gpu_free_milli"])
        whole, _ = partition_arrays(nodes, free.shape[1], ())
        if whole is not None:
            count = ((free == MILLI) & whole).sum(axis=1)
            has_gpu = (nodes["gpu_free_milli"].list.len().fill_null(0) > 0).to_numpy()
            per_node = per_node.with_columns(pl.Series("whole", count[has_gpu], dtype=pl.Int64))
    per_size = per_node.join(pl.DataFrame({"job_gpus": list(sizes)}, schema={"job_gpus": pl.Int64}), how="cross")
    whole = pl.col("whole")
    aggs = [
        whole.sum().alias("free_whole_gpus"),
        pl.when(whole < pl.col("job_gpus")).then(whole).otherwise(0).sum().alias("stranded_whole_gpus"),
    ]
    by_model = per_size.group_by("model", "job_gpus").agg(aggs).sort("model", "job_gpus")
    fleet = per_size.group_by("job_gpus").agg(aggs).sort("job_gpus")
    return pl.concat([by_model, fleet.select(pl.lit(None, pl.String).alias("model"), pl.all())])
