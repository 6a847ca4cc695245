"""The Alibaba "openb" GPU trace (alibaba/clusterdata cluster-trace-gpu-v2023, FGD paper, USENIX ATC'23).

A trace directory holds a node list (`openb_node_list_all_node.csv`, else `openb_node_list_gpu_node.csv`) and
pod lists (`openb_pod_list_<workload>.csv`). The import writes one `nodes` row per node and one `jobs` row per
GPU pod. Trace times are integer seconds from an anonymised origin; `origin` says which UTC instant second 0
is. The trace does not say which node ran a pod, so `place` replays the pods onto the nodes (policy below and
in docs/imports.md) to give every job a node and therefore every node a history.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpuledger.analytics.imports import UTC, ImportFileError, ImportReport, content_key, csv_records, to_us
from gpuledger.config import Config
from gpuledger.errors import LakeError, UsageError
from gpuledger.lake import LakeWriter, check_name, frame_from_rows

# The anonymised second 0 mapped to UTC. Unknown upstream; the start of the trace's publication year keeps
# dates plausible (the pods span 149.3 days, to 2023-05-30) and is easy to recognise as a convention.
DEFAULT_ORIGIN = dt.datetime(2023, 1, 1, tzinfo=UTC)
NODE_LISTS = ("openb_node_list_all_node.csv", "openb_node_list_gpu_node.csv")  # the first one present is used
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
PHASES = {"Pending": "pending", "Running": "running", "Succeeded": "succeeded", "Failed": "failed"}
FULL_GPU_MILLI = 1000
CPU_ONLY = "CPU-only pod (num_gpu 0): not a GPU job"
TRACE_ENDED = "TraceEnded"  # reason of a pod still running (or pending) at the trace's last event
JOB_ID_PREFIX = "alibaba-2023"
_WORKLOAD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,60}$")


@dataclass(frozen=True)
class Node:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str | None  # None for a CPU-only node


@dataclass(frozen=True)
class Pod:
    line: int
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU; < 1000 only for a one-GPU shared pod
    gpu_spec: tuple[str, ...]  # allowed GPU models; empty = any
    qos: str | None
    phase: str
    created_s: int
    scheduled_s: int | None  # None: never scheduled (Pending)
    deleted_s: int | None


@dataclass(frozen=True)
class Placement:
    node: str | None  # None: not placed (never scheduled, or no node had room)
    gpus: tuple[int, ...] = ()  # GPU indexes on that node
    reason: str | None = None  # why a scheduled pod has no node


class _Bad(Exception):
    """One pod row's problem; becomes a rejection with the row's line."""


def import_alibaba_2023(
    directory: str | Path,
    lake: str | Path,
    cfg: Config,
    workload: str = "default",
    origin: dt.datetime = DEFAULT_ORIGIN,
) -> ImportReport:
    """Import the node list and the pod list `openb_pod_list_<workload>.csv` of an openb trace directory.

    Writes every node to `nodes` and every valid GPU pod to `jobs` (node from `place`); CPU-only pods are
    skipped and counted, bad pod rows rejected with file, line and reason. Returns an ImportReport.
    Raises UsageError for a bad workload name or a naive origin; ImportFileError for a missing or malformed
    node list, a missing pod list, or a pod list without the columns a job needs; LakeError when the lake
    cannot be written.
    """
    started = time.perf_counter()
    if not _WORKLOAD.match(workload):
        raise UsageError(f"workload {workload!r}: use letters, digits, '_' or '-' (e.g. default, gpushare40)")
    if origin.tzinfo is None or origin.utcoffset() is None:
        raise UsageError(f"origin {origin.isoformat()} has no time zone: give it in UTC, e.g. 2023-01-01T00:00:00Z")
    directory = Path(directory)
    if not directory.is_dir():
        raise ImportFileError(directory, None, "not a directory (expected an openb trace directory)")
    node_file = next((directory / n for n in NODE_LISTS if (directory / n).is_file()), None)
    if node_file is None:
        raise ImportFileError(directory, None, f"no node list: expected {' or '.join(NODE_LISTS)}")
    pod_file = directory / f"openb_pod_list_{workload}.csv"
    if not pod_file.is_file():
        known = sorted(p.name[len("openb_pod_list_") : -4] for p in directory.glob("openb_pod_list_*.csv"))
        raise ImportFileError(
            pod_file, None, f"no such pod list; workloads in {directory}: {', '.join(known) or 'none'}"
        )
    node_bytes, pod_bytes = _read(node_file), _read(pod_file)
    report = ImportReport(source=str(pod_file))
    nodes = read_nodes(node_file, node_bytes)
    pods = read_pods(pod_file, pod_bytes, report)
    gpu_pods = []
    for pod in pods:
        if pod.num_gpu == 0:
            report.skip(CPU_ONLY)
        else:
            gpu_pods.append(pod)
    placements = place(nodes, gpu_pods)
    report.unplaced = sum(1 for p in placements.values() if p.reason is not None)

    # The trace ends at its last recorded instant; a pod deleted exactly then was still alive when it ended.
    end_s = max((t for p in pods for t in (p.created_s, p.scheduled_s, p.deleted_s) if t is not None), default=0)
    origin_us = to_us(origin)
    key = content_key(node_bytes, pod_bytes, cfg.cluster, origin.isoformat())
    writer = LakeWriter(lake)
    writer.init()
    node_rows = [_node_row(n, cfg.cluster, origin_us, origin_us + end_s * 1_000_000) for n in nodes]
    model_of = {n.name: n.model for n in nodes}
    job_rows = [_job_row(p, placements[p.name], model_of, cfg.cluster, workload, origin_us, end_s) for p in gpu_pods]
    report.files = writer.write("nodes", frame_from_rows("nodes", node_rows), f"alibaba2023-nodes-{key}")
    report.files += writer.write("jobs", frame_from_rows("jobs", job_rows), f"alibaba2023-{workload}-{key}")
    shape_rows = _shape_rows(pods, cfg.cluster, workload, origin_us, origin_us + end_s * 1_000_000)
    report.files += writer.write(
        "pod_shapes", frame_from_rows("pod_shapes", shape_rows), f"alibaba2023-{workload}-{key}"
    )
    report.nodes_imported = len(node_rows)
    report.rows_imported = len(job_rows)
    report.seconds = time.perf_counter() - started
    return report


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise ImportFileError(path, None, f"cannot read: {e.strerror or e}") from e


def _records(path: Path, data: bytes, needed: Sequence[str], why: str):
    columns, records = csv_records(path, data)
    missing = [c for c in needed if c not in columns]
    if missing:
        raise ImportFileError(path, 1, f"missing column(s) {', '.join(missing)}{why}")
    return records


def _int(record: dict, name: str, required: bool = True) -> int | None:
    v = record[name].strip()
    if not v:
        if required:
            raise _Bad(f"missing value for {name}")
        return None
    try:
        n = int(v)
    except ValueError:
        raise _Bad(f"{name} {v!r} is not an integer") from None
    if n < 0:
        raise _Bad(f"{name} {v!r} is negative")
    return n


def read_nodes(path: Path, data: bytes) -> list[Node]:
    """Every node of a node list. Any bad row stops the import (ImportFileError): placement needs them all."""
    nodes: list[Node] = []
    seen: dict[str, int] = {}
    for line, record in _records(path, data, NODE_COLUMNS, ""):
        try:
            if isinstance(record, str):
                raise _Bad(record)
            name = record["sn"].strip()
            if not name:
                raise _Bad("missing value for sn")
            try:
                check_name("node", name)  # it becomes a lake path segment
            except LakeError as e:
                raise _Bad(str(e)) from None
            if name in seen:
                raise _Bad(f"node {name!r} listed twice (first on line {seen[name]})")
            gpus = _int(record, "gpu")
            model = record["model"].strip() or None
            if gpus and model is None:
                raise _Bad(f"{gpus} GPUs but no model")
            node = Node(name, _int(record, "cpu_milli"), _int(record, "memory_mib"), gpus, model if gpus else None)
        except _Bad as e:
            raise ImportFileError(path, line, str(e)) from None
        seen[name] = line
        nodes.append(node)
    return nodes


def read_pods(path: Path, data: bytes, report: ImportReport) -> list[Pod]:
    """Every valid pod of a pod list; each bad row is rejected into `report` with its line and reason."""
    records = _records(path, data, POD_COLUMNS, " (a pod list without times, e.g. multigpu*, cannot be jobs)")
    pods: list[Pod] = []
    seen: dict[str, int] = {}
    for line, record in records:
        report.rows_read += 1
        try:
            if isinstance(record, str):
                raise _Bad(record)
            pod = _pod(line, record)
            if pod.name in seen:
                raise _Bad(f"pod {pod.name!r} listed twice (first on line {seen[pod.name]})")
        except _Bad as e:
            report.reject(path, line, str(e))
            continue
        seen[pod.name] = line
        pods.append(pod)
    return pods


def _pod(line: int, record: dict) -> Pod:
    name = record["name"].strip()
    if not name:
        raise _Bad("missing value for name")
    num_gpu, gpu_milli = _int(record, "num_gpu"), _int(record, "gpu_milli")
    if num_gpu and not 0 < gpu_milli <= FULL_GPU_MILLI:
        raise _Bad(f"gpu_milli {gpu_milli} is not in 1..{FULL_GPU_MILLI} for a pod with {num_gpu} GPU(s)")
    phase = record["pod_phase"].strip()
    if phase not in PHASES:
        raise _Bad(f"unknown pod_phase {phase!r} (known: {', '.join(PHASES)})")
    created, scheduled, deleted = (
        _int(record, "creation_time"),
        _int(record, "scheduled_time", required=False),
        _int(record, "deletion_time", required=False),
    )
    if scheduled is None and phase != "Pending":
        raise _Bad(f"scheduled_time is empty for a {phase} pod")
    if scheduled is not None and scheduled < created:
        raise _Bad(f"scheduled_time {scheduled} is before creation_time {created}")
    if deleted is not None and deleted < (scheduled if scheduled is not None else created):
        which = "scheduled_time" if scheduled is not None else "creation_time"
        raise _Bad(f"deletion_time {deleted} is before {which} {scheduled if scheduled is not None else created}")
    spec = tuple(sorted({m.strip() for m in record["gpu_spec"].split("|") if m.strip()}))
    return Pod(
        line,
        name,
        _int(record, "cpu_milli"),
        _int(record, "memory_mib"),
        num_gpu,
        gpu_milli,
        spec,
        record["qos"].strip() or None,
        phase,
        created,
        scheduled,
        deleted,
    )


def place(nodes: Sequence[Node], pods: Sequence[Pod]) -> dict[str, Placement]:
    """Replay the pods onto the nodes in time order; returns every pod's placement, by pod name.

    Events: each scheduled pod arrives at scheduled_time and leaves at deletion_time (never, when it has
    none). Events are taken by time; at the same second departures come first (they free room the way a
    scheduler sees deletions before new binds), then by the pod's line in the pod list. An arriving pod may
    use a node whose model is in its gpu_spec (any model when empty), with its CPU milli and memory MiB free,
    and with `num_gpu` GPUs each having at least `gpu_milli` free. Of those nodes it takes the one with the
    least free GPU milli (best fit; ties: the first in the node list), and on it the fitting GPUs with the
    least free milli (ties: the lowest index). A pod no node can hold keeps node None with a reason; pods
    never scheduled get node None and no reason.
    """
    n = len(nodes)
    width = max((nd.gpus for nd in nodes), default=0) or 1
    gpu_free = np.full((n, width), -1, dtype=np.int64)  # -1 marks a slot the node does not have
    for i, nd in enumerate(nodes):
        gpu_free[i, : nd.gpus] = FULL_GPU_MILLI
    cpu_free = np.array([nd.cpu_milli for nd in nodes], dtype=np.int64)
    mem_free = np.array([nd.memory_mib for nd in nodes], dtype=np.int64)
    models = np.array([nd.model or "" for nd in nodes], dtype=object)
    spec_masks: dict[tuple[str, ...], np.ndarray] = {(): np.ones(n, dtype=bool)}

    result: dict[str, Placement] = {}
    events: list[tuple[int, int, int]] = []  # (second, 0 = departure | 1 = arrival, index into pods)
    for k, p in enumerate(pods):
        if p.scheduled_s is None:
            result[p.name] = Placement(None)
            continue
        events.append((p.scheduled_s, 1, k))
        if p.deleted_s is not None and p.deleted_s > p.scheduled_s:
            events.append((p.deleted_s, 0, k))
    events.sort(key=lambda e: (e[0], e[1], pods[e[2]].line))

    held: dict[int, tuple[int, np.ndarray]] = {}  # pod index -> (node index, GPU indexes)
    for _, kind, k in events:
        p = pods[k]
        if kind == 0:
            if k in held:
                i, g = held.pop(k)
                gpu_free[i, g] += p.gpu_milli
                cpu_free[i] += p.cpu_milli
                mem_free[i] += p.memory_mib
            continue
        if p.gpu_spec not in spec_masks:
            spec_masks[p.gpu_spec] = np.isin(models, list(p.gpu_spec))
        allowed = spec_masks[p.gpu_spec]
        fits = gpu_free >= p.gpu_milli
        ok = allowed & (cpu_free >= p.cpu_milli) & (mem_free >= p.memory_mib) & (fits.sum(axis=1) >= p.num_gpu)
        if not ok.any():
            result[p.name] = Placement(None, (), _unplaced_reason(p, allowed.any()))
            continue
        free_total = np.where(gpu_free > 0, gpu_free, 0).sum(axis=1)
        i = int(np.argmin(np.where(ok, free_total, np.iinfo(np.int64).max)))
        g = np.argsort(np.where(fits[i], gpu_free[i], np.iinfo(np.int64).max), kind="stable")[: p.num_gpu]
        g = np.sort(g)
        result[p.name] = Placement(nodes[i].name, tuple(int(x) for x in g))
        if p.deleted_s is None or p.deleted_s > p.scheduled_s:  # a pod gone the second it came holds nothing
            gpu_free[i, g] -= p.gpu_milli
            cpu_free[i] -= p.cpu_milli
            mem_free[i] -= p.memory_mib
            held[k] = (i, g)
    return result


def _unplaced_reason(p: Pod, model_exists: bool) -> str:
    if not model_exists:
        return f"unplaced: no node has GPU model {'|'.join(p.gpu_spec)}"
    spec = f" of model {'|'.join(p.gpu_spec)}" if p.gpu_spec else ""
    return (
        f"unplaced: no node had {p.num_gpu} GPU(s){spec} with {p.gpu_milli} milli free, "
        f"{p.cpu_milli} CPU milli and {p.memory_mib} MiB free at the scheduled time"
    )


def _node_row(node: Node, cluster: str, first_us: int, last_us: int) -> dict:
    return {
        "cluster": cluster,
        "node": node.name,
        "gpu_model": node.model,
        "gpu_count": node.gpus,
        "gpu_mem_bytes": None,  # the trace does not give it (G1-G3 are undisclosed models)
        "labels": [
            {"key": "cpu_milli", "value": str(node.cpu_milli)},
            {"key": "memory_mib", "value": str(node.memory_mib)},
        ],
        "first_seen": first_us,
        "last_seen": last_us,
        "source": "import",
    }


def _shape_rows(pods: Sequence[Pod], cluster: str, workload: str, first_us: int, last_us: int) -> list[dict]:
    """Pods per (cpu_milli, gpu_milli, num_gpu, gpu_spec), CPU-only pods included: the FGD metric's target workload
    M is built from the whole pod list (FRAGMENTATION.md), and jobs keep neither CPU requests nor CPU-only pods.

    As the artifact reads a pod list, a pod asking for no GPU carries no GPU share or model constraint.
    """
    counts = Counter(
        (p.cpu_milli, p.gpu_milli, p.num_gpu, "|".join(p.gpu_spec)) if p.num_gpu else (p.cpu_milli, 0, 0, "")
        for p in pods
    )
    return [
        {
            "cluster": cluster,
            "workload": f"{JOB_ID_PREFIX}/{workload}",
            "cpu_milli": cpu,
            "gpu_milli": milli,
            "num_gpu": gpus,
            "gpu_spec": spec,
            "pods": n,
            "first_seen": first_us,
            "last_seen": last_us,
            "source": "import",
        }
        for (cpu, milli, gpus, spec), n in sorted(counts.items())
    ]


def _job_row(
    p: Pod, where: Placement, model_of: dict[str, str | None], cluster: str, workload: str, origin_us: int, end_s: int
) -> dict:
    def us(s: int | None) -> int | None:
        return None if s is None else origin_us + s * 1_000_000

    status, reason, finished = PHASES[p.phase], None, p.deleted_s
    if p.phase in ("Running", "Pending"):
        if p.deleted_s is None or p.deleted_s >= end_s:
            # Alive when the trace stopped watching (no deletion time, or one at its last event). A trace is
            # history: left open, the pod would run to the analysis time (years after a 150-day trace). Close
            # it at the trace's end and keep its phase, with a reason saying it was still alive then.
            finished, reason = end_s, TRACE_ENDED
        else:
            # Deleted before it finished: what the k8s source records for such a pod (collector/k8s/pods.py).
            status, reason = "cancelled", "Deleted"
    model = model_of[where.node] if where.node else None
    if model is None and len(p.gpu_spec) == 1:
        model = p.gpu_spec[0]
    updated = finished if finished is not None else p.scheduled_s if p.scheduled_s is not None else p.created_s
    return {
        "updated_at": us(updated),
        "cluster": cluster,
        # Every workload file reuses the same pod names for different pods: the workload keeps them apart.
        "job_id": f"{JOB_ID_PREFIX}/{workload}/{p.name}",
        "tenant": None,  # the trace has no tenant or user column
        "namespace": None,
        "pod": p.name,
        "queue": p.qos,
        "gpu_model": model,
        "gpus": p.num_gpu * p.gpu_milli / FULL_GPU_MILLI,
        "gpu_sharing": "fraction" if p.gpu_milli < FULL_GPU_MILLI else "exclusive",
        "submitted_at": us(p.created_s),
        "scheduled_at": us(p.scheduled_s),
        "finished_at": us(finished),
        "status": status,
        "reason": where.reason or reason,  # an unplaced pod's reason explains its missing node
        "node": where.node,
        "gpu_uuids": [f"{where.node}/gpu{g}" for g in where.gpus] if where.node else None,
        "source": "import",
    }
