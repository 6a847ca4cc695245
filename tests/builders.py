"""Builders for Kubernetes objects in tests: real fixture objects, deserialized by the real kubernetes client.

`pod("name")` loads tests/fixtures/k8s/<name>.yaml and turns it into a V1Pod through ApiClient.deserialize,
the same code path a watch event takes. `derived(...)` edits a copy of a real pod's dict first; each helper
says what it changes, so a derived object is never mistaken for a captured one.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path

import yaml
from kubernetes.watch import Watch

K8S = Path(__file__).parent / "fixtures" / "k8s"


def _jsonable(o):
    if isinstance(o, dt.datetime):
        return (o if o.tzinfo else o.replace(tzinfo=dt.timezone.utc)).isoformat().replace("+00:00", "Z")
    raise TypeError(type(o))


def raw(name: str) -> dict:
    """The fixture as a plain dict, JSON-clean (unquoted YAML timestamps become RFC 3339 strings)."""
    return json.loads(json.dumps(yaml.safe_load((K8S / f"{name}.yaml").read_text()), default=_jsonable))


def deserialize(obj: dict, kind: str = "V1Pod"):
    """Exactly what the client does with a watch event line (kubernetes.watch.Watch.unmarshal_event)."""
    return Watch().unmarshal_event(json.dumps({"type": "ADDED", "object": obj}), kind)["object"]


def pod(name: str):
    return deserialize(raw(name))


RESERVATION = "pod_runai_reservation_nvidia-gpu-1_running"


def derived_pending_unschedulable() -> dict:
    """Derived: the reservation pod before binding: Pending, PodScheduled=False/Unschedulable, no node."""
    d = copy.deepcopy(raw(RESERVATION))
    d["metadata"]["name"] = "trainer-pending"
    d["metadata"]["uid"] = "11111111-0000-4000-8000-000000000001"
    d["spec"].pop("nodeName", None)
    d["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "lastTransitionTime": "2024-03-31T09:03:25Z",
                "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
            }
        ],
    }
    return d


def derived_terminated(reason: str, exit_code: int, phase: str = "Failed", pod_reason: str | None = None) -> dict:
    """Derived: the reservation pod after its container ended with `reason` (OOMKilled, Completed, ...)."""
    d = copy.deepcopy(raw(RESERVATION))
    d["status"]["phase"] = phase
    if pod_reason:
        d["status"]["reason"] = pod_reason
    cs = d["status"]["containerStatuses"][0]
    started = cs["state"]["running"]["startedAt"]
    cs["state"] = {
        "terminated": {
            "exitCode": exit_code,
            "reason": reason,
            "startedAt": started,
            "finishedAt": "2024-03-31T10:03:27Z",
        }
    }
    return d


def derived_with_limits(limits: dict, annotations: dict | None = None) -> dict:
    """Derived: the reservation pod with other GPU limits (MIG or time-sliced) instead of nvidia.com/gpu."""
    d = copy.deepcopy(raw(RESERVATION))
    c = d["spec"]["containers"][0]
    c["resources"] = {"limits": dict(limits), "requests": dict(limits)}
    d["metadata"]["annotations"] = annotations or {}
    return d
