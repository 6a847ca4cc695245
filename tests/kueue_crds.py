"""Kueue's own CRD schemas (tests/fixtures/k8s/kueue-crds, see its SOURCES.md) as a validator of Kueue objects.

The openAPIV3Schema of a CRD version becomes a JSON Schema (the `jsonschema` package) with what the API server adds:
- `x-kubernetes-int-or-string`: an integer or a string (a quantity), never a JSON float;
- an object with `properties` takes no other field: the API server would drop an unknown field silently (a v1beta1
  `cohort` in a v1beta2 object vanishes), and `kubectl apply --validate=strict` refuses it;
- `x-kubernetes-list-type: map` lists hold one item per key, `set` lists no item twice;
- `metadata` (only `type: object` in the CRD): the ObjectMeta rules the API server applies to names and labels.

The CEL rules (`x-kubernetes-validations`) cannot be run here: `cel_rules` lists those on the fields an object
sets, and `HAND_CHECKED` checks each of them by hand, with the Kueue webhook's checks of resource groups
(kueue pkg/webhooks/clusterqueue_webhook.go, validateResourceGroups).
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path

import jsonschema
import yaml

CRDS = Path(__file__).resolve().parent / "fixtures" / "k8s" / "kueue-crds"
FILES = {
    "ClusterQueue": "kueue.x-k8s.io_clusterqueues.yaml",
    "ResourceFlavor": "kueue.x-k8s.io_resourceflavors.yaml",
    "LocalQueue": "kueue.x-k8s.io_localqueues.yaml",
}
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
LABEL_VALUE = {"type": "string", "maxLength": 63, "pattern": r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"}
LABEL_KEY = f"^({DNS_SUBDOMAIN[1:-1]}/)?" + r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"  # [prefix/]name


def object_meta(namespaced: bool) -> dict:
    """ObjectMeta as the API server checks it on create (apimachinery ValidateObjectMeta): a DNS-subdomain name,
    a DNS-label namespace on a namespaced kind only, label values of 63 characters at most."""
    props = {
        "name": {"type": "string", "maxLength": 253, "pattern": DNS_SUBDOMAIN},
        "labels": {"type": "object", "propertyNames": {"pattern": LABEL_KEY}, "additionalProperties": LABEL_VALUE},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    }
    if namespaced:
        props["namespace"] = {"type": "string", "maxLength": 63, "pattern": DNS_LABEL}
    meta = {"type": "object", "required": ["name"], "properties": props}
    if namespaced:
        meta["required"] = ["name", "namespace"]
    else:
        meta["not"] = {"required": ["namespace"]}
    return meta


@functools.cache
def crd(kind: str) -> dict:
    return yaml.safe_load((CRDS / FILES[kind]).read_text())


def versions(kind: str) -> dict[str, dict]:
    """name -> the CRD's version entry (served, storage, schema)."""
    return {v["name"]: v for v in crd(kind)["spec"]["versions"]}


def to_json_schema(s: dict) -> dict:
    """The structural schema as a JSON Schema with the API server's rules (the module's docstring)."""
    s = copy.deepcopy(s)
    if s.get("x-kubernetes-int-or-string"):
        s.pop("type", None)
        s["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    for key in ("properties",):
        if key in s:
            s[key] = {k: to_json_schema(v) for k, v in s[key].items()}
    if isinstance(s.get("additionalProperties"), dict):
        s["additionalProperties"] = to_json_schema(s["additionalProperties"])
    if "items" in s:
        s["items"] = to_json_schema(s["items"])
    for key in ("anyOf", "allOf", "oneOf"):
        if key in s and not s.get("x-kubernetes-int-or-string"):
            s[key] = [to_json_schema(x) for x in s[key]]
    if s.get("type") == "object" and "properties" in s and "additionalProperties" not in s:
        if not s.get("x-kubernetes-preserve-unknown-fields"):
            s["additionalProperties"] = False
    if s.get("x-kubernetes-list-type") == "set":
        s["uniqueItems"] = True
    return s


def _list_map_keys(validator, keys, instance, schema):
    if not validator.is_type(instance, "array"):
        return
    seen = set()
    for item in instance:
        if isinstance(item, dict):
            k = tuple(item.get(name) for name in keys)
            if k in seen:
                yield jsonschema.ValidationError(f"duplicate entry for key {dict(zip(keys, k, strict=True))}")
            seen.add(k)


def _not_a_float(checker, instance):
    # JSON Schema counts 2.0 as an integer; the API server's int-or-string takes an int or a string only.
    return isinstance(instance, int) and not isinstance(instance, bool)


_TYPES = jsonschema.Draft7Validator.TYPE_CHECKER.redefine("integer", _not_a_float)
Validator = jsonschema.validators.extend(
    jsonschema.Draft7Validator, {"x-kubernetes-list-map-keys": _list_map_keys}, type_checker=_TYPES
)


@functools.cache
def _validator(kind: str, version: str):
    entry = versions(kind)[version]
    schema = to_json_schema(entry["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = object_meta(crd(kind)["spec"]["scope"] == "Namespaced")
    schema["required"] = ["apiVersion", "kind", "metadata"]
    return Validator(schema)


def schema_errors(obj: dict) -> list[str]:
    """What the CRD's schema refuses in `obj` (its apiVersion picks the version), one line each."""
    kind = obj.get("kind")
    if kind not in FILES:
        return [f"kind {kind!r}: not a Kueue kind of the fixtures"]
    group, _, version = str(obj.get("apiVersion", "")).partition("/")
    entry = versions(kind).get(version)
    if group != crd(kind)["spec"]["group"] or entry is None or not entry["served"]:
        return [f"apiVersion {obj.get('apiVersion')!r}: not served by the {kind} CRD"]
    errors = sorted(_validator(kind, version).iter_errors(obj), key=lambda e: list(e.absolute_path))
    return [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors]


def cel_rules(obj: dict) -> set[str]:
    """The CEL rules of the CRD's schema on the fields `obj` sets (and on `spec` itself)."""
    kind, version = obj["kind"], obj["apiVersion"].partition("/")[2]
    found: set[str] = set()

    def walk(schema: dict, value) -> None:
        found.update(r["rule"] for r in schema.get("x-kubernetes-validations", ()))
        if isinstance(value, dict):
            for k, v in value.items():
                if k in schema.get("properties", {}):
                    walk(schema["properties"][k], v)
                elif isinstance(schema.get("additionalProperties"), dict):
                    walk(schema["additionalProperties"], v)
        elif isinstance(value, list) and "items" in schema:
            for v in value:
                walk(schema["items"], v)

    walk(versions(kind)[version]["schema"]["openAPIV3Schema"], obj)
    return found


# -- the CEL rules and the Kueue webhook's checks, by hand -----------------------------------------------------------
def _same_count(obj) -> list[str]:
    """rule: self.flavors.all(x, size(x.resources) == size(self.coveredResources)); with the webhook's: each
    flavor's resources name the covered resources in their order, no resource or flavor in two groups, quantities
    non-negative, lendingLimit at most nominalQuota."""
    out, seen_res, seen_fl = [], set(), set()
    for i, rg in enumerate(obj["spec"].get("resourceGroups", ())):
        covered = rg["coveredResources"]
        out += [f"resourceGroups[{i}]: {r} in two groups" for r in covered if r in seen_res]
        seen_res.update(covered)
        for f in rg["flavors"]:
            if f["name"] in seen_fl:
                out.append(f"flavor {f['name']} in two groups")
            seen_fl.add(f["name"])
            if [r["name"] for r in f["resources"]] != covered:
                out.append(f"resourceGroups[{i}] flavor {f['name']}: resources {f['resources']} != {covered}")
            for r in f["resources"]:
                for q in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                    if q in r and _number(r[q]) < 0:
                        out.append(f"flavor {f['name']} {r['name']}: {q} {r[q]} is negative")
                if "lendingLimit" in r and _number(r["lendingLimit"]) > _number(r["nominalQuota"]):
                    out.append(f"flavor {f['name']} {r['name']}: lendingLimit over nominalQuota")
    return out


def _no_borrowing_without_cohort(obj) -> list[str]:
    """rule: !has(self.cohortName) && has(self.resourceGroups) ? ...all(r, !has(r.borrowingLimit)) : true (v1beta1:
    self.cohort), and the webhook's: lendingLimit too needs a cohort."""
    spec = obj["spec"]
    if spec.get("cohortName") or spec.get("cohort"):
        return []
    return [
        f"flavor {f['name']}: {q} without a cohort"
        for rg in spec.get("resourceGroups", ())
        for f in rg["flavors"]
        for r in f["resources"]
        for q in ("borrowingLimit", "lendingLimit")
        if q in r
    ]


def _preemption(obj) -> list[str]:
    """rule: !(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) && ....policy != 'Never'), after
    defaulting (reclaimWithinCohort and borrowWithinCohort.policy default to Never)."""
    p = obj["spec"].get("preemption", {})
    bad = (
        p.get("reclaimWithinCohort", "Never") == "Never"
        and p.get("borrowWithinCohort", {}).get("policy", "Never") != "Never"
    )
    return ["preemption: borrowWithinCohort.policy needs reclaimWithinCohort other than Never"] if bad else []


def _fungibility(obj) -> list[str]:
    """rule: !has(self.preference) || (self.whenCanBorrow == 'TryNextFlavor' && self.whenCanPreempt ==
    'TryNextFlavor'), after defaulting (MayStopSearch, TryNextFlavor)."""
    f = obj["spec"].get("flavorFungibility", {})
    ok = "preference" not in f or (
        f.get("whenCanBorrow", "MayStopSearch") == "TryNextFlavor"
        and f.get("whenCanPreempt", "TryNextFlavor") == "TryNextFlavor"
    )
    return [] if ok else ["flavorFungibility: preference needs both whenCan* TryNextFlavor"]


def _topology_labels(obj) -> list[str]:
    """rule: !has(self.topologyName) || self.nodeLabels.size() >= 1"""
    spec = obj["spec"]
    return ["topologyName without nodeLabels"] if "topologyName" in spec and not spec.get("nodeLabels") else []


def _on_update_only(obj) -> list[str]:
    """A transition rule (it reads oldSelf): the API server runs it on an update only, never on a create."""
    return []


def _tolerations(check, message):
    def run(obj) -> list[str]:
        return [
            f"tolerations[{i}]: {message}" for i, t in enumerate(obj["spec"].get("tolerations", ())) if not check(t)
        ]

    return run


def _number(q) -> float:
    if isinstance(q, int):
        return q
    m = re.fullmatch(r"([+-]?[0-9.]+)([a-zA-Z]*)", q)
    scale = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    return float(m.group(1)) * scale[m.group(2)]


HAND_CHECKED = {
    "self.flavors.all(x, size(x.resources) == size(self.coveredResources))": _same_count,
    "!has(self.cohortName) && has(self.resourceGroups) ? self.resourceGroups.all(rg, rg.flavors.all(f, "
    "f.resources.all(r, !has(r.borrowingLimit)))) : true": _no_borrowing_without_cohort,
    "!has(self.cohort) && has(self.resourceGroups) ? self.resourceGroups.all(rg, rg.flavors.all(f, "
    "f.resources.all(r, !has(r.borrowingLimit)))) : true": _no_borrowing_without_cohort,
    "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) &&  self.borrowWithinCohort.policy != "
    "'Never')": _preemption,
    "!has(self.preference) || (self.whenCanBorrow == 'TryNextFlavor' && self.whenCanPreempt == 'TryNextFlavor')": (
        _fungibility
    ),
    "!has(self.topologyName) || self.nodeLabels.size() >= 1": _topology_labels,
    "!has(oldSelf.topologyName) || (has(self.topologyName) && self.topologyName == oldSelf.topologyName)": (
        _on_update_only
    ),
    "self == oldSelf": _on_update_only,
    "self.all(x, !has(x.key) ? x.operator == 'Exists' : true)": _tolerations(
        lambda t: "key" in t or t.get("operator") == "Exists", "no key needs operator Exists"
    ),
    "self.all(x, has(x.tolerationSeconds) ? x.effect == 'NoExecute' : true)": _tolerations(
        lambda t: "tolerationSeconds" not in t or t.get("effect") == "NoExecute", "tolerationSeconds needs NoExecute"
    ),
    "self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])": _tolerations(
        lambda t: t.get("operator", "Equal") in ("Equal", "Exists"), "operator must be Equal or Exists"
    ),
    "self.all(x, has(x.operator) && x.operator == 'Exists' ? !has(x.value) : true)": _tolerations(
        lambda t: t.get("operator") != "Exists" or "value" not in t, "operator Exists takes no value"
    ),
    "self.all(x, !has(x.effect) || x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])": _tolerations(
        lambda t: t.get("effect", "NoSchedule") in ("NoSchedule", "PreferNoSchedule", "NoExecute"), "unknown effect"
    ),
}


def errors(obj: dict) -> list[str]:
    """Everything the API server and Kueue's webhook would refuse in `obj` that the fixtures let us check: the
    schema's errors, then each hand-checked CEL rule's (a CEL rule on a field `obj` sets that no hand check covers
    is itself an error: the validator cannot vouch for it)."""
    out = schema_errors(obj)
    if out:
        return out
    for rule in sorted(cel_rules(obj)):
        check = HAND_CHECKED.get(rule)
        out += [f"unchecked CEL rule: {rule}"] if check is None else check(obj)
    return out
