"""One jobs row from one Pod, as a pure function of the Pod (a kubernetes client V1Pod) and lookups.

GPU demand comes from three places in real clusters (tests/fixtures/k8s): extended resources in the
containers (`nvidia.com/gpu`, `nvidia.com/gpu.shared` for time slicing, `nvidia.com/mig-<profile>`), or,
for schedulers such as Run:ai, annotations only (`gpu-fraction`, `nvidia.com/mig-<profile>`) with nothing in
`resources`. A collector reading only `resources` would miss those pods, so both are read.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kubernetes.utils import parse_quantity

from gpuledger.classify import classify, owner_of
from gpuledger.config import ClassRule
from gpuledger.mig import mig_share

GPU = "nvidia.com/gpu"
GPU_SHARED = "nvidia.com/gpu.shared"
MIG_PREFIX = "nvidia.com/mig-"
QUEUE_LABELS = ("kueue.x-k8s.io/queue-name", "scheduling.x-k8s.io/queue-name")
FRACTION_ANNOTATIONS = ("gpu-fraction", "runai-allocated-gpus")
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
US = 1_000_000


class BadQuantity(ValueError):
    """A GPU quantity that is not a non-negative number; the message names the pod and the field."""


@dataclass(frozen=True)
class GpuRequest:
    gpus: float
    sharing: str  # exclusive, fraction, time-sliced, mig
    mig_profile: str | None = None


def _quantity(value: object, where: str) -> float:
    try:
        q = float(parse_quantity(value))
    except (ValueError, TypeError) as e:
        raise BadQuantity(f"{where}: {value!r} is not a quantity") from e
    if q < 0:
        raise BadQuantity(f"{where}: {value!r} is negative")
    return q


def _amounts(container, where: str) -> tuple[float, float, dict[str, float]]:
    """(whole GPUs, time-sliced replicas, MIG profile -> count) one container asks for."""
    res = container.resources
    amounts = dict((res.requests or {}) if res else {})
    amounts.update((res.limits or {}) if res else {})  # for extended resources limits are authoritative
    at = f"{where} container {container.name}"
    mig = {k[len(MIG_PREFIX) :]: _quantity(v, f"{at} {k}") for k, v in amounts.items() if k.startswith(MIG_PREFIX)}
    return (
        _quantity(amounts.get(GPU, 0), f"{at} {GPU}"),
        _quantity(amounts.get(GPU_SHARED, 0), f"{at} {GPU_SHARED}"),
        mig,
    )


def gpu_request(pod) -> GpuRequest | None:
    """What the pod asks of GPUs, or None for a pod that asks for none."""
    where = f"pod {pod.metadata.namespace}/{pod.metadata.name}"
    main = [_amounts(c, where) for c in pod.spec.containers or []]
    init = [_amounts(c, where) for c in pod.spec.init_containers or []]
    # Containers run together (their requests add up); init containers run one at a time before them.
    whole = max(sum(w for w, _, _ in main), max((w for w, _, _ in init), default=0.0))
    shared = max(sum(s for _, s, _ in main), max((s for _, s, _ in init), default=0.0))
    mig: dict[str, float] = {}
    for _, _, m in main:
        for profile, n in m.items():
            mig[profile] = mig.get(profile, 0.0) + n
    ann = pod.metadata.annotations or {}
    for k, v in ann.items():
        if k.startswith(MIG_PREFIX):
            mig.setdefault(k[len(MIG_PREFIX) :], _quantity(v, f"{where} annotation {k}"))
    if whole:
        return GpuRequest(whole, "exclusive")
    if mig:
        # One pod with several MIG profiles is rare; its share is the sum, its profile the first listed.
        profile = next(iter(mig))
        return GpuRequest(sum(n * mig_share(p) for p, n in mig.items()), "mig", profile)
    if shared:
        # A time-sliced replica: its share of the GPU depends on the node's replica count, which the pod
        # does not carry; count one replica as one GPU-slot and let analytics divide by the node's replicas.
        return GpuRequest(shared, "time-sliced")
    for key in FRACTION_ANNOTATIONS:
        if key in ann:
            f = _quantity(ann[key], f"{where} annotation {key}")
            if f > 0:
                return GpuRequest(f, "fraction")
    return None


def _utc(t: dt.datetime | None) -> int | None:
    if t is None:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return None if t <= EPOCH else int(t.timestamp() * US)  # kubelet writes 1970 for "never started"


def _condition(pod, kind: str):
    return next((c for c in (pod.status.conditions or []) if c.type == kind), None) if pod.status else None


def _container_states(pod):
    st = pod.status
    return [cs.state for cs in ((st.container_statuses or []) if st else []) if cs.state]


def status_and_reason(pod, deleted: bool) -> tuple[str, str | None]:
    """pending, running, succeeded, failed, cancelled or preempted, with the reason a user would look for."""
    st = pod.status
    phase = st.phase if st else None
    disruption = _condition(pod, "DisruptionTarget")
    if disruption is not None and disruption.status == "True" and "Preempt" in (disruption.reason or ""):
        return "preempted", disruption.reason
    if phase == "Succeeded":
        return "succeeded", "Completed"
    if phase == "Failed":
        if st.reason:  # Evicted, DeadlineExceeded, OutOfnvidia.com/gpu, ...
            return "failed", st.reason
        for s in _container_states(pod):
            if s.terminated and s.terminated.exit_code:
                return "failed", s.terminated.reason or f"ExitCode{s.terminated.exit_code}"
        return "failed", "Error"
    if deleted:
        return "cancelled", "Deleted"
    if phase == "Running":
        return "running", None
    scheduled = _condition(pod, "PodScheduled")
    if scheduled is not None and scheduled.status == "False":
        return "pending", scheduled.reason or "Unschedulable"
    waiting = [s.waiting.reason for s in _container_states(pod) if s.waiting and s.waiting.reason]
    return "pending", waiting[0] if waiting else None


def gpu_uuids(pod) -> list[str] | None:
    """GPU or MIG UUIDs bound to the pod, where a scheduler records them (Run:ai annotations)."""
    ann = pod.metadata.annotations or {}
    out = []
    if ann.get("run.ai/reserve_for_gpu_index", "").startswith("GPU-"):
        out.append(ann["run.ai/reserve_for_gpu_index"])
    if "runai-mig-device" in ann:
        try:
            out.append(json.loads(ann["runai-mig-device"])["instanceid"])
        except (ValueError, KeyError, TypeError):
            pass  # malformed annotation: the rest of the row is still right
    return out or None


def _controller(refs: list):
    refs = refs or []
    return next((r for r in refs if getattr(r, "controller", False)), refs[0] if refs else None)


def owner_chain(pod, lookup: Callable[[str, str, str], list] | None = None) -> list:
    """The controller ownerReferences from the pod's up (Pod -> Job -> JobSet, Pod -> ReplicaSet -> Deployment).

    `lookup(kind, namespace, name)` returns that object's ownerReferences; without it the chain is the pod's direct
    controller alone. At most 8 hops, and a cycle stops the walk.
    """
    ref = _controller(pod.metadata.owner_references)
    chain = [] if ref is None else [ref]
    seen: set[tuple[str, str]] = set()
    while chain and lookup is not None and (chain[-1].kind, chain[-1].name) not in seen and len(seen) < 8:
        seen.add((chain[-1].kind, chain[-1].name))
        parent = _controller(lookup(chain[-1].kind, pod.metadata.namespace, chain[-1].name))
        if parent is None:
            break
        chain.append(parent)
    return chain


def top_owner(pod, lookup: Callable[[str, str, str], list] | None = None) -> tuple[str | None, str | None]:
    """The kind and name of the last of `owner_chain` (None, None for a pod without owners)."""
    chain = owner_chain(pod, lookup)
    return (chain[-1].kind, chain[-1].name) if chain else (None, None)


def job_row(
    pod,
    *,
    cluster: str,
    tenant_of: Callable[[str], str | None],
    observed_at_s: float,
    deleted: bool = False,
    owner_lookup: Callable[[str, str, str], list] | None = None,
    class_rules: Iterable[ClassRule] = (),
) -> dict | None:
    """The jobs row for this state of `pod`, or None when the pod asks for no GPU. Its workload class comes from
    the pod, its owner chain and the config's [[classes]] `class_rules` (gpuledger/classify.py)."""
    req = gpu_request(pod)
    if req is None:
        return None
    md = pod.metadata
    status, reason = status_and_reason(pod, deleted)
    sched = _condition(pod, "PodScheduled")
    states = _container_states(pod)
    started = [_utc((s.running and s.running.started_at) or (s.terminated and s.terminated.started_at)) for s in states]
    started = [t for t in started if t]
    finished = [_utc(s.terminated.finished_at) for s in states if s.terminated]
    finished = [t for t in finished if t]
    finished_at = max(finished) if finished and status in ("succeeded", "failed", "preempted") else None
    if deleted and finished_at is None:
        finished_at = _utc(md.deletion_timestamp) or int(observed_at_s * US)
    labels = md.labels or {}
    chain = owner_chain(pod, owner_lookup)
    owner_kind, owner_name = (chain[-1].kind, chain[-1].name) if chain else (None, None)
    verdict = classify(md.namespace, labels, [owner_of(r) for r in chain], class_rules, pod.spec.restart_policy)
    return {
        "updated_at": int(observed_at_s * US),
        "cluster": cluster,
        "job_id": md.uid,
        "tenant": tenant_of(md.namespace),
        "namespace": md.namespace,
        "pod": md.name,
        "queue": next((labels[k] for k in QUEUE_LABELS if k in labels), None),
        "gpu_model": None,  # known from the node (nodes table) or the GPU it got, not from the pod
        "gpus": req.gpus,
        "gpu_sharing": req.sharing,
        "mig_profile": req.mig_profile,
        "submitted_at": _utc(md.creation_timestamp),
        "scheduled_at": _utc(sched.last_transition_time) if sched is not None and sched.status == "True" else None,
        "started_at": min(started) if started else None,
        "finished_at": finished_at,
        "status": status,
        "reason": reason,
        "node": pod.spec.node_name,
        "gpu_uuids": gpu_uuids(pod),
        "owner_kind": owner_kind,
        "owner_name": owner_name,
        "source": "k8s",
        "workload_class": verdict.workload_class,
    }
