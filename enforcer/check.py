"""`gpuledger enforcer check`: what the webhook would answer for workloads in a file, without a cluster.

The objects (a YAML or JSON stream: Pods, Jobs, JobSets, Ray and Kueue kinds; any other kind is given its
workload class and asks for nothing; a recorded AdmissionReview stands for the object it carries) are wrapped in the
AdmissionReview a CREATE would carry and decided by the same pure `decide` the server runs, against the decision
table in the lake: a platform engineer can try a policy change, or a user a manifest, before either reaches the API
server. Each line names the workload class the object was given. Nothing is counted or audited.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from dataclasses import dataclass

import yaml

from gpuledger.enforcer.decide import Outcome, Recent, Settings, Table, decide
from gpuledger.enforcer.review import ReviewError, parse
from gpuledger.errors import UsageError

# The API group of a kind whose apiVersion does not say it (a bare "v1" on a Job).
GROUPS = {
    "Job": "batch",
    "JobSet": "jobset.x-k8s.io",
    "RayJob": "ray.io",
    "RayCluster": "ray.io",
    "Workload": "kueue.x-k8s.io",
}


@dataclass(frozen=True)
class Checked:
    where: str  # "Pod vision-train/train-0"
    validate: Outcome
    mutate: Outcome


class _Loader(yaml.SafeLoader):
    """YAML as Kubernetes reads it: an unquoted time (`creationTimestamp: 2024-04-18T18:43:12Z`, as `kubectl get -o
    yaml` prints it) stays the string the API server would send, not a datetime that JSON cannot carry."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def objects(text: str, source: str) -> list[dict]:
    """The Kubernetes objects of a YAML (or JSON) stream; a clear error naming the document that is not one."""
    try:
        docs = [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
    except yaml.YAMLError as e:
        raise UsageError(f"{source}: not YAML or JSON: {e}") from None
    out = []
    for i, d in enumerate(docs):
        if isinstance(d, dict) and d.get("kind") == "AdmissionReview":
            d = _reviewed(d, source, i)
        items = d.get("items") if isinstance(d, dict) and str(d.get("kind", "")).endswith("List") else [d]
        for obj in items if isinstance(items, list) else [items]:
            if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
                raise UsageError(f"{source}: document {i + 1} is not a Kubernetes object (no kind)")
            out.append(obj)
    if not out:
        raise UsageError(f"{source}: no Kubernetes object in it")
    return out


def _reviewed(doc: dict, source: str, i: int) -> dict:
    """The object a recorded AdmissionReview carries (what the API server sent a webhook), in the review's namespace
    when its metadata names none (a new object's often does not), of the review's kind when it says none."""
    req = doc.get("request")
    obj = req.get("object") if isinstance(req, dict) else None
    if not isinstance(obj, dict):
        raise UsageError(f"{source}: document {i + 1} is an AdmissionReview without a request.object")
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    ns = req.get("namespace")
    if not meta.get("namespace") and isinstance(ns, str) and ns:
        obj = {**obj, "metadata": {**meta, "namespace": ns}}
    gvk = req.get("kind")
    if not isinstance(obj.get("kind"), str) and isinstance(gvk, dict) and isinstance(gvk.get("kind"), str):
        # an object without its type (OPA's recorded review): the request's kind says it
        group, version = gvk.get("group") or "", gvk.get("version") or "v1"
        obj = {**obj, "kind": gvk["kind"], "apiVersion": f"{group}/{version}" if group else version}
    return obj


def check(
    objs: list[dict],
    table: Table | None,
    settings: Settings,
    now: dt.datetime,
    namespace: str | None = None,
    labelled: dict[str, str] | None = None,
) -> list[Checked]:
    """Each object decided as its own CREATE, as /mutate and /validate would (the objects do not see each other's
    admissions: each is asked alone, against the table)."""
    out = []
    for obj in objs:
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        ns = namespace or meta.get("namespace") or "default"
        kind = obj["kind"]
        group, _, version = str(obj.get("apiVersion") or "v1").rpartition("/")
        doc = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "kind": {"group": group or GROUPS.get(kind, ""), "version": version, "kind": kind},
                "namespace": ns,
                "name": meta.get("name") or "",
                "operation": "CREATE",
                "object": obj,
            },
        }
        try:
            review = parse(json.dumps(doc).encode())
        except ReviewError as e:  # pragma: no cover - the review is built here; parse() only re-checks it
            raise UsageError(f"{kind} {ns}/{meta.get('name')}: {e}") from None
        where = f"{kind} {ns}/{review.name or '(generated name)'}"
        none = Recent(settings.enforcer.burst_window_s)  # nothing admitted yet: decide only reads it
        validate = decide(review, table, settings, none, now, False, labelled)
        mutate = decide(review, table, settings, none, now, True, labelled)
        out.append(Checked(where, validate, mutate))
    return out


def render(c: Checked) -> list[str]:
    """Lines for a person: the answer, its message, warnings and the patch /mutate would apply."""
    r = c.validate.response["response"]
    if r["allowed"]:
        head = f"{c.where}: admitted"
    else:
        head = f"{c.where}: DENIED ({c.validate.policy}, {c.validate.mode}): {r['status']['message']}"
    info = []
    if c.validate.tenant:
        g = c.validate.gpus
        info += [f"tenant {c.validate.tenant}", f"{g:g} GPU{'' if g == 1 else 's'}"]
    if c.validate.workload_class:  # the class its per-class policies took (gpuledger/classify.py)
        info.append(f"class {c.validate.workload_class}")
    lines = [head + (f"  [{', '.join(info)}]" if info else "")]
    lines += [f"  warning: {w}" for w in r.get("warnings", [])]
    if c.validate.decision == "allow" and c.validate.reason and c.validate.mode == "dry-run":
        lines.append(f"  dry-run: {c.validate.reason}")
    m = c.mutate.response["response"]
    if "patch" in m and r["allowed"]:
        for op in json.loads(base64.b64decode(m["patch"])):
            if op["path"] != "/metadata/labels" or op["value"]:
                lines.append(f"  patch: {op['op']} {op['path']} = {op['value']}")
    lines += [f"  warning: {w}" for w in m.get("warnings", [])]
    return lines
