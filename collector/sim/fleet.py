"""The fleet's event loop: arrivals, placements and completions in time order.

`advance(t)` moves the fleet to time t and returns the job state rows observed on the way (the same rows a
Kubernetes pod watch would give: pending at creation when it must wait, running at binding, a final state).
Allocations (who held which GPU share, from when to when) are kept per node for telemetry.
"""

from __future__ import annotations

import heapq
import uuid
from dataclasses import dataclass

import numpy as np

from gpuledger.collector.sim import noise
from gpuledger.collector.sim.catalog import CATALOG, GpuSpec
from gpuledger.collector.sim.workload import STARTUP_S, JobSpec, Workload
from gpuledger.config import DEFAULT_TENANTS, Config
from gpuledger.placement import Node, Placement, Scheduler

US = 1_000_000
COMPLETE, SUBMIT = 1, 2  # event kinds: an allocation ends; a job (of an evaluation burst) is submitted
# The top owner a pod of each class would have on Kubernetes, the kind collector/k8s/classes.py reads that class from.
OWNER_KIND = {
    "training": "Job",
    "inference": "Deployment",
    "notebook": "Notebook",
    "evaluation": "LMEvalJob",
    "other": "CronJob",
}


@dataclass(frozen=True)
class Allocation:
    job: JobSpec
    node: int
    gpus: tuple[int, ...]
    milli: int
    start_s: float  # bound to the node (GPU held from here)
    run_s: float  # containers started (GPU busy per the job's profile from here)
    end_s: float  # GPU released


@dataclass(frozen=True)
class NodeInfo:
    index: int
    name: str
    spec: GpuSpec
    gpu_count: int
    gpu_uuids: tuple[str, ...]


def gpu_uuid(seed: int, cluster: str, node: int, gpu: int) -> str:
    salt = int.from_bytes(cluster.encode()[:8].ljust(8, b"\0"), "little")
    a = noise.mix(np.asarray([seed, node * 64 + gpu, salt, 7], dtype=np.uint64))
    value = (int(a[0] ^ a[2]) << 64) | int(a[1] ^ a[3])
    return "GPU-" + str(uuid.UUID(int=value, version=4))


def build_nodes(nodes: int, gpus_per_node: int, models: tuple[str, ...], seed: int, cluster: str) -> list[NodeInfo]:
    out = []
    for i in range(nodes):
        spec = CATALOG[models[i * len(models) // nodes]]
        name = f"gpu-{spec.key.lower()}-{i:03d}"
        uuids = tuple(gpu_uuid(seed, cluster, i, g) for g in range(gpus_per_node))
        out.append(NodeInfo(i, name, spec, gpus_per_node, uuids))
    return out


class Fleet:
    """A deterministic simulated cluster starting empty at `epoch_s`."""

    def __init__(
        self,
        cfg: Config,
        epoch_s: float,
        nodes: int | None = None,
        gpus_per_node: int | None = None,
        models: tuple[str, ...] | None = None,
        seed: int | None = None,
        load: float | None = None,
    ):
        sim = cfg.simulator
        self.cluster = cfg.cluster
        self.seed = sim.seed if seed is None else seed
        self.nodes = build_nodes(
            nodes or sim.nodes, gpus_per_node or sim.gpus_per_node, models or sim.models, self.seed, self.cluster
        )
        capacity: dict[str, int] = {}
        for n in self.nodes:
            capacity[n.spec.key] = capacity.get(n.spec.key, 0) + n.gpu_count
        self.workload = Workload(
            self.seed,
            cfg.tenants or DEFAULT_TENANTS,
            capacity,
            self.nodes[0].gpu_count,
            sim.load if load is None else load,
            epoch_s,
            self.cluster,
        )
        self.scheduler = Scheduler([Node(n.index, n.name, n.spec.key, [1000] * n.gpu_count) for n in self.nodes])
        self.now = epoch_s
        self.allocations: list[list[Allocation]] = [[] for _ in self.nodes]
        self._events: list[tuple[float, int, int, object]] = []  # (time, order, kind, payload)
        self._order = 0
        self._next = self.workload.next_job()

    # -- event loop -------------------------------------------------------------------------------
    def _push(self, t: float, kind: int, payload: object) -> None:
        self._order += 1
        heapq.heappush(self._events, (t, self._order, kind, payload))

    def advance(self, until_s: float) -> list[dict]:
        """Process every event up to and including `until_s`; return job rows observed on the way."""
        rows: list[dict] = []
        while True:
            t_next_event = self._events[0][0] if self._events else float("inf")
            if self._next.submitted_s <= until_s and self._next.submitted_s < t_next_event:
                job = self._next
                self._next = self.workload.next_job()
                self._submit(job, rows)
            elif t_next_event <= until_s:
                t, _, kind, payload = heapq.heappop(self._events)
                self.now = t
                if kind == SUBMIT:  # an evaluation job of a burst
                    self._submit(payload, rows)
                    continue
                alloc = payload
                self.scheduler.release(Placement(alloc.node, alloc.gpus, alloc.milli))
                rows.append(self._row(alloc.job, alloc.job.outcome, t, alloc, reason=alloc.job.reason))
                if alloc.job.evaluates:  # a training run that succeeded: its evaluation burst follows
                    for e in self.workload.evaluations(alloc.job, t):
                        self._push(e.submitted_s, SUBMIT, e)
                for j, p in self.scheduler.schedule(alloc.job.model_key):
                    rows.extend(self._start(j, p))
            else:
                break
        self.now = max(self.now, until_s)
        return rows

    def _submit(self, job: JobSpec, rows: list[dict]) -> None:
        self.now = job.submitted_s
        self.scheduler.submit(job)
        placed = self.scheduler.schedule(job.model_key)
        if not any(j is job for j, _ in placed):
            rows.append(self._row(job, "pending", job.submitted_s, reason="Unschedulable"))
        for j, p in placed:
            rows.extend(self._start(j, p))

    def _start(self, job: JobSpec, p: Placement) -> list[dict]:
        lo, hi = STARTUP_S  # image pull and container start
        startup = lo + (hi - lo) * noise.uniform1(self.seed, 2, job.n, 0)
        a = Allocation(job, p.node, p.gpus, p.milli, self.now, self.now + startup, self.now + startup + job.duration_s)
        self.allocations[p.node].append(a)
        self._push(a.end_s, COMPLETE, a)
        return [self._row(job, "running", self.now, a)]

    def _row(self, job: JobSpec, status: str, t: float, a: Allocation | None = None, reason: str | None = None) -> dict:
        node = self.nodes[a.node] if a else None
        final = status not in ("pending", "running")
        return {
            "updated_at": int(t * US),
            "cluster": self.cluster,
            "job_id": job.job_id,
            "tenant": job.tenant,
            "namespace": job.namespace,
            "pod": job.pod,
            "queue": job.queue,
            "gpu_model": CATALOG[job.model_key].name,
            "gpus": job.gpus,
            "gpu_sharing": "exclusive" if job.gpus >= 1 else "fraction",
            "submitted_at": int(job.submitted_s * US),
            "scheduled_at": int(a.start_s * US) if a else None,
            "started_at": int(a.run_s * US) if a else None,
            "finished_at": int(a.end_s * US) if a and final else None,
            "status": status,
            "reason": reason,
            "node": node.name if node else None,
            "gpu_uuids": [node.gpu_uuids[g] for g in a.gpus] if a else None,
            "owner_kind": OWNER_KIND[job.workload_class],
            "owner_name": job.pod,
            "source": "sim",
            "workload_class": job.workload_class,
        }

    def prune(self, before_s: float) -> None:
        """Forget allocations that ended before `before_s` (live mode keeps memory flat)."""
        self.allocations = [[a for a in allocs if a.end_s >= before_s] for allocs in self.allocations]
