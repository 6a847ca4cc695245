"""Placement of jobs on GPUs: FIFO per GPU model with bounded backfill, best fit on nodes.

One scheduler for the two places that replay a fleet: the simulated fleet (collector/sim/fleet.py) and the
capacity what-if (analytics/whatif.py), so a what-if answers with the rules that made the simulated history.

A job of k >= 1 GPUs needs k wholly free GPUs on one node; a fractional job (time-sliced share) needs one GPU
with that much share left. Best fit (the node with the fewest free GPUs that still fits; for shares, the
fullest GPU that fits) keeps whole nodes free for large jobs, the way bin-packing schedulers do; what is
left over is the fragmentation the analytics measure.

Partitioned GPUs (MIG, AMD CPX/DPX..., Ascend vNPUs) follow gpuledger/partitions.py's rules. A node may give each
GPU a static layout (its instances' canonical types, `partitions.parse_layout`); a job with a `partition` (an
instance type) asks `instances` free instances of exactly that type on one node, on any of its GPUs. Best fit again:
the node with the fewest free instances of the type that still has enough, and on it the GPUs with the fewest free
instances of the type first, so emptier GPUs stay free for later asks. A partitioned GPU offers no whole GPU and
no share (its `free_milli` is 0 from the start, so the whole and share paths never see it), and a partition ask
never takes a whole GPU. A placement names the instances it took (GPU, slot in the layout), which release frees.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Protocol


class JobSpec(Protocol):
    """What placement needs of a job: its GPU model, and whole GPUs (gpus >= 1) or a share of one (milli); or,
    where `partition` is an instance type, `instances` instances of it (`milli` is then one instance's share)."""

    model_key: str
    gpus: float
    partition: str | None
    instances: int

    @property
    def whole(self) -> int: ...

    @property
    def milli(self) -> int: ...


BACKFILL_DEPTH = 64  # like Slurm's bf_max_job_test: how deep past the queue head a pass may look


@dataclass
class Node:
    index: int
    name: str
    model_key: str
    free_milli: list[int]  # per GPU, 1000 = free
    whole_free: int = -1  # GPUs with nothing on them; kept in step with free_milli (hot in the event loop)
    # Per GPU: None for a whole GPU, else its layout's instance types (partitions.parse_layout); None: none is.
    layouts: list[tuple[str, ...] | None] | None = None

    def __post_init__(self) -> None:
        # Free instances per type on the node (0: none, the hot path's test), per GPU, and each slot's state.
        self.free_instances = 0
        self.free_of: dict[str, int] = {}
        self.gpu_free_of: list[dict[str, int]] = []
        self.slot_free: list[list[bool]] = []
        if self.layouts is not None:
            if len(self.layouts) != len(self.free_milli):
                raise ValueError(f"node {self.name}: {len(self.layouts)} layouts for {len(self.free_milli)} GPUs")
            for g, layout in enumerate(self.layouts):
                counts: dict[str, int] = {}
                if layout is not None:
                    self.free_milli[g] = 0  # no whole GPU and no share on a partitioned GPU (partitions rule 2)
                    for t in layout:
                        counts[t] = counts.get(t, 0) + 1
                        self.free_of[t] = self.free_of.get(t, 0) + 1
                    self.free_instances += len(layout)
                self.gpu_free_of.append(counts)
                self.slot_free.append([True] * len(layout or ()))
        self.whole_free = sum(1 for f in self.free_milli if f == 1000)

    def take_instance(self, g: int, slot: int) -> None:
        t = self.layouts[g][slot]
        self.slot_free[g][slot] = False
        self.gpu_free_of[g][t] -= 1
        self.free_of[t] -= 1
        self.free_instances -= 1

    def give_instance(self, g: int, slot: int) -> None:
        t = self.layouts[g][slot]
        self.slot_free[g][slot] = True
        self.gpu_free_of[g][t] += 1
        self.free_of[t] += 1
        self.free_instances += 1

    def take(self, g: int, milli: int) -> None:
        if self.free_milli[g] == 1000:
            self.whole_free -= 1
        self.free_milli[g] -= milli

    def give(self, g: int, milli: int) -> None:
        self.free_milli[g] += milli
        if self.free_milli[g] == 1000:
            self.whole_free += 1


@dataclass
class Placement:
    node: int
    gpus: tuple[int, ...]  # a partition ask: the GPU of each instance, in `instances`' order
    milli: int  # per GPU (a partition ask: per instance)
    # (GPU, slot in its layout) of each instance a partition ask took: none here. A class attribute, not a field, so
    # that the placements of whole GPUs and shares (all of them on a fleet without partitions) cost what they did.
    instances = ()


@dataclass
class InstancePlacement(Placement):
    """A partition ask's placement: the instances it took."""

    instances: tuple[tuple[int, int], ...] = ()


@dataclass
class Scheduler:
    nodes: list[Node]
    pending: dict[str, deque] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_model: dict[str, list[Node]] = {}
        for n in self.nodes:
            self.by_model.setdefault(n.model_key, []).append(n)
            self.pending.setdefault(n.model_key, deque())

    def submit(self, job: JobSpec) -> None:
        self.pending[job.model_key].append(job)

    def release(self, p: Placement) -> None:
        node = self.nodes[p.node]
        if p.instances:
            for g, slot in p.instances:
                node.give_instance(g, slot)
            return
        for g in p.gpus:
            node.give(g, p.milli)

    def _place(self, job: JobSpec) -> Placement | None:
        nodes = self.by_model[job.model_key]
        if job.partition is not None:
            return self._place_partition(job, nodes)
        if job.gpus >= 1:
            k = job.whole
            best = None
            for n in nodes:
                wf = n.whole_free
                if wf >= k and (best is None or wf < best[0]):
                    best = (wf, n)
                    if wf == k:
                        break
            if best is None:
                return None
            n = best[1]
            gpus = tuple(i for i, f in enumerate(n.free_milli) if f == 1000)[:k]
            for g in gpus:
                n.take(g, 1000)
            return Placement(n.index, gpus, 1000)
        m = job.milli
        best = None  # (free after placing, node, gpu): prefer the fullest shared GPU that fits
        for n in nodes:
            for g, f in enumerate(n.free_milli):
                if f >= m and (best is None or f - m < best[0]):
                    best = (f - m, n, g)
        if best is None:
            return None
        _, n, g = best
        n.take(g, m)
        return Placement(n.index, (g,), m)

    @staticmethod
    def _place_partition(job: JobSpec, nodes: list[Node]) -> Placement | None:
        """`job.instances` free instances of type `job.partition` on one node (see the module's docstring)."""
        t, k = job.partition, job.instances
        if k < 1:
            raise ValueError(f"a partition ask of {k} instances of {t}")
        best = None
        for n in nodes:
            f = n.free_of.get(t, 0)
            if f >= k and (best is None or f < best[0]):
                best = (f, n)
                if f == k:
                    break
        if best is None:
            return None
        n = best[1]
        taken: list[tuple[int, int]] = []
        for _, g in sorted((c[t], g) for g, c in enumerate(n.gpu_free_of) if c.get(t)):
            for slot, free in enumerate(n.slot_free[g]):
                if free and n.layouts[g][slot] == t:
                    n.take_instance(g, slot)
                    taken.append((g, slot))
                    if len(taken) == k:
                        return InstancePlacement(n.index, tuple(g for g, _ in taken), job.milli, tuple(taken))
        raise AssertionError(f"node {n.name}: free_of says {best[0]} {t}, its GPUs hold fewer")  # kept in step

    def schedule(self, model_key: str) -> list[tuple[JobSpec, Placement]]:
        """Place what fits from the head of the model's queue (looking at most BACKFILL_DEPTH deep)."""
        q = self.pending[model_key]
        placed: list[tuple[JobSpec, Placement]] = []
        if not q:
            return placed
        keep: list[JobSpec] = []
        looked = 0
        while q and looked < BACKFILL_DEPTH:
            job = q.popleft()
            looked += 1
            p = self._place(job)
            if p is None:
                keep.append(job)
                if not any(n.whole_free or any(n.free_milli) or n.free_instances for n in self.by_model[model_key]):
                    break  # nothing free at all: no point looking further
            else:
                placed.append((job, p))
        q.extendleft(reversed(keep))
        return placed
