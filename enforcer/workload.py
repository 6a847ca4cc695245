"""What a workload asks for: GPUs (whole, or MIG slices), the GPU model if it names one, and where its pod template is.

Pure functions over the object of an AdmissionReview (a dict, as the API server sends it). Kinds:
- Pod: its own spec.
- Job (batch/v1): spec.template x parallelism (default 1): the pods that run at once.
- JobSet (jobset.x-k8s.io): each replicatedJob's Job template x its replicas (default 1) x the Job's parallelism.
- RayJob / RayCluster (ray.io): the head group (one pod) plus each worker group's template x replicas.
- Workload (kueue.x-k8s.io): each podSet's template x count.

A pod's GPUs follow Kubernetes' effective request: max(the sum over its containers, the largest init container),
from limits (an extended resource's request must equal its limit, and defaults to it). A GPU quantity must be a
whole, non-negative number of GPUs: "1.5", "500m", "abc" or -1 is an AskError naming the container and value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpuledger.mig import mig_share
from gpuledger.vendors import Resource, read_resource, unknown

GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"  # nvidia.com/mig-1g.10gb: one MIG slice of that profile
# amd.com/gpu.product-name is the AMD GPU Operator's node labeller's (AMD_Instinct_MI300X_OAM)
MODEL_LABELS = (
    "nvidia.com/gpu.product",
    "cloud.google.com/gke-accelerator",
    "karpenter.k8s.aws/instance-gpu-name",
    "amd.com/gpu.product-name",
)
_WHOLE = re.compile(r"^\+?[0-9]+$")
# What Kubernetes can hold: a quantity is at most an int64, a pod count (parallelism, replicas, count) an int32.
# Past these a request cannot come from the API server, and the arithmetic on them (floats) would overflow.
MAX_QUANTITY = 2**63 - 1
MAX_PODS = 2**31 - 1


class AskError(ValueError):
    """A GPU request the webhook cannot read: the message names the place and the value."""


@dataclass(frozen=True)
class Template:
    """One pod template inside the object: where it is (a JSON Pointer, for patches) and how many run at once."""

    pointer: str  # "" for a Pod itself; "/spec/template" for a Job; ...
    replicas: int
    gpus: int  # whole GPUs per pod, of any vendor (nvidia.com/gpu, amd.com/gpu, huawei.com/Ascend910...)
    mig: dict[str, int] = field(default_factory=dict)  # partition profile (MIG, AMD CPX, vNPU) -> units per pod
    model: str | None = None  # the GPU model the pod's node selector or affinity names
    shares: dict[str, float] = field(default_factory=dict)  # profile -> one unit's share of a device, if not MIG's
    unmapped: tuple[str, ...] = ()  # accelerator-like resources nothing maps: admitted with a warning, not counted


@dataclass(frozen=True)
class Ask:
    kind: str
    templates: tuple[Template, ...]

    @property
    def gpus(self) -> int:
        return sum(t.gpus * t.replicas for t in self.templates)

    @property
    def mig(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.templates:
            for profile, n in t.mig.items():
                out[profile] = out.get(profile, 0) + n * t.replicas
        return out

    @property
    def model(self) -> str | None:
        models = {t.model for t in self.templates if t.model and (t.gpus or t.mig)}
        return models.pop() if len(models) == 1 else None

    @property
    def asks_gpus(self) -> bool:
        return self.gpus > 0 or bool(self.mig)

    @property
    def unmapped(self) -> tuple[str, ...]:
        """Accelerator-like resource names the object asks for that no rule or config row maps, sorted."""
        return tuple(sorted({n for t in self.templates for n in t.unmapped}))

    @property
    def gpu_share(self) -> float:
        """GPUs asked, whole ones plus partitions as their share of a device (7 x 1g.10gb = 1, 8 x cpx_nps4 = 1,
        4 x Ascend310P-2c = 1), as the analytics count allocations: what the quota, budget and idle-hog policies
        weigh."""
        shares = {p: sh for t in self.templates for p, sh in t.shares.items()}
        return self.gpus + sum(n * shares.get(p, mig_share(p)) for p, n in self.mig.items())


def quantity(value, where: str) -> int:
    """A GPU count from a resource quantity: an int, or a string of digits. Anything else is an AskError."""
    if isinstance(value, bool):
        raise AskError(f"{where}: {value!r} is not a number of GPUs")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and _WHOLE.match(value.strip()):
        digits = value.strip().lstrip("+").lstrip("0")
        # int() of more than 4,300 digits raises, and of fewer is still more than any quantity: refused unread
        n = MAX_QUANTITY + 1 if len(digits) > len(str(MAX_QUANTITY)) else int(digits or "0")
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    else:
        raise AskError(f"{where}: {_short(value)} is not a whole number of GPUs (GPUs cannot be split by quantity)")
    if n < 0:
        raise AskError(f"{where}: {_short(value)} is negative")
    if n > MAX_QUANTITY:
        raise AskError(f"{where}: {_short(value)} is more GPUs than a Kubernetes quantity holds ({MAX_QUANTITY:,})")
    return n


def _short(value) -> str:
    """The value as the message shows it: a 5,000-digit one is cut, and says how long it was."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text):,} characters)"


def _count(value, where: str, default: int = 1) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AskError(f"{where}: {_short(value)} is not a count of pods")
    if value > MAX_PODS:
        raise AskError(f"{where}: {_short(value)} is more pods than Kubernetes counts ({MAX_PODS:,})")
    return value


def _container_gpus(
    c: dict, where: str, extra: Mapping[str, Resource]
) -> tuple[int, dict[str, int], dict[str, float], list[str], set[str]]:
    """(whole devices, partition profile -> units, profile -> share when not MIG's, unmapped names, the models
    config rows name) of one container, by the device plugins' resource names (gpuledger/vendors.py) and the
    config's [[accelerators]]."""
    res = c.get("resources") or {}
    if not isinstance(res, dict):
        raise AskError(f"{where}.resources: expected an object")
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    if not isinstance(limits, dict) or not isinstance(requests, dict):
        raise AskError(f"{where}.resources: limits and requests must be objects")
    gpus, mig, shares, unmapped, models = 0, {}, {}, [], set()
    for key in {*limits, *requests}:
        r = read_resource(key, extra)
        if r is None:
            if unknown(key, extra):
                unmapped.append(key)
            continue
        given = limits.get(key, requests.get(key))
        n = quantity(given, f"{where}.resources.{'limits' if key in limits else 'requests'}[{key}]")
        if key in limits and key in requests and quantity(requests[key], f"{where}.resources.requests[{key}]") != n:
            raise AskError(f"{where}.resources: {key} request {requests[key]!r} differs from its limit {given!r}")
        if n and r.model:
            models.add(r.model)
        if r.profile is None and r.share == 1.0:
            gpus += n
        elif n:
            profile = r.profile or key.split("/", 1)[1]
            mig[profile] = mig.get(profile, 0) + n
            if not key.startswith(MIG_PREFIX):
                shares[profile] = r.share
    return gpus, mig, shares, unmapped, models


def _model(spec: dict) -> str | None:
    sel = spec.get("nodeSelector") or {}
    for label in MODEL_LABELS:
        if isinstance(sel, dict) and isinstance(sel.get(label), str):
            return sel[label]
    terms = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms", [])
    )
    for term in terms if isinstance(terms, list) else []:
        for e in (term or {}).get("matchExpressions", []) or []:
            if e.get("key") in MODEL_LABELS and e.get("operator") == "In" and len(e.get("values") or []) == 1:
                return e["values"][0]
    return None


def pod_spec_gpus(
    spec, where: str, extra: Mapping[str, Resource] | None = None
) -> tuple[int, dict[str, int], str | None]:
    """(whole GPUs, partition units, model) of one pod spec, by the effective-request rule."""
    t = _spec_template(spec, where, extra or {}, "", 1)
    return t.gpus, t.mig, t.model


def _spec_template(spec, where: str, extra: Mapping[str, Resource], pointer: str, replicas: int) -> Template:
    if not isinstance(spec, dict):
        raise AskError(f"{where}: expected a pod spec object")
    containers = spec.get("containers")
    if not isinstance(containers, list):
        raise AskError(f"{where}.containers: missing or not a list")
    total, mig, shares, unmapped, models = 0, {}, {}, [], set()
    for i, c in enumerate(containers):
        g, m, sh, un, md = _container_gpus(c if isinstance(c, dict) else {}, f"{where}.containers[{i}]", extra)
        total += g
        for k, n in m.items():
            mig[k] = mig.get(k, 0) + n
        shares, unmapped, models = shares | sh, unmapped + un, models | md
    init = spec.get("initContainers") or []
    for i, c in enumerate(init if isinstance(init, list) else []):
        g, m, sh, un, md = _container_gpus(c if isinstance(c, dict) else {}, f"{where}.initContainers[{i}]", extra)
        total = max(total, g)
        for k, n in m.items():
            mig[k] = max(mig.get(k, 0), n)
        shares, unmapped, models = shares | sh, unmapped + un, models | md
    # the node selector's model, else the one a config [[accelerators]] row names for the resources asked
    model = _model(spec) or (models.pop() if len(models) == 1 else None)
    return Template(pointer, replicas, total, mig, model, shares, tuple(sorted(set(unmapped))))


def _template(extra: Mapping[str, Resource], obj: dict, pointer: str, replicas: int) -> Template:
    node = obj
    for part in pointer.strip("/").split("/") if pointer else []:
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            raise AskError(f"{'.'.join(pointer.strip('/').split('/'))}: missing")
    where = ".".join([*pointer.strip("/").split("/"), "spec"]) if pointer else "spec"
    spec = node.get("spec") if isinstance(node, dict) else None
    if spec is None:
        raise AskError(f"{where}: missing (an object without a pod spec)")
    return _spec_template(spec, where, extra, pointer, replicas)


def _items(parent: dict, key: str, where: str) -> list[dict]:
    """A list of objects (replicatedJobs, workerGroupSpecs, podSets), or an AskError naming it."""
    items = parent.get(key)
    if items is None:
        return []
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise AskError(f"{where}.{key}: expected a list of objects")
    return items


def _obj(value, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AskError(f"{where}: expected an object")
    return value


def controller_kind(obj) -> str | None:
    """The kind of the object's controller (its ownerReference with controller: true), if it names one."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    refs = meta.get("ownerReferences") if isinstance(meta, dict) else None
    if not isinstance(refs, list):
        return None
    for r in refs:
        if isinstance(r, dict) and r.get("controller") is True and isinstance(r.get("kind"), str):
            return r["kind"]
    return None


def ask(kind: str, obj, accelerators: Mapping[str, Resource] | None = None) -> Ask:
    """The GPUs `obj` (of Kubernetes `kind`) runs at once. Kinds without pods ask for nothing. `accelerators` are the
    config's [[accelerators]] rows (Config.accelerator_resources), read beside the built-in resource names."""
    extra = accelerators or {}
    if not isinstance(obj, dict):
        raise AskError("object: expected a Kubernetes object")
    spec = obj.get("spec")
    if kind == "Pod":
        return Ask(kind, (_template(extra, obj, "", 1),))
    if kind not in ("Job", "JobSet", "RayJob", "RayCluster", "Workload"):
        return Ask(kind, ())
    if not isinstance(spec, dict):
        raise AskError("object.spec: missing (an object without spec)")
    if kind == "Job":
        return Ask(
            kind, (_template(extra, obj, "/spec/template", _count(spec.get("parallelism"), "spec.parallelism")),)
        )
    if kind == "JobSet":
        out = []
        for i, rj in enumerate(_items(spec, "replicatedJobs", "spec")):
            replicas = _count(rj.get("replicas"), f"spec.replicatedJobs[{i}].replicas")
            job = _obj(
                _obj(rj.get("template"), f"spec.replicatedJobs[{i}].template").get("spec"),
                f"spec.replicatedJobs[{i}].template.spec",
            )
            par = _count(job.get("parallelism"), f"spec.replicatedJobs[{i}].template.spec.parallelism")
            out.append(_template(extra, obj, f"/spec/replicatedJobs/{i}/template/spec/template", replicas * par))
        return Ask(kind, tuple(out))
    if kind in ("RayJob", "RayCluster"):
        base = "/spec/rayClusterSpec" if kind == "RayJob" else "/spec"
        cluster = spec.get("rayClusterSpec") if kind == "RayJob" else spec
        if not isinstance(cluster, dict):
            return Ask(kind, ())  # a RayJob on an existing cluster (clusterSelector) starts no GPU pods
        out = [_template(extra, obj, f"{base}/headGroupSpec/template", 1)] if cluster.get("headGroupSpec") else []
        for i, g in enumerate(_items(cluster, "workerGroupSpecs", base[1:].replace("/", "."))):
            n = _count(g.get("replicas", g.get("minReplicas")), f"{base[1:]}.workerGroupSpecs[{i}].replicas")
            out.append(_template(extra, obj, f"{base}/workerGroupSpecs/{i}/template", n))
        return Ask(kind, tuple(out))
    out = []  # kueue Workload
    for i, ps in enumerate(_items(spec, "podSets", "spec")):
        out.append(
            _template(extra, obj, f"/spec/podSets/{i}/template", _count(ps.get("count"), f"spec.podSets[{i}].count"))
        )
    return Ask(kind, tuple(out))
