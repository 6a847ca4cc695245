"""One jobs row from one Pod, as a pure function of the Pod (a kubernetes client V1Pod) and lookups.

GPU demand comes from three places in real clusters (tests/fixtures/k8s): extended resources in the
containers (`nvidia.com/gpu`, `nvidia.com/gpu.shared` for time slicing, `nvidia.com/mig-<profile>`), or,
for schedulers such as Run:ai, annotations only (`gpu-fraction`, `nvidia.com/mig-<profile>`) with nothing in
`resources`. A collector reading only `resources` would miss those pods, so both are read. AMD's and Huawei's
device plugins' names (`amd.com/gpu`, `amd.com/cpx_nps4`, `huawei.com/Ascend910`, `huawei.com/Ascend310P-2c`) and
the config's [[accelerators]] rows are read by the one rule the webhook uses too (gpuledger/vendors.py): a
partition counts its share of a device, as a MIG slice does.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from kubernetes.utils import parse_quantity

from gpuledger.classify import classify, owner_of
from gpuledger.config import ClassRule
from gpuledger.mig import mig_share
from gpuledger.vendors import Resource, read_resource, unknown

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
    sharing: str  # exclusive, fraction, time-sliced, mig, partition (AMD CPX, Ascend vNPU), unmapped
    mig_profile: str | None = None
    vendor: str | None = None  # nvidia, amd, huawei: whose device plugin's resource it asks; None for annotations
    model: str | None = None  # the model the resource name or the config's [[accelerators]] row names
    unmapped: tuple[str, ...] = ()  # resources that look like accelerators and that nothing maps: counted nowhere


@dataclass
class _Asks:
    """What one container asks: whole devices, time-sliced replicas, partitions (profile -> count, share)."""

    whole: float = 0.0
    shared: float = 0.0
    parts: dict[str, tuple[float, float]] = field(default_factory=dict)
    resources: dict[str, Resource] = field(default_factory=dict)  # the resources asked, read
    unmapped: list[str] = field(default_factory=list)


def _quantity(value: object, where: str) -> float:
    try:
        q = float(parse_quantity(value))
    except (ValueError, TypeError) as e:
        raise BadQuantity(f"{where}: {value!r} is not a quantity") from e
    if q < 0:
        raise BadQuantity(f"{where}: {value!r} is negative")
    return q


def _amounts(container, where: str, extra: Mapping[str, Resource]) -> _Asks:
    """What one container asks of accelerators, by the device plugins' resource names (gpuledger/vendors.py)."""
    res = container.resources
    amounts = dict((res.requests or {}) if res else {})
    amounts.update((res.limits or {}) if res else {})  # for extended resources limits are authoritative
    at = f"{where} container {container.name}"
    out = _Asks()
    for name, value in amounts.items():
        if name == GPU_SHARED:
            out.shared += _quantity(value, f"{at} {name}")
            continue
        r = read_resource(name, extra)
        if r is None:
            if unknown(name, extra):
                out.unmapped.append(name)
            continue
        n = _quantity(value, f"{at} {name}")
        if not n:
            continue
        out.resources[name] = r
        if r.profile is None and r.share == 1.0:
            out.whole += n
        else:  # a MIG slice, an AMD partition, an Ascend vNPU, or a mapped share: its own profile's share
            profile = r.profile or name.split("/", 1)[1]
            count, _ = out.parts.get(profile, (0.0, r.share))
            out.parts[profile] = (count + n, r.share)
    return out


def gpu_request(pod, extra: Mapping[str, Resource] | None = None) -> GpuRequest | None:
    """What the pod asks of GPUs (NPUs too), or None for a pod that asks for none. `extra` is the config's
    [[accelerators]] rows; a pod asking only for accelerator-like resources nothing maps is `unmapped`, 0 GPUs."""
    extra = extra or {}
    where = f"pod {pod.metadata.namespace}/{pod.metadata.name}"
    main = [_amounts(c, where, extra) for c in pod.spec.containers or []]
    init = [_amounts(c, where, extra) for c in pod.spec.init_containers or []]
    # Containers run together (their requests add up); init containers run one at a time before them.
    whole = max(sum(a.whole for a in main), max((a.whole for a in init), default=0.0))
    shared = max(sum(a.shared for a in main), max((a.shared for a in init), default=0.0))
    parts: dict[str, tuple[float, float]] = {}
    for a in main:
        for profile, (n, share) in a.parts.items():
            parts[profile] = (parts.get(profile, (0.0, share))[0] + n, share)
    asked = {k: r for a in main + init for k, r in a.resources.items()}
    vendors = {r.vendor for r in asked.values()}
    vendor = vendors.pop() if len(vendors) == 1 else None
    models = {r.model for r in asked.values() if r.model}
    model = models.pop() if len(models) == 1 else None
    ann = pod.metadata.annotations or {}
    for k, v in ann.items():
        if k.startswith(MIG_PREFIX) and k[len(MIG_PREFIX) :] not in parts:
            profile = k[len(MIG_PREFIX) :]
            parts[profile] = (_quantity(v, f"{where} annotation {k}"), mig_share(profile))
            vendor = vendor or "nvidia"
    if whole:
        return GpuRequest(whole, "exclusive", vendor=vendor, model=model)
    if parts:
        # One pod with several profiles is rare; its share is the sum, its profile the first listed.
        profile = next(iter(parts))
        sharing = "mig" if vendor == "nvidia" else "partition"
        gpus = sum(n * share for n, share in parts.values())
        return GpuRequest(gpus, sharing, profile, vendor, model)
    if shared:
        # A time-sliced replica: its share of the GPU depends on the node's replica count, which the pod
        # does not carry; count one replica as one GPU-slot and let analytics divide by the node's replicas.
        return GpuRequest(shared, "time-sliced", vendor="nvidia")
    for key in FRACTION_ANNOTATIONS:
        if key in ann:
            f = _quantity(ann[key], f"{where} annotation {key}")
            if f > 0:
                return GpuRequest(f, "fraction")
    unmapped = tuple(sorted({n for a in main + init for n in a.unmapped}))
    if unmapped:
        return GpuRequest(0.0, "unmapped", unmapped=unmapped)
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
    accelerators: Mapping[str, Resource] | None = None,
) -> dict | None:
    """The jobs row for this state of `pod`, or None when the pod asks for no GPU. Its workload class comes from
    the pod, its owner chain and the config's [[classes]] `class_rules` (gpuledger/classify.py). `accelerators` are
    the config's [[accelerators]] rows (Config.accelerator_resources); a pod asking only for accelerator-like
    resources none maps gets a row with 0 GPUs and gpu_sharing `unmapped`: recorded, counted nowhere."""
    req = gpu_request(pod, accelerators)
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
        "gpu_model": req.model,  # a config row's model; else known from the node or the GPU it got, not the pod
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
