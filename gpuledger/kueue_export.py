"""The tenants' GPU quotas as Kueue objects, so Kueue's scheduler and gpuledger's webhook hold the same numbers.

`kueue_objects` turns the config's [[tenants]] (their quotas, namespaces and fair-share weights), the GPU models of
the lake and the quota grants active at a time into Kueue API objects (docs/kueue.md):

- one ResourceFlavor per GPU model of any vendor, selecting its nodes by the label the vendor's node labeller sets
  (gpuledger.vendors.node_label: `nvidia.com/gpu.product` "NVIDIA-H100-80GB-HBM3", `amd.com/gpu.product-name`
  "AMD_Instinct_MI300X_OAM", `node.kubernetes.io/npu.chip.name` "910B3");
- one ClusterQueue per tenant, with a nominalQuota per flavor of the resource its vendor's device plugin asks a
  whole device by (gpuledger.vendors.device_resource: `nvidia.com/gpu`, `amd.com/gpu`, `huawei.com/Ascend910`...):
  the tenant's quota for that model, grants included (`tenant_caps`). Kueue lets a resource be covered by one
  resource group only, so the flavors are grouped by their resource, one resource group each; a partition resource
  the caller names (MIG, AMD CPX, vNPU templates) is covered in its device's group, its quota the cap in units of
  the partition's share of the model (gpuledger.partitions.instance_share);
- one LocalQueue per namespace of the tenant, pointing at its ClusterQueue (users submit to LocalQueues).

Kueue quotas are per (flavor, resource): it has no cap across a queue's flavors. A "*" quota caps all of a
tenant's models together in the webhook; here each flavor gets the whole "*" quota (or its own model's quota, if
lower), so Kueue never refuses what the webhook admits, and the webhook still refuses the total over "*".

The function is pure: the caller reads the lake's models and the grants and writes the YAML (`dump`).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

import yaml

from gpuledger.config import Config, Tenant, match_model
from gpuledger.errors import UsageError
from gpuledger.partitions import instance_share
from gpuledger.vendors import device_resource, node_label, read_resource

ANY = "*"
GROUP = "kueue.x-k8s.io"
# v1beta2 is the version Kueue stores (its CRDs serve v1beta1 too, deprecated): sites on a Kueue older than 0.15
# serve only v1beta1, whose ClusterQueue names the cohort `cohort` instead of `cohortName`.
API_VERSIONS = ("v1beta2", "v1beta1")
MAX_FLAVORS = 64  # of one resource group (the ClusterQueue CRD's maxItems)
MAX_GROUPS = 16  # resource groups of a ClusterQueue (the CRD's maxItems)
MAX_RESOURCES = 64  # resources one resource group covers (the CRD's maxItems)
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # the API server sets it on every namespace (1.21+)
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpuledger"}  # what `kubectl apply --prune -l` selects
MODEL_ANNOTATION = "gpuledger.io/gpu-model"
TENANT_ANNOTATION = "gpuledger.io/tenant"
TOTAL_ANNOTATION = "gpuledger.io/all-models-quota-gpus"
GRANTS_ANNOTATION = "gpuledger.io/grants"

_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


class Grant(Protocol):
    """An approved quota grant (gpuledger.quota_requests): `gpus` more of `gpu_model` (named as a quota key is, or
    "*") for `tenant`, from `valid_from` until `valid_until` (UTC; the end excluded)."""

    tenant: str
    gpu_model: str
    gpus: float
    valid_from: dt.datetime
    valid_until: dt.datetime


@dataclass(frozen=True)
class KueueOptions:
    api_version: str = "v1beta2"
    queue_prefix: str = "gpuledger-"  # ClusterQueue `<prefix><tenant>`
    cohort: str | None = "gpuledger"  # every ClusterQueue in it; None: no cohort, no borrowing
    borrow: bool | None = None  # borrow over the nominal quota; None: only where the webhook does not enforce quotas
    local_queue: str | None = "gpuledger"  # LocalQueue name in each tenant namespace; None: no LocalQueues
    label_key: str | None = None  # node label key of every flavor; None: each vendor's (vendors.node_label)
    label_values: Mapping[str, str] = field(default_factory=dict)  # GPU model -> its node label value
    tenants: tuple[str, ...] = ()  # only these tenants' queues; () = every tenant
    # partition resources the nodes advertise (nvidia.com/mig-1g.10gb, amd.com/cpx_nps4, huawei.com/Ascend910-4c),
    # each covered in the resource group of its vendor's whole-device resource
    partition_resources: tuple[str, ...] = ()


@dataclass(frozen=True)
class TenantCaps:
    """A tenant's caps at a time, grants included: per GPU model the cap the webhook's row of that model applies
    (None: no quota names it), and the all-models ("*") cap (None: none)."""

    per_model: dict[str, float | None]
    total: float | None
    grants: tuple[Grant, ...]


def product_label(model: str) -> str:
    """The value of the node label the vendor's node labeller gives a node of this model (vendors.node_label): for
    NVIDIA the NVML name with every space a dash (k8s-device-plugin internal/lm/resource.go, productLabel), as the
    recorded nodes in ../shared/data/k8s show ("NVIDIA-A100-SXM4-40GB" for NVML "NVIDIA A100-SXM4-40GB")."""
    return node_label(model)[1]


def flavor_name(model: str) -> str:
    """A ResourceFlavor name (a DNS subdomain) for a GPU model: lower case, each run of other characters a dash."""
    return re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")


def active(grants: Iterable[Grant], tenant: str, at: dt.datetime) -> tuple[Grant, ...]:
    """The tenant's grants in force at `at`: from valid_from on, until valid_until (excluded)."""
    at = _aware(at)
    return tuple(g for g in grants if g.tenant == tenant and _aware(g.valid_from) <= at < _aware(g.valid_until))


def _utc_text(t: dt.datetime) -> str:
    return f"{_aware(t).astimezone(dt.timezone.utc):%Y-%m-%dT%H:%M:%SZ}"


def _aware(t: dt.datetime) -> dt.datetime:
    """UTC when naive (the lake's timestamps are UTC): a naive and an aware time cannot be compared."""
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.timezone.utc)


def tenant_caps(tenant: Tenant, models: Sequence[str], grants: Iterable[Grant], at: dt.datetime) -> TenantCaps:
    """The caps the webhook applies to `tenant` at `at` (analytics/decisions.py `decisions` rows), grants added.

    A model's cap is its own quota key's (by `match_model`), else the "*" quota. A grant adds its GPUs to the cap
    of every model it names (a "*" grant: every model capped by "*"), and to the all-models cap: overlapping
    grants add up, and a grant is not swallowed by a "*" cap the tenant had already reached. A model no quota
    names stays uncapped: a grant cannot raise what has no limit."""
    mine = active(grants, tenant.name, at)
    star = tenant.quota.get(ANY)
    keys = [k for k in tenant.quota if k != ANY]
    per_model: dict[str, float | None] = {}
    for m in models:
        key = match_model(m, keys)
        base = tenant.quota[key] if key else star
        if base is None:
            per_model[m] = None
            continue
        named = [g for g in mine if (match_model(m, [g.gpu_model]) if g.gpu_model != ANY else key is None)]
        per_model[m] = base + math.fsum(g.gpus for g in named)
    total = None if star is None else star + math.fsum(g.gpus for g in mine)
    return TenantCaps(per_model, total, mine)


def nominal_gpus(caps: TenantCaps, model: str, share: float = 1.0) -> int | None:
    """The nominalQuota of `model`'s flavor: the tighter of its own cap and the all-models cap, in whole units of
    `share` of a device (1: a whole-device resource, `nvidia.com/gpu`, `amd.com/gpu`, `huawei.com/Ascend910`, an
    integer: a cap of 2.5 admits 2; a partition's share, 1/7 for a MIG 1g: a cap of 2.5 admits 17, which the
    webhook counts as 17/7 = 2.43 GPUs); None when uncapped."""
    cap = caps.per_model.get(model)
    if cap is None:
        return None
    if caps.total is not None:
        cap = min(cap, caps.total)
    return math.floor(cap / share + 1e-9)


def kueue_objects(
    cfg: Config, models: Sequence[str], grants: Iterable[Grant], at: dt.datetime, options: KueueOptions | None = None
) -> list[dict[str, Any]]:
    """ResourceFlavors (one per model), then ClusterQueues (one per tenant), then LocalQueues (one per tenant
    namespace), as plain dicts ready for YAML. UsageError (one line) on input Kubernetes would refuse."""
    o = options or KueueOptions()
    if o.api_version not in API_VERSIONS:
        raise UsageError(f"Kueue API version {o.api_version!r}: not one of {', '.join(API_VERSIONS)}")
    models = sorted(set(models))
    if not models:
        raise UsageError("no GPU model to make a ResourceFlavor of (the lake knows none yet: name them with --model)")
    tenants = _chosen(cfg.tenants, o.tenants)
    grants = tuple(grants)
    api = f"{GROUP}/{o.api_version}"
    if o.cohort:
        _check_name(o.cohort, "cohort", _DNS_SUBDOMAIN)
    if o.local_queue:
        _check_name(o.local_queue, "LocalQueue name", _DNS_SUBDOMAIN)
    if o.label_key is not None:
        _check_label_key(o.label_key)
    resources = _resources(models, o.partition_resources)
    unknown = sorted(set(o.label_values) - set(models))
    if unknown:
        raise UsageError(f"--node-label {unknown[0]}: not a GPU model of the lake (known: {', '.join(models)})")

    flavors = _flavor_names(models)
    objs: list[dict[str, Any]] = []
    for m in models:
        key, value = node_label(m)
        key = o.label_key or key
        value = o.label_values.get(m, value)
        if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
            raise UsageError(
                f"GPU model {m!r}: {value!r} is not a valid node label value (at most 63 letters, digits, '-', '_', "
                f"'.'): give its nodes' value with --node-label '{m}=VALUE'"
            )
        objs.append(
            {
                "apiVersion": api,
                "kind": "ResourceFlavor",
                "metadata": {"name": flavors[m], "labels": dict(MANAGED_BY), "annotations": {MODEL_ANNOTATION: m}},
                "spec": {"nodeLabels": {key: value}},
            }
        )
    # Borrowing past a nominal quota the webhook enforces would admit a workload whose pods the webhook then denies.
    borrow = o.borrow if o.borrow is not None else cfg.enforcer.quota_mode != "enforce"
    configured = sorted(ns for t in cfg.tenants for ns in t.namespaces)
    queues = []
    for t in tenants:
        cq = o.queue_prefix + flavor_name(t.name)
        _check_name(cq, f"ClusterQueue name of tenant {t.name!r}", _DNS_SUBDOMAIN)
        queues.append(cq)
        caps = tenant_caps(t, models, grants, at)
        objs.append(
            _cluster_queue(api, o, cq, t, caps, resources, flavors, borrow, cfg.enforcer.tenant_label, configured)
        )
    if len(set(queues)) < len(queues):
        dup = sorted({q for q in queues if queues.count(q) > 1})
        raise UsageError(f"two tenants' names make the same ClusterQueue name {dup[0]!r}: rename one")
    if o.local_queue:
        for t, cq in zip(tenants, queues, strict=True):
            for ns in sorted(t.namespaces):
                _check_name(ns, f"namespace of tenant {t.name!r}", _DNS_LABEL)
                objs.append(
                    {
                        "apiVersion": api,
                        "kind": "LocalQueue",
                        "metadata": {"name": o.local_queue, "namespace": ns, "labels": dict(MANAGED_BY)},
                        "spec": {"clusterQueue": cq},
                    }
                )
    return objs


def dump(objs: Sequence[dict[str, Any]], header: str = "") -> str:
    """A multi-document YAML stream (what `kubectl apply -f` reads), after `header` as comment lines."""
    head = "".join(f"# {line}\n" for line in header.splitlines())
    return head + yaml.safe_dump_all(objs, sort_keys=False, explicit_start=True)


# -- the pieces ----------------------------------------------------------------------------------------------------
def _chosen(tenants: tuple[Tenant, ...], names: tuple[str, ...]) -> tuple[Tenant, ...]:
    known = [t.name for t in tenants]
    for n in names:
        if n not in known:
            raise UsageError(f"--tenant {n}: no such tenant in the config (tenants: {', '.join(known) or 'none'})")
    return tuple(t for t in tenants if not names or t.name in names)


@dataclass(frozen=True)
class _Group:
    """A resource group: the models whose devices a pod asks by `whole` (its flavors, in name order), and the
    partition resources of those devices the group covers too (in name order, after `whole`)."""

    whole: str
    models: tuple[str, ...]
    partitions: tuple[str, ...] = ()

    @property
    def covered(self) -> list[str]:
        return [self.whole, *self.partitions]


def _partition_parent(name: str) -> str:
    """The whole-device resource of the device a partition resource cuts (nvidia.com/mig-1g.10gb -> nvidia.com/gpu,
    amd.com/cpx_nps4 -> amd.com/gpu, huawei.com/Ascend910-4c -> huawei.com/Ascend910); UsageError for a name that
    is no partition resource of the device plugins (vendors.read_resource)."""
    r = read_resource(name)
    whole = {"nvidia.com/gpu", "amd.com/gpu", "amd.com/gpu_vf", "amd.com/gpu_pf"}
    if r is not None and name not in whole:
        if name.startswith("nvidia.com/mig-"):
            return "nvidia.com/gpu"
        if r.vendor == "amd":  # the mixed naming: amd.com/<compute>_<memory>, SPX the whole GPU under that name
            return "amd.com/gpu"
        if r.vendor == "huawei" and r.profile is not None:
            return name.split("-", 1)[0]
    raise UsageError(
        f"--partition-resource {name}: not a partition resource of a device plugin (nvidia.com/mig-<profile>, "
        "amd.com/<compute>_<memory> such as amd.com/cpx_nps4, huawei.com/Ascend<chip>-<n>c)"
    )


def _resources(models: list[str], partitions: Sequence[str] = ()) -> list[_Group]:
    """The models by the resource a pod asks one of their devices by, in the resources' name order (a ClusterQueue's
    resource groups) and each resource's models in name order (its flavors: Kueue's preference for a workload that
    names no model), each group with the partition resources of its devices. Kueue lets one resource group cover a
    resource, and a flavor be in one group."""
    by: dict[str, list[str]] = {}
    for m in models:
        r = device_resource(m)
        if r is None:
            raise UsageError(
                f"GPU model {m!r}: a Huawei model naming no Ascend chip (910, 310P, 310): no device plugin resource"
            )
        by.setdefault(r, []).append(m)
    parts: dict[str, set[str]] = {}
    for name in partitions:
        parent = _partition_parent(name)
        if parent not in by:
            raise UsageError(
                f"--partition-resource {name}: no GPU model here is one whose devices a pod asks by {parent} "
                f"(the models' resources: {', '.join(sorted(by))})"
            )
        parts.setdefault(parent, set()).add(name)
    if len(by) > MAX_GROUPS:
        raise UsageError(f"{len(by)} GPU resources: a Kueue ClusterQueue takes at most {MAX_GROUPS} resource groups")
    for r, ms in by.items():
        if len(ms) > MAX_FLAVORS:
            raise UsageError(f"{len(ms)} GPU models of {r}: a Kueue resource group takes at most {MAX_FLAVORS} flavors")
        if len(parts.get(r, ())) + 1 > MAX_RESOURCES:
            raise UsageError(f"{r} and {len(parts[r])} partition resources: a resource group covers {MAX_RESOURCES}")
    return [_Group(r, tuple(by[r]), tuple(sorted(parts.get(r, ())))) for r in sorted(by)]


def _share(resource: str, model: str) -> float:
    """The share of a `model` device one unit of `resource` holds: 1 for the whole-device resource (and SPX, the
    whole GPU under AMD's mixed naming), else the partition's share by gpuledger.partitions: MIG g/7, AMD 1/the
    partitions of the mode on this model (CPX: 1/8 of an MI300X, 1/6 of an MI300A), a vNPU its AI cores over this
    chip's (Ascend910-4c: 4/32 of a 910, 4/20 of a 910B3). UsageError where partitions cannot say (a template name
    it does not read, a chip whose AI cores it does not know): a guessed share would be a wrong quota."""
    r = read_resource(resource)
    if r is None or r.profile is None:
        return 1.0
    share = instance_share(r.profile, model)
    if share is None:
        raise UsageError(
            f"--partition-resource {resource}: its share of a {model!r} device is not known (gpuledger.partitions "
            "reads MIG profiles, AMD modes and vNPU templates <n>c[.<m>cpu] of known chips)"
        )
    return share


def _flavor_names(models: list[str]) -> dict[str, str]:
    names = {m: flavor_name(m) for m in models}
    seen: dict[str, str] = {}
    for m, n in names.items():
        if not n or len(n) > 253:
            raise UsageError(f"GPU model {m!r} makes no ResourceFlavor name (a DNS subdomain)")
        if n in seen:
            raise UsageError(f"GPU models {seen[n]!r} and {m!r} make the same ResourceFlavor name {n!r}")
        seen[n] = m
    return names


def _check_name(name: str, what: str, pattern: re.Pattern) -> str:
    limit = 63 if pattern is _DNS_LABEL else 253
    if len(name) > limit or not pattern.fullmatch(name):
        kind = "DNS label" if pattern is _DNS_LABEL else "DNS subdomain"
        raise UsageError(f"{what} {name!r}: not a Kubernetes name (a {kind}: lower-case letters, digits and '-')")
    return name


def _check_label_key(key: str) -> None:
    prefix, _, name = key.rpartition("/")
    ok = len(name) <= 63 and _LABEL_NAME.fullmatch(name) and (not prefix or _DNS_SUBDOMAIN.fullmatch(prefix))
    if not ok:
        raise UsageError(f"--node-label-key {key!r}: not a node label key ([prefix/]name)")


def _quantity(x: float) -> int | str:
    """An int-or-string quantity: integers as ints, others as a plain decimal (the CRD's pattern has no room for a
    JSON float such as 1.5)."""
    return int(x) if float(x).is_integer() else format(Decimal(repr(float(x))), "f")


def _namespace_selector(t: Tenant, tenant_label: str, configured: list[str]) -> dict[str, Any] | None:
    """The tenant's namespaces as the collector and the webhook see them: those the config names; for a tenant that
    names none, those labelled with the tenant label, less any the config gives to another tenant (the config
    wins). Kueue ANDs a selector's terms, so it cannot also take labelled namespaces of a tenant that names some."""
    if t.namespaces:
        return {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": sorted(t.namespaces)}]}
    if not tenant_label or not _LABEL_VALUE.fullmatch(t.name) or len(t.name) > 63:
        return None  # Kueue's null selector: no namespace, as no namespace can belong to the tenant
    sel: dict[str, Any] = {"matchLabels": {tenant_label: t.name}}
    if configured:
        sel["matchExpressions"] = [{"key": NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": configured}]
    return sel


def _cluster_queue(
    api: str,
    o: KueueOptions,
    name: str,
    t: Tenant,
    caps: TenantCaps,
    resources: list[_Group],
    flavors: dict[str, str],
    borrow: bool,
    tenant_label: str,
    configured: list[str],
) -> dict[str, Any]:
    groups = []
    for g in resources:
        entries = []
        for m in g.models:
            quotas = []
            for resource in g.covered:
                nominal = nominal_gpus(caps, m, _share(resource, m))
                r: dict[str, Any] = {"name": resource, "nominalQuota": 0 if nominal is None else nominal}
                # Uncapped (no quota names the model): nothing of its own, and borrowing from the cohort is left
                # open, as the webhook leaves it. Kueue refuses a borrowingLimit without a cohort.
                if o.cohort and nominal is not None and not borrow:
                    r["borrowingLimit"] = 0
                quotas.append(r)
            entries.append({"name": flavors[m], "resources": quotas})
        groups.append({"coveredResources": g.covered, "flavors": entries})
    spec: dict[str, Any] = {}
    selector = _namespace_selector(t, tenant_label, configured)
    if selector is not None:
        spec["namespaceSelector"] = selector
    if o.cohort:
        spec["cohortName" if o.api_version == "v1beta2" else "cohort"] = o.cohort
    spec["fairSharing"] = {"weight": _quantity(t.weight)}  # used when Kueue's fair sharing is on
    spec["resourceGroups"] = groups
    annotations = {TENANT_ANNOTATION: t.name}
    if caps.total is not None:
        annotations[TOTAL_ANNOTATION] = str(_quantity(caps.total))  # the webhook enforces it; Kueue cannot
    if caps.grants:
        annotations[GRANTS_ANNOTATION] = "; ".join(
            f"+{_quantity(g.gpus)} {g.gpu_model} until {_utc_text(g.valid_until)}"
            for g in sorted(caps.grants, key=lambda g: (_aware(g.valid_until), g.gpu_model))
        )
    return {
        "apiVersion": api,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": dict(MANAGED_BY), "annotations": annotations},
        "spec": spec,
    }
