"""replay: place pods one by one, with no departures, and log allocation and fragmentation after each pod.

This is the artifact's experiment (FRAGMENTATION.md, "Replay method of the artifact"), for what-ifs ("how
fragmented would this fleet be under FGD?") and to check our metric against the paper's published curves.

Placement follows the artifact (kubernetes-scheduler-simulator, plugins in pkg/simulator/plugin/):
- Filter: free CPU >= request, free memory >= request (when both frames have memory_mib), the GPU-model check,
  and k GPUs with r >= d (for whole-GPU pods: k fully free GPUs).
- BestFit (best_fit_score.go): score = int(100 * (1 - (0.5 * (C_n - c)/128000 + 0.5 * (R_n - k*d)/8000))), where
  R_n is the node's total free GPU milli and the constants are the artifact's MaxSpecCpu and MaxSpecGpu: the node
  left with the least normalised free CPU plus GPU wins. A sharing pod takes the tightest-fitting GPU (smallest
  free milli that fits, lowest index on a tie; open_gpu_share.go allocateGpuIdBasedOnBestFit).
- FGD (fgd_score.go): score = int(100 * sigmoid((F_n(M) - F_n'(M)) / 1000)) for the hypothetical placement; a
  sharing pod tries each GPU with room and keeps the lowest-index GPU with the best score.
- Whole-GPU pods take the lowest-index fully free GPUs (AllocateExclusiveGpuId).
- Ties between nodes go to a fixed node order drawn from the seed. The artifact prefixes node names with a seeded
  permutation and its scheduler keeps the first of equal scores; FGD's truncated score ties often, and random
  tie-breaking lowers its allocation from about 95% to 90% (FRAGMENTATION.md).

Speed: a node's verdict and score for a pod depend only on that node's state and the pod's shape, so they are
cached per pod shape and recomputed only for nodes changed since that shape was last seen. The openb default
workload (about 10,600 pods on 1,213 nodes) replays in a few seconds (benchmarks/fragmentation.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from gpuledger.analytics.fragmentation.metric import (
    MILLI,
    Workload,
    allowed_models,
    gpu_terms,
    weighted_frag,
    workload_arrays,
)
from gpuledger.analytics.fragmentation.task_types import pod_shapes, require_columns

POLICIES = ("fgd", "bestfit")
MAX_SPEC_CPU = 128_000  # the artifact's normalisers for BestFit (open-gpu-share utils/const.go)
MAX_SPEC_GPU = 8_000
NO_NODE = -1
LOG_SCHEMA = pl.Schema(
    {
        "pod": pl.Int64,
        "node": pl.String,
        "gpu_index": pl.List(pl.Int64),
        "arrived_gpu_milli": pl.Int64,
        "allocated_gpu_milli": pl.Int64,
        "unallocated_gpu_milli": pl.Int64,
        "frag_milli": pl.Float64,
    }
)


@dataclass(frozen=True)
class ReplayResult:
    """log: one row per pod in arrival order (LOG_SCHEMA; node and gpu_index are null for a pod that found no
    node). nodes: the final node state (node, model, cpu_free_milli, gpu_free_milli, and memory_free_mib when
    the cluster gave memory_mib), ready for node_fragmentation and stranded_whole_gpus."""

    log: pl.DataFrame
    nodes: pl.DataFrame


def inflate_workload(pods: pl.DataFrame, capacity_gpus: int, ratio: float = 1.3, seed: int = 0) -> pl.DataFrame:
    """The artifact's replay input: the pods shuffled, then random copies appended until GPU requests reach
    `ratio` x capacity (or random pods dropped while they exceed it).

    Sampling stops at the first copy whose per-GPU share would pass the target: the artifact checks gpu_milli,
    not num_gpu x gpu_milli (simulator.go tuneUpPods), so the total may overshoot by up to 7 GPUs.
    Our RNG (numpy PCG64) differs from the artifact's Go math/rand, so seeds do not match its runs one to one.
    """
    require_columns(pods, "pods", ("cpu_milli", "num_gpu", "gpu_milli"))
    asks = pod_shapes(pods)
    share = asks["gpu_milli"].to_numpy()
    request = share * asks["num_gpu"].to_numpy()
    if request.sum() <= 0:
        raise ValueError("pods ask for no GPU: there is no GPU demand to inflate")
    rng = np.random.default_rng(seed)
    order = list(rng.permutation(pods.height))
    target = ratio * MILLI * capacity_gpus
    total = int(request.sum())
    if total > target:
        while total > target:
            total -= int(request[order.pop(int(rng.integers(len(order))))])
        return pods[order]
    while total < target:
        i = int(rng.integers(pods.height))
        if total + share[i] > target:
            break
        order.append(i)
        total += int(request[i])
    return pods[order]


class _State:
    """The cluster as arrays, plus the per-node terms FGD needs (kept current after each placement)."""

    def __init__(self, cluster: pl.DataFrame, w: Workload, models: list[str]):
        self.names = cluster["node"].to_list()
        index = {m: i for i, m in enumerate(models)}
        self.models = models
        self.model = np.array([index[m] for m in cluster["model"].fill_null("").to_list()], dtype=np.int64)
        self.gpus = cluster["gpus"].cast(pl.Int64).to_numpy()
        width = max(int(self.gpus.max(initial=0)), 1)
        self.free = np.where(np.arange(width) < self.gpus[:, None], MILLI, 0).astype(np.int64)
        self.cpu = cluster["cpu_milli"].cast(pl.Int64).to_numpy().copy()
        mem = cluster["memory_mib"] if "memory_mib" in cluster.columns else pl.Series([0] * cluster.height)
        self.mem = mem.cast(pl.Int64).to_numpy().copy()
        self.version = np.zeros(cluster.height, dtype=np.int64)
        self.w = w
        self.count, self.small = gpu_terms(self.free, w)
        self.total = self.free.sum(axis=1)
        self.frag = weighted_frag(self.count, self.small, self.total, self.cpu, self.model, w)

    def place(self, n: int, gpus: np.ndarray, milli: int, cpu: int, mem: int) -> None:
        self.free[n, gpus] -= milli
        self.cpu[n] -= cpu
        self.mem[n] -= mem
        self.version[n] += 1
        count, small = gpu_terms(self.free[n : n + 1], self.w)
        self.count[n], self.small[n] = count[0], small[0]
        self.total[n] = self.free[n].sum()
        one = slice(n, n + 1)
        self.frag[n] = weighted_frag(count, small, self.total[one], self.cpu[one], self.model[one], self.w)[0]


def _swap(count, small, old, new, times, milli):
    """count/small after `times` GPUs go from `old` to `new` free milli (old/new broadcast against the types)."""
    count = count + times * ((new >= milli).astype(np.int64) - (old >= milli))
    small = small + times * (np.where(new < milli, new, 0) - np.where(old < milli, old, 0))
    return count, small


def _first_of_equal(free: np.ndarray) -> np.ndarray:
    """True where a GPU is the lowest-index one with its free milli on its node: equal GPUs score the same."""
    width = free.shape[1]
    earlier = np.tri(width, k=-1, dtype=bool)  # earlier[g, h]: h < g
    return ~((free[:, :, None] == free[:, None, :]) & earlier).any(axis=2)


def _fgd_score(before: np.ndarray, after: np.ndarray, total_weight: float) -> np.ndarray:
    x = (before - after) / (total_weight * MILLI)
    # The artifact's int64(sigmoid(x) * 100), in its order of operations; astype truncates toward zero like Go.
    return ((1.0 / (1.0 + np.exp(-x))) * 100.0).astype(np.int64)


def _evaluate(st: _State, idx: np.ndarray, pod: tuple, model_ok: np.ndarray, policy: str):
    """For the nodes `idx`: can the pod run (ignoring memory), its score, and the GPU a sharing pod would take."""
    cpu_req, gpus_req, milli = pod
    free, cpu = st.free[idx], st.cpu[idx]
    uses_gpu = gpus_req * milli > 0
    ok = cpu >= cpu_req
    if uses_gpu:
        ok &= model_ok[st.model[idx]] & ((free >= milli).sum(axis=1) >= gpus_req)
    sharing = uses_gpu and milli < MILLI
    gpu = np.full(len(idx), -1, dtype=np.int64)
    if policy == "bestfit":
        left = (cpu - cpu_req) / MAX_SPEC_CPU * 0.5 + (st.total[idx] - gpus_req * milli) / MAX_SPEC_GPU * 0.5
        if sharing:
            gpu = np.where(free >= milli, free, MILLI + 1).argmin(axis=1)
        return ok, ((1.0 - left) * 100).astype(np.int64), gpu
    w = st.w
    if not sharing:
        # A whole-GPU pod empties k fully free GPUs; a CPU-only pod changes only the node's CPU.
        times = gpus_req if uses_gpu else 0
        count, small = _swap(st.count[idx], st.small[idx], MILLI, 0, times, w.milli)
        after = weighted_frag(count, small, st.total[idx] - times * MILLI, cpu - cpu_req, st.model[idx], w)
        return ok, _fgd_score(st.frag[idx], after, w.total_weight), gpu
    rows, cols = np.nonzero((free >= milli) & _first_of_equal(free) & ok[:, None])
    old = free[rows, cols][:, None]
    count, small = _swap(st.count[idx][rows], st.small[idx][rows], old, old - milli, 1, w.milli)
    n = idx[rows]
    after = weighted_frag(count, small, st.total[n] - milli, st.cpu[n] - cpu_req, st.model[n], w)
    grid = np.full(free.shape, -1, dtype=np.int64)
    grid[rows, cols] = _fgd_score(st.frag[n], after, w.total_weight)
    return ok, grid.max(axis=1), grid.argmax(axis=1)  # argmax keeps the lowest index among equal scores


class _Cache:
    """Verdicts and scores for one pod shape, valid for the node versions they were computed at."""

    def __init__(self, nodes: int):
        self.version = np.full(nodes, -1, dtype=np.int64)
        self.ok = np.zeros(nodes, dtype=bool)
        self.score = np.zeros(nodes, dtype=np.int64)
        self.gpu = np.full(nodes, -1, dtype=np.int64)


def replay(
    cluster: pl.DataFrame, pods: pl.DataFrame, task_types: pl.DataFrame, policy: str = "fgd", seed: int = 0
) -> ReplayResult:
    """Place `pods` in order on an empty `cluster` under `policy`; no pod ever leaves.

    cluster: node, model, cpu_milli, gpus and optionally memory_mib (capacities).
    pods: cpu_milli, num_gpu, gpu_milli, optionally gpu_spec and memory_mib, in arrival order. A pod asking
    for more than one GPU must ask for whole GPUs (gpu_milli 1000), as in the openb traces.
    task_types: the target workload M (see typical_task_types); used for the logged metric and by FGD.
    seed: draws the node order that breaks ties between equal scores.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; policies are: {', '.join(POLICIES)}")
    require_columns(cluster, "cluster", ("node", "model", "cpu_milli", "gpus"))
    require_columns(pods, "pods", ("cpu_milli", "num_gpu", "gpu_milli"))
    shapes = pod_shapes(pods)
    bad = shapes.filter((pl.col("gpu_milli") > MILLI) | ((pl.col("num_gpu") > 1) & (pl.col("gpu_milli") < MILLI)))
    if bad.height:
        raise ValueError(
            f"{bad.height} pod(s) ask for gpu_milli > 1000, or for several GPUs with gpu_milli < 1000 (first: "
            f"num_gpu={bad['num_gpu'][0]}, gpu_milli={bad['gpu_milli'][0]}); a pod shares at most one GPU"
        )
    models = sorted(set(cluster["model"].fill_null("").to_list()))
    w = workload_arrays(task_types, models)
    st = _State(cluster, w, models)
    check_mem = "memory_mib" in cluster.columns and "memory_mib" in pods.columns
    pod_mem = pods["memory_mib"].cast(pl.Int64).to_numpy() if check_mem else np.zeros(pods.height, dtype=np.int64)
    rank = np.empty(len(st.names), dtype=np.int64)
    rank[np.random.default_rng(seed).permutation(len(st.names))] = np.arange(len(st.names))

    caches: dict[tuple, _Cache] = {}
    spec_ok: dict[str, np.ndarray] = {}
    placed = np.full(pods.height, NO_NODE, dtype=np.int64)
    gpu_index: list[list[int] | None] = [None] * pods.height
    arrived = np.zeros(pods.height, dtype=np.int64)
    allocated = np.zeros(pods.height, dtype=np.int64)
    frag = np.zeros(pods.height, dtype=np.float64)
    arrived_total = allocated_total = 0
    capacity = int(st.gpus.sum()) * MILLI
    for i, (cpu_req, milli, gpus_req, spec) in enumerate(shapes.iter_rows()):
        arrived_total += gpus_req * milli
        key = (cpu_req, gpus_req, milli, spec)
        cache = caches.setdefault(key, _Cache(len(st.names)))
        stale = np.flatnonzero(cache.version != st.version)
        if len(stale):
            model_ok = spec_ok.setdefault(spec, allowed_models(spec, st.models))
            ok, score, gpu = _evaluate(st, stale, (cpu_req, gpus_req, milli), model_ok, policy)
            cache.ok[stale], cache.score[stale], cache.gpu[stale] = ok, score, gpu
            cache.version[stale] = st.version[stale]
        feasible = np.flatnonzero(cache.ok & (st.mem >= pod_mem[i]))
        if len(feasible):
            best = feasible[cache.score[feasible] == cache.score[feasible].max()]
            n = int(best[rank[best].argmin()])
            if gpus_req * milli == 0:
                chosen = np.zeros(0, dtype=np.int64)
            elif milli < MILLI:
                chosen = cache.gpu[n : n + 1].copy()
            else:
                chosen = np.flatnonzero(st.free[n] == MILLI)[:gpus_req]
            st.place(n, chosen, milli, cpu_req, int(pod_mem[i]))
            placed[i], gpu_index[i] = n, chosen.tolist() if len(chosen) else None
            allocated_total += gpus_req * milli
        arrived[i], allocated[i] = arrived_total, allocated_total
        frag[i] = st.frag.sum() / w.total_weight

    names = np.array(st.names + [None], dtype=object)
    log = pl.DataFrame(
        {
            "pod": np.arange(pods.height),
            "node": names[placed].tolist(),
            "gpu_index": gpu_index,
            "arrived_gpu_milli": arrived,
            "allocated_gpu_milli": allocated,
            "unallocated_gpu_milli": capacity - allocated,
            "frag_milli": frag,
        },
        schema=LOG_SCHEMA,
    )
    return ReplayResult(log=log, nodes=_final_nodes(st, cluster))


def _final_nodes(st: _State, cluster: pl.DataFrame) -> pl.DataFrame:
    free = [row[:g].tolist() for row, g in zip(st.free, st.gpus, strict=True)]
    out = cluster.select("node", "model").with_columns(
        pl.Series("cpu_free_milli", st.cpu, dtype=pl.Int64),
        pl.Series("gpu_free_milli", free, dtype=pl.List(pl.Int64)),
    )
    if "memory_mib" in cluster.columns:
        out = out.with_columns(pl.Series("memory_free_mib", st.mem, dtype=pl.Int64))
    return out


def arrival_bins(log: pl.DataFrame, capacity_gpus: int) -> pl.DataFrame:
    """The artifact's curves (experiments/analysis/merge_*_discrete.py): per whole percent of capacity arrived,
    the mean allocation and fragmentation over the pods logged at that percent.

    A row's arrived percent is rounded half to even (pandas round); a percent no row rounds to takes the mean
    of the rows at the percents either side. Returns arrived_pct, alloc_pct (allocated milli over capacity) and
    frag_pct (F(M) over capacity: the paper's "fragmented % of GPUs"), for every percent with data.
    """
    require_columns(log, "log", ("arrived_gpu_milli", "allocated_gpu_milli", "frag_milli"))
    scale = 100 / (MILLI * capacity_gpus)
    pct = np.rint(log["arrived_gpu_milli"].to_numpy() * scale).astype(np.int64)
    if len(pct) == 0:
        return pl.DataFrame(schema={"arrived_pct": pl.Int64, "alloc_pct": pl.Float64, "frag_pct": pl.Float64})
    bins = int(pct.max()) + 2
    rows = np.bincount(pct, minlength=bins)
    alloc = np.bincount(pct, log["allocated_gpu_milli"].to_numpy() * scale, minlength=bins)
    frag = np.bincount(pct, log["frag_milli"].to_numpy() * scale, minlength=bins)
    out = []
    for k in range(bins - 1):
        near = slice(k, k + 1) if rows[k] else slice(max(k - 1, 0), k + 2)
        n = rows[near].sum()
        if n:
            out.append((k, alloc[near].sum() / n, frag[near].sum() / n))
    return pl.DataFrame(
        out, schema={"arrived_pct": pl.Int64, "alloc_pct": pl.Float64, "frag_pct": pl.Float64}, orient="row"
    )
