"""Placement of jobs on GPUs: FIFO per GPU model with bounded backfill, best fit on nodes.

One scheduler for the two places that replay a fleet: the simulated fleet (collector/sim/fleet.py) and the
capacity what-if (analytics/whatif.py), so a what-if answers with the rules that made the simulated history.

A job of k >= 1 GPUs needs k wholly free GPUs on one node; a fractional job (time-sliced share) needs one GPU
with that much share left. Best fit (the node with the fewest free GPUs that still fits; for shares, the
fullest GPU that fits) keeps whole nodes free for large jobs, the way bin-packing schedulers do; what is
left over is the fragmentation the analytics measure.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Protocol


class JobSpec(Protocol):
    """What placement needs of a job: its GPU model, and whole GPUs (gpus >= 1) or a share of one (milli)."""

    model_key: str
    gpus: float

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

    def __post_init__(self) -> None:
        self.whole_free = sum(1 for f in self.free_milli if f == 1000)

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
    gpus: tuple[int, ...]
    milli: int


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
        for g in p.gpus:
            node.give(g, p.milli)

    def _place(self, job: JobSpec) -> Placement | None:
        nodes = self.by_model[job.model_key]
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
                if not any(n.whole_free or any(n.free_milli) for n in self.by_model[model_key]):
                    break  # nothing free at all: no point looking further
            else:
                placed.append((job, p))
        q.extendleft(reversed(keep))
        return placed
