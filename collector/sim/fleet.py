"""The fleet's event loop: arrivals, placements and completions in time order.

`advance(t)` moves the fleet to time t and returns the job state rows observed on the way (the same rows a
Kubernetes pod watch would give: pending at creation when it must wait, running at binding, a final state).
Allocations (who held which GPU share, from when to when) are kept per node for telemetry.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from gpuledger.collector.sim import noise
from gpuledger.collector.sim.catalog import CATALOG, GpuSpec
from gpuledger.collector.sim.partitioned import SimLayout, child_uuids, partitioned_count, sim_layouts
from gpuledger.collector.sim.workload import STARTUP_S, JobSpec, Workload
from gpuledger.config import DEFAULT_TENANTS, Config
from gpuledger.placement import InstancePlacement, Node, Placement, Scheduler

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
    instances = ()  # (GPU, slot) of each instance a partition ask holds: none here (InstanceAllocation)


@dataclass(frozen=True)
class InstanceAllocation(Allocation):
    """A partition ask's allocation: the instances it holds (its Placement's)."""

    instances: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class NodeInfo:
    index: int
    name: str
    spec: GpuSpec
    gpu_count: int
    gpu_uuids: tuple[str, ...]
    layout: SimLayout | None = None  # a partitioned node: every GPU holds this layout
    child_uuids: tuple[tuple[str, ...], ...] = ()  # per GPU, its instances' uuids in slot order

    def instance_uuid(self, g: int, slot: int) -> str:
        return self.child_uuids[g][slot]


def gpu_uuid(seed: int, cluster: str, node: int, gpu: int) -> str:
    salt = int.from_bytes(cluster.encode()[:8].ljust(8, b"\0"), "little")
    a = noise.mix(np.asarray([seed, node * 64 + gpu, salt, 7], dtype=np.uint64))
    value = (int(a[0] ^ a[2]) << 64) | int(a[1] ^ a[3])
    return "GPU-" + str(uuid.UUID(int=value, version=4))


def build_nodes(
    nodes: int,
    gpus_per_node: int,
    models: tuple[str, ...],
    seed: int,
    cluster: str,
    layouts: Mapping[str, SimLayout] | None = None,
    partitioned_share: float = 0.0,
) -> list[NodeInfo]:
    """The fleet's nodes, models in blocks; of each model in `layouts`, its last `partitioned_count` nodes
    partitioned."""
    keys = [models[i * len(models) // nodes] for i in range(nodes)]
    cut: dict[str, int] = {}  # per partitioned model: its nodes from this index on are partitioned
    for m in layouts or {}:
        mine = [i for i, k in enumerate(keys) if k == m]
        if mine:
            cut[m] = mine[len(mine) - partitioned_count(len(mine), partitioned_share)]
    out = []
    for i in range(nodes):
        spec = CATALOG[keys[i]]
        name = f"gpu-{spec.key.lower()}-{i:03d}"
        uuids = tuple(gpu_uuid(seed, cluster, i, g) for g in range(gpus_per_node))
        if spec.key in cut and i >= cut[spec.key]:
            lay = layouts[spec.key]
            kids = tuple(child_uuids(spec.vendor, u, seed, cluster, i, g, len(lay.types)) for g, u in enumerate(uuids))
            out.append(NodeInfo(i, name, spec, gpus_per_node, uuids, lay, kids))
        else:
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
        partitions: Mapping[str, str] | None = None,
        partitioned_node_share: float | None = None,
    ):
        """`partitions` (model -> layout) and `partitioned_node_share` default to the config's [simulator] ones."""
        sim = cfg.simulator
        self.cluster = cfg.cluster
        self.seed = sim.seed if seed is None else seed
        models = models or sim.models
        layouts = sim_layouts(sim.partitions if partitions is None else partitions, models)
        share = sim.partitioned_node_share if partitioned_node_share is None else partitioned_node_share
        self.nodes = build_nodes(
            nodes or sim.nodes, gpus_per_node or sim.gpus_per_node, models, self.seed, self.cluster, layouts, share
        )
        capacity: dict[str, int] = {}
        parted: dict[str, int] = {}
        for n in self.nodes:
            capacity[n.spec.key] = capacity.get(n.spec.key, 0) + n.gpu_count
            if n.layout is not None:
                parted[n.spec.key] = parted.get(n.spec.key, 0) + n.gpu_count
        self.workload = Workload(
            self.seed,
            cfg.tenants or DEFAULT_TENANTS,
            capacity,
            self.nodes[0].gpu_count,
            sim.load if load is None else load,
            epoch_s,
            self.cluster,
            {m: (layouts[m], parted[m] / capacity[m]) for m in parted},
        )
        self.scheduler = Scheduler(
            [
                Node(
                    n.index,
                    n.name,
                    n.spec.key,
                    [1000] * n.gpu_count,
                    layouts=None if n.layout is None else [n.layout.types] * n.gpu_count,
                )
                for n in self.nodes
            ]
        )
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
                self.scheduler.release(
                    InstancePlacement(alloc.node, alloc.gpus, alloc.milli, alloc.instances)
                    if alloc.instances
                    else Placement(alloc.node, alloc.gpus, alloc.milli)
                )
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
        if p.instances:
            end = self.now + startup + job.duration_s
            a = InstanceAllocation(job, p.node, p.gpus, p.milli, self.now, self.now + startup, end, p.instances)
        else:
            a = Allocation(
                job, p.node, p.gpus, p.milli, self.now, self.now + startup, self.now + startup + job.duration_s
            )
        self.allocations[p.node].append(a)
        self._push(a.end_s, COMPLETE, a)
        return [self._row(job, "running", self.now, a)]

    def _row(self, job: JobSpec, status: str, t: float, a: Allocation | None = None, reason: str | None = None) -> dict:
        node = self.nodes[a.node] if a else None
        final = status not in ("pending", "running")
        row = {
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
        if job.partition is not None:  # as the Kubernetes source records a partition ask (partitioned.py)
            spec = CATALOG[job.model_key]
            row["gpu_sharing"] = "mig" if spec.vendor == "nvidia" else "partition"
            row["mig_profile"] = self.layout_of(job.model_key).job_profile(job.partition)
            if a is not None:
                row["gpu_uuids"] = [node.instance_uuid(g, s) for g, s in a.instances]
        return row

    def layout_of(self, model_key: str) -> SimLayout:
        return self.workload.partitions[model_key][0]

    def prune(self, before_s: float) -> None:
        """Forget allocations that ended before `before_s` (live mode keeps memory flat)."""
        self.allocations = [[a for a in allocs if a.end_s >= before_s] for allocs in self.allocations]
