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

Partitioned devices (gpuledger/partitions.py's rules and frames): the cluster may carry `gpu_layout`, per GPU null
(a whole device) or its layout's instance types joined by ","; pods may carry `profile`, the instance type they ask.
- A partitioned GPU starts with 1000 free milli and every instance of its layout free. A profile pod takes num_gpu
  free instances of its type on one node (they may spread over the node's GPUs). A GPU's free milli is then
  1000 - round(1000 x the shares held), the exact shares (MIG g/7, AMD 1/partitions, a vNPU's cores over the chip's;
  the pod's gpu_milli / 1000 where partitions.py cannot tell): an all-1g H100 with 6 of 7 held shows 143 free, with
  all 7 held 0 (not 1000 - 7 x 143 = -1). The log's allocated milli counts what the GPUs' free milli lost.
- The mode rule: a whole-GPU or share pod never goes to a partitioned GPU, a profile pod never to a whole one.
- BestFit puts a profile pod's instances one by one on the tightest GPU with a free instance of its type (fewest
  free instances of any type, then lowest index); its node score is the formula above.
- FGD places a profile pod's instances one by one, each on the GPU whose hypothetical placement scores best
  (lowest index on a tie), and scores the node by the last: for one instance, "try each GPU, keep the best" as
  for a share.
With no gpu_layout and no profile the arrays, the rules and the published-curve results are the paper's.

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
from gpuledger.analytics.fragmentation.task_types import PROFILE, pod_shapes, require_columns
from gpuledger.partitions import format_layout, instance_share, parse_layout

POLICIES = ("fgd", "bestfit")
MAX_SPEC_CPU = 128_000  # the artifact's normalisers for BestFit (open-gpu-share utils/const.go)
MAX_SPEC_GPU = 8_000
NO_NODE = -1
LAYOUT = "gpu_layout"  # optional on a cluster: per GPU, null (whole) or its layout's instance types joined by ","
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
    node; a profile pod's gpu_index has one entry per instance, a GPU twice when it took two there). nodes: the
    final node state (node, model, cpu_free_milli, gpu_free_milli, gpu_partitions when the cluster gave
    gpu_layout, and memory_free_mib when it gave memory_mib), ready for node_fragmentation and
    stranded_whole_gpus."""

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


def _layouts(cluster: pl.DataFrame) -> pl.DataFrame:
    """The cluster's gpu_layout one row per partitioned GPU: row (the node's position), gpu, layout (its canonical
    instance types, read and checked against the node's model by partitions.parse_layout: `format_layout`'s text,
    or an operator's `all-1g.10gb`, `cpx`, `vnpu-5c*4`). ValueError naming the node for a
    list whose length is not the node's gpus, or a layout the device cannot hold; each distinct layout and model
    is checked once."""
    cluster = cluster.with_columns(pl.col(LAYOUT).cast(pl.List(pl.String)))  # an all-null column reads as whole
    lengths = cluster.select(pl.col(LAYOUT).list.len().alias("n"), pl.col("gpus").cast(pl.Int64))
    bad = np.flatnonzero((lengths["n"].is_not_null() & (lengths["n"] != lengths["gpus"])).to_numpy())
    if len(bad):
        i = int(bad[0])
        raise ValueError(
            f"node {cluster['node'][i]!r}: gpu_layout has {lengths['n'][i]} entries for {lengths['gpus'][i]} GPUs "
            "(one per GPU: null for a whole device, else its layout)"
        )
    per_gpu = (
        cluster.select(pl.col(LAYOUT), pl.col("model").fill_null(""))
        .with_row_index("row")
        .filter(pl.col(LAYOUT).list.len() > 0)
        .explode(LAYOUT)
        .with_columns(pl.int_range(pl.len()).over("row").alias("gpu"))
        .filter(pl.col(LAYOUT).is_not_null())
    )
    checked = {}
    for text, model, row in per_gpu.unique([LAYOUT, "model"], keep="first").select(LAYOUT, "model", "row").rows():
        try:
            checked[(text, model)] = parse_layout(text, model or None)
        except ValueError as e:
            raise ValueError(f"node {cluster['node'][row]!r}: gpu_layout {text!r}: {e}") from None
    layouts = [checked[k] for k in zip(per_gpu[LAYOUT].to_list(), per_gpu["model"].to_list(), strict=True)]
    return per_gpu.select("row", "gpu").with_columns(pl.Series("layout", layouts, dtype=pl.List(pl.String)))


class _State:
    """The cluster as arrays, plus the per-node terms FGD needs (kept current after each placement).

    Partitions (None/empty without gpu_layout and profiles): `types` the instance types of the layouts, the
    workload and the pods; inst[n, g, v] the free instances of types[v] on GPU g; whole[n, g] False for a
    partitioned GPU; held[n, g] the share of a partitioned GPU its taken instances hold (free milli follows it)."""

    def __init__(self, cluster: pl.DataFrame, w: Workload, models: list[str], pod_types: tuple[str, ...] = ()):
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
        self.whole: np.ndarray | None = None
        self.inst: np.ndarray | None = None
        self.layout: dict[tuple[int, int], tuple[str, ...]] = {}
        layouts = _layouts(cluster) if LAYOUT in cluster.columns else None
        self.types = tuple(
            sorted(
                set(w.profiles)
                | set(pod_types)
                | (set(layouts["layout"].explode().to_list()) if layouts is not None else set())
            )
        )
        if self.types:
            self.held = np.zeros(self.free.shape, dtype=np.float64)
            self.inst = np.zeros((*self.free.shape, len(self.types)), dtype=np.int64)
            self.wcols = np.array([self.types.index(p) for p in w.profiles], dtype=np.int64)
        if layouts is not None and layouts.height:
            rows, gpus = layouts["row"].to_numpy(), layouts["gpu"].to_numpy()
            self.whole = np.ones(self.free.shape, dtype=bool)
            self.whole[rows, gpus] = False
            at = zip(rows.tolist(), gpus.tolist(), strict=True)
            self.layout = dict(zip(at, layouts["layout"].to_list(), strict=True))
            each = layouts.explode("layout")
            v = each["layout"].replace_strict({t: i for i, t in enumerate(self.types)}, return_dtype=pl.Int64)
            rows, gpus = each["row"].cast(pl.Int64).to_numpy(), each["gpu"].cast(pl.Int64).to_numpy()
            np.add.at(self.inst, (rows, gpus, v.cast(pl.Int64).to_numpy()), 1)
        self.shares: dict[tuple[int, int], float | None] = {}
        self.count, self.small = self.terms(slice(None))
        self.total = self.free.sum(axis=1)
        self.frag = weighted_frag(self.count, self.small, self.total, self.cpu, self.model, w)

    def winst(self, rows) -> np.ndarray | None:
        """inst over the workload's profiles (gpu_terms' inst) for `rows`."""
        return self.inst[rows][:, :, self.wcols] if self.w.has_profiles else None

    def terms(self, rows) -> tuple[np.ndarray, np.ndarray]:
        if self.inst is None and self.whole is None:  # no partitions: the paper's terms, nothing more per pod
            return gpu_terms(self.free[rows], self.w)
        whole = self.whole[rows] if self.whole is not None else None
        return gpu_terms(self.free[rows], self.w, whole, self.winst(rows))

    def share(self, model: int, v: int) -> float | None:
        """One instance of types[v]'s share of a GPU of models[model] (None where partitions.py cannot tell)."""
        key = (model, v)
        if key not in self.shares:
            self.shares[key] = instance_share(self.types[v], self.models[model] or None)
        return self.shares[key]

    def place(self, n: int, gpus: np.ndarray, milli: int, cpu: int, mem: int, v: int = -1) -> None:
        """Take the pod's GPUs: `milli` of each, or (v >= 0, a profile pod) one instance of types[v] per entry."""
        if v < 0:
            self.free[n, gpus] -= milli
        else:
            share = self.share(int(self.model[n]), v)
            for g in gpus.tolist():
                self.inst[n, g, v] -= 1
                self.held[n, g] += milli / MILLI if share is None else share
            self.free[n, gpus] = MILLI - np.rint(self.held[n, gpus] * MILLI).astype(np.int64)
        self.cpu[n] -= cpu
        self.mem[n] -= mem
        self.version[n] += 1
        one = slice(n, n + 1)
        count, small = self.terms(one)
        self.count[n], self.small[n] = count[0], small[0]
        self.total[n] = self.free[n].sum()
        self.frag[n] = weighted_frag(count, small, self.total[one], self.cpu[one], self.model[one], self.w)[0]


def _swap(count, small, old, new, times, w: Workload):
    """count/small after `times` whole GPUs go from `old` to `new` free milli (old/new broadcast against the
    types). A whole GPU offers a type with a profile nothing, before and after: only its leftovers move."""
    milli = w.milli
    if not w.has_profiles:
        count = count + times * ((new >= milli).astype(np.int64) - (old >= milli))
        small = small + times * (np.where(new < milli, new, 0) - np.where(old < milli, old, 0))
        return count, small
    shares = ~w.profiled
    room_new, room_old = (new >= milli) & shares, (old >= milli) & shares
    count = count + times * (room_new.astype(np.int64) - room_old)
    small = small + times * (np.where(room_new, 0, new) - np.where(room_old, 0, old))
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
    """For the nodes `idx`: can the pod run (ignoring memory), its score, and the GPUs it would take ((nodes, 1):
    a sharing pod's GPU under either policy; (nodes, k): a profile pod's instances under FGD; else -1)."""
    cpu_req, gpus_req, milli, v = pod
    if v >= 0:
        return _evaluate_instances(st, idx, pod, model_ok, policy)
    free, cpu = st.free[idx], st.cpu[idx]
    uses_gpu = gpus_req * milli > 0
    room = free >= milli
    if st.whole is not None:
        room &= st.whole[idx]  # the mode rule: no whole GPU and no share of a partitioned one
    ok = cpu >= cpu_req
    if uses_gpu:
        ok &= model_ok[st.model[idx]] & (room.sum(axis=1) >= gpus_req)
    sharing = uses_gpu and milli < MILLI
    gpu = np.full((len(idx), 1), -1, dtype=np.int64)
    if policy == "bestfit":
        left = (cpu - cpu_req) / MAX_SPEC_CPU * 0.5 + (st.total[idx] - gpus_req * milli) / MAX_SPEC_GPU * 0.5
        if sharing:
            gpu[:, 0] = np.where(room, free, MILLI + 1).argmin(axis=1)
        return ok, ((1.0 - left) * 100).astype(np.int64), gpu
    w = st.w
    if not sharing:
        # A whole-GPU pod empties k fully free GPUs; a CPU-only pod changes only the node's CPU.
        times = gpus_req if uses_gpu else 0
        count, small = _swap(st.count[idx], st.small[idx], MILLI, 0, times, w)
        after = weighted_frag(count, small, st.total[idx] - times * MILLI, cpu - cpu_req, st.model[idx], w)
        return ok, _fgd_score(st.frag[idx], after, w.total_weight), gpu
    # Equal GPUs score the same; a partitioned GPU (-1) is no candidate, so it must not hide an equal whole one.
    key = free if st.whole is None else np.where(st.whole[idx], free, -1)
    rows, cols = np.nonzero(room & _first_of_equal(key) & ok[:, None])
    old = free[rows, cols][:, None]
    count, small = _swap(st.count[idx][rows], st.small[idx][rows], old, old - milli, 1, w)
    n = idx[rows]
    after = weighted_frag(count, small, st.total[n] - milli, st.cpu[n] - cpu_req, st.model[n], w)
    grid = np.full(free.shape, -1, dtype=np.int64)
    grid[rows, cols] = _fgd_score(st.frag[n], after, w.total_weight)
    gpu[:, 0] = grid.argmax(axis=1)  # argmax keeps the lowest index among equal scores
    return ok, grid.max(axis=1), gpu


def _evaluate_instances(st: _State, idx: np.ndarray, pod: tuple, model_ok: np.ndarray, policy: str):
    """_evaluate for a profile pod: k free instances of types[v] on one node, only on partitioned GPUs."""
    cpu_req, k, milli, v = pod
    cpu = st.cpu[idx]
    ok = (cpu >= cpu_req) & model_ok[st.model[idx]] & (st.inst[idx][:, :, v].sum(axis=1) >= k)
    gpu = np.full((len(idx), k), -1, dtype=np.int64)
    score = np.zeros(len(idx), dtype=np.int64)
    if policy == "bestfit":  # its GPUs are the chosen node's tightest (_tightest), picked once the node is
        left = (cpu - cpu_req) / MAX_SPEC_CPU * 0.5 + (st.total[idx] - k * milli) / MAX_SPEC_GPU * 0.5
        return ok, ((1.0 - left) * 100).astype(np.int64), gpu
    # FGD, one instance at a time: every GPU with a free instance is tried on a copy of the node; the best score
    # (lowest GPU on a tie) is kept and the next instance is tried on the node as it would then be.
    fits = np.flatnonzero(ok)
    if len(fits) == 0:
        return ok, score, gpu
    nodes = idx[fits]
    free, held, inst = st.free[nodes].copy(), st.held[nodes].copy(), st.inst[nodes].copy()
    whole = st.whole[nodes] if st.whole is not None else np.ones(free.shape, dtype=bool)
    by_model = np.array([st.share(m, v) or milli / MILLI for m in range(len(st.models))], dtype=np.float64)
    share = by_model[st.model[nodes]]
    w = st.w
    width = free.shape[1]
    best = np.zeros(len(nodes), dtype=np.int64)
    for step in range(k):
        rows, cols = np.nonzero(inst[:, :, v] > 0)
        # One copy of its node per candidate GPU, the instance taken there.
        f, h, i = free[rows], held[rows], inst[rows]
        at = np.arange(len(rows))
        h[at, cols] += share[rows]
        f[at, cols] = MILLI - np.rint(h[at, cols] * MILLI).astype(np.int64)
        i[at, cols, v] -= 1
        count, small = gpu_terms(f, w, whole[rows], i[:, :, st.wcols] if w.has_profiles else None)
        n = nodes[rows]
        after = weighted_frag(count, small, f.sum(axis=1), st.cpu[n] - cpu_req, st.model[n], w)
        grid = np.full((len(nodes), width), -1, dtype=np.int64)
        grid[rows, cols] = _fgd_score(st.frag[n], after, w.total_weight)
        g = grid.argmax(axis=1)
        best = grid.max(axis=1)
        at = np.arange(len(nodes))
        gpu[fits, step] = g
        held[at, g] += share
        free[at, g] = MILLI - np.rint(held[at, g] * MILLI).astype(np.int64)
        inst[at, g, v] -= 1
    score[fits] = best
    return ok, score, gpu


def _tightest(st: _State, n: int, v: int, k: int) -> np.ndarray:
    """BestFit's GPUs for k instances of types[v] on node n: one at a time, the GPU with a free one and the fewest
    free instances of any type (lowest index on a tie)."""
    inst = st.inst[n].copy()
    out = []
    for _ in range(k):
        g = int(np.where(inst[:, v] > 0, inst.sum(axis=1), np.iinfo(np.int64).max).argmin())
        out.append(g)
        inst[g, v] -= 1
    return np.array(out, dtype=np.int64)


class _Cache:
    """Verdicts and scores for one pod shape, valid for the node versions they were computed at."""

    def __init__(self, nodes: int, width: int = 1):
        self.version = np.full(nodes, -1, dtype=np.int64)
        self.ok = np.zeros(nodes, dtype=bool)
        self.score = np.zeros(nodes, dtype=np.int64)
        self.gpu = np.full((nodes, width), -1, dtype=np.int64)


def replay(
    cluster: pl.DataFrame, pods: pl.DataFrame, task_types: pl.DataFrame, policy: str = "fgd", seed: int = 0
) -> ReplayResult:
    """Place `pods` in order on an empty `cluster` under `policy`; no pod ever leaves.

    cluster: node, model, cpu_milli, gpus and optionally memory_mib (capacities) and gpu_layout (per GPU: null
    for a whole device, else its layout's instance types joined by ",", or as parse_layout reads it: all-1g.10gb).
    pods: cpu_milli, num_gpu, gpu_milli, optionally gpu_spec, memory_mib and profile (the instance type asked:
    num_gpu counts instances, gpu_milli is one instance's share x 1000), in arrival order. A pod asking for more
    than one GPU must ask for whole GPUs (gpu_milli 1000), as in the openb traces, or for instances.
    task_types: the target workload M (see typical_task_types); used for the logged metric and by FGD.
    seed: draws the node order that breaks ties between equal scores.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; policies are: {', '.join(POLICIES)}")
    require_columns(cluster, "cluster", ("node", "model", "cpu_milli", "gpus"))
    require_columns(pods, "pods", ("cpu_milli", "num_gpu", "gpu_milli"))
    shapes = pod_shapes(pods)
    shares = (pl.col("num_gpu") > 1) & (pl.col("gpu_milli") < MILLI) & (pl.col(PROFILE) == "")
    bad = shapes.filter((pl.col("gpu_milli") > MILLI) | shares)
    if bad.height:
        raise ValueError(
            f"{bad.height} pod(s) ask for gpu_milli > 1000, or for several GPUs with gpu_milli < 1000 (first: "
            f"num_gpu={bad['num_gpu'][0]}, gpu_milli={bad['gpu_milli'][0]}); a pod shares at most one GPU"
        )
    models = sorted(set(cluster["model"].fill_null("").to_list()))
    w = workload_arrays(task_types, models)
    pod_types = tuple(sorted(set(shapes[PROFILE].to_list()) - {""}))
    st = _State(cluster, w, models, pod_types)
    type_index = {t: i for i, t in enumerate(st.types)}
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
    for i, (cpu_req, milli, gpus_req, spec, profile) in enumerate(shapes.iter_rows()):
        arrived_total += gpus_req * milli
        v = type_index[profile] if profile else -1
        key = (cpu_req, gpus_req, milli, spec, profile)
        cache = caches.get(key)
        if cache is None:  # (setdefault would build a cache of four arrays for every pod, to throw it away)
            cache = caches[key] = _Cache(len(st.names), gpus_req if v >= 0 else 1)
        stale = np.flatnonzero(cache.version != st.version)
        if len(stale):
            model_ok = spec_ok.setdefault(spec, allowed_models(spec, st.models))
            ok, score, gpu = _evaluate(st, stale, (cpu_req, gpus_req, milli, v), model_ok, policy)
            cache.ok[stale], cache.score[stale], cache.gpu[stale] = ok, score, gpu
            cache.version[stale] = st.version[stale]
        feasible = np.flatnonzero(cache.ok & (st.mem >= pod_mem[i]))
        if len(feasible):
            best = feasible[cache.score[feasible] == cache.score[feasible].max()]
            n = int(best[rank[best].argmin()])
            before = int(st.total[n]) if v >= 0 else 0
            if gpus_req * milli == 0:
                chosen = np.zeros(0, dtype=np.int64)
            elif v >= 0:
                chosen = _tightest(st, n, v, gpus_req) if policy == "bestfit" else cache.gpu[n].copy()
            elif milli < MILLI:
                chosen = cache.gpu[n].copy()
            else:
                whole = st.free[n] == MILLI
                chosen = np.flatnonzero(whole if st.whole is None else whole & st.whole[n])[:gpus_req]
            st.place(n, chosen, milli, cpu_req, int(pod_mem[i]), v)
            placed[i], gpu_index[i] = n, chosen.tolist() if len(chosen) else None
            # What the GPUs lost: k x gpu_milli, or for instances the rounded shares (7 x 1g: 1000, not 1001).
            allocated_total += gpus_req * milli if v < 0 else before - int(st.total[n])
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
    if LAYOUT in cluster.columns:
        # The node state's gpu_partitions: each partitioned GPU's free instances, in its layout's order.
        parts: list[list[str | None]] = [[None] * int(g) for g in st.gpus]
        for (n, g), layout in st.layout.items():
            left = {t: int(st.inst[n, g, v]) for v, t in enumerate(st.types)}
            kept = []
            for t in layout:
                if left[t] > 0:
                    kept.append(t)
                    left[t] -= 1
            parts[n][g] = format_layout(kept)
        out = out.with_columns(pl.Series("gpu_partitions", parts, dtype=pl.List(pl.String)))
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
