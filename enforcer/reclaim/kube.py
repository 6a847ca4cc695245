"""The Kubernetes API calls of `gpuledger reclaim`, each answering (the calls made, the result): "ok", or the
error the API server gave (403 Forbidden, 404 gone, 409 Conflict, ...), never an exception, so one refused call is a
recorded row and the next job's call still happens.

Patches are JSON merge patches (RFC 7386), which every kind takes, custom resources included (a Kueue Workload does
not take the strategic merge patch the kubernetes client sends by default). Answers are read as plain JSON, not the
client's models: a model refuses an object that lacks a field its schema requires, which is no reason to fail an
action the API server has already taken.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import secrets

from gpuledger.enforcer.reclaim.plan import Step

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
EXEMPT_LABEL = "gpuledger.io/reclaim"  # "never": never reclaimed
DEADLINE_ANNOTATION = "gpuledger.io/reclaim-deadline"
REASON_ANNOTATION = "gpuledger.io/reclaim-reason"
KUEUE = ("kueue.x-k8s.io", "v1beta1", "workloads")
COMPONENT = "gpuledger-reclaim"


class Exempt(Exception):
    """The pod carries gpuledger.io/reclaim: never."""


def _rfc3339(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def error_text(e: Exception) -> str:
    """One line for a failed call: the HTTP status and reason ("404 gone" for a 404), else the exception."""
    status = getattr(e, "status", None)
    if isinstance(status, int) and status:
        reason = getattr(e, "reason", "") or ""
        return f"{status} gone" if status == 404 else f"{status} {reason}".strip()
    return f"error: {type(e).__name__}: {e}"


class Kube:
    """The calls, on one ApiClient (gpuledger.kube_watch.load_api: in-cluster, else kubeconfig)."""

    def __init__(self, api_client):
        from kubernetes import client

        self.core = client.CoreV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    def _pod(self, step: Step):
        """The job's pod, checked: the same pod (not a new one of the same name) and not exempt by label."""
        from kubernetes.client.exceptions import ApiException

        answer = self.core.read_namespaced_pod(step.job.pod, step.job.namespace, _preload_content=False)
        meta = json.loads(answer.data).get("metadata", {})
        if meta.get("uid") != step.job.job_id:
            # the pod we measured is gone; one of the same name is another job (a notebook's controller made it)
            raise ApiException(status=404, reason="NotFound")
        if (meta.get("labels") or {}).get(EXEMPT_LABEL) == "never":
            raise Exempt
        return meta

    def warn(self, step: Step) -> tuple[list[str], str]:
        """An Event on the pod and the deadline in its annotations."""
        j = step.job
        calls = [f"GET /api/v1/namespaces/{j.namespace}/pods/{j.pod}"]
        try:
            self._pod(step)
            now = dt.datetime.now(dt.timezone.utc)
            message = (
                f"gpuledger reclaim: this pod's GPUs have been idle since {_rfc3339(j.idle_since)}; unless they are "
                f"used, they are reclaimed after {_rfc3339(step.deadline)}. Label the pod {EXEMPT_LABEL}=never to "
                "exempt it."
            )
            event = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{j.pod}.{secrets.token_hex(8)}", "namespace": j.namespace},
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": j.pod,
                    "namespace": j.namespace,
                    "uid": j.job_id,
                },
                "reason": "IdleGPUReclaimWarning",
                "message": message,
                "type": "Warning",
                "source": {"component": COMPONENT},
                "reportingComponent": COMPONENT,
                "reportingInstance": COMPONENT,
                "firstTimestamp": _rfc3339(now),
                "lastTimestamp": _rfc3339(now),
                "count": 1,
            }
            calls.append(f"POST /api/v1/namespaces/{j.namespace}/events")
            self.core.create_namespaced_event(j.namespace, event, _preload_content=False)
            patch = {"metadata": {"annotations": {DEADLINE_ANNOTATION: _rfc3339(step.deadline)}}}
            calls.append(f"PATCH /api/v1/namespaces/{j.namespace}/pods/{j.pod}")
            self.core.patch_namespaced_pod(j.pod, j.namespace, patch, _content_type=MERGE_PATCH, _preload_content=False)
        except Exempt:
            return calls, "exempt"
        except Exception as e:  # noqa: BLE001 - any refusal or network failure is a recorded row, tried again later
            return calls, error_text(e)
        return calls, "ok"

    def act(self, step: Step) -> tuple[list[str], str, tuple[str | None, str | None]]:
        """The step's freeing action; also returns the object acted on when not the pod (kind, name)."""
        j = step.job
        calls = [f"GET /api/v1/namespaces/{j.namespace}/pods/{j.pod}"]
        target: tuple[str | None, str | None] = (None, None)
        try:
            self._pod(step)
            if step.action == "delete":
                calls.append(f"DELETE /api/v1/namespaces/{j.namespace}/pods/{j.pod}")
                self.core.delete_namespaced_pod(j.pod, j.namespace, _preload_content=False)
            elif step.action == "suspend":
                target = ("Job", j.owner_name)
                calls.append(f"PATCH /apis/batch/v1/namespaces/{j.namespace}/jobs/{j.owner_name}")
                self.batch.patch_namespaced_job(
                    j.owner_name,
                    j.namespace,
                    {"spec": {"suspend": True}},
                    _content_type=MERGE_PATCH,
                    _preload_content=False,
                )
            elif step.action == "deactivate":
                group, version, plural = KUEUE
                base = f"/apis/{group}/{version}/namespaces/{j.namespace}/{plural}"
                calls.append(f"GET {base}")
                answer = self.custom.list_namespaced_custom_object(
                    group, version, j.namespace, plural, _preload_content=False
                )
                listed = json.loads(answer.data)
                name = workload_of(listed.get("items", []), j.owner_kind, j.owner_name)
                if name is None:
                    return calls, f"404 gone: no Kueue Workload owned by {j.owner_kind} {j.owner_name}", target
                target = ("Workload", name)
                calls.append(f"PATCH {base}/{name}")
                self.custom.patch_namespaced_custom_object(
                    group,
                    version,
                    j.namespace,
                    plural,
                    name,
                    {"spec": {"active": False}},
                    _content_type=MERGE_PATCH,
                    _preload_content=False,
                )
            else:
                raise ValueError(f"not an action: {step.action}")
        except Exempt:
            return calls, "exempt", target
        except ValueError:
            raise
        except Exception as e:  # noqa: BLE001 - as in warn
            return calls, error_text(e), target
        return calls, "ok", target


def workload_of(items: list[dict], owner_kind: str | None, owner_name: str | None) -> str | None:
    """The name of the Kueue Workload an object owns (Kueue makes one per Job, JobSet, RayJob, ...; its
    ownerReferences name that object)."""
    for w in items:
        for ref in w.get("metadata", {}).get("ownerReferences", []):
            if ref.get("kind") == owner_kind and ref.get("name") == owner_name:
                return w["metadata"]["name"]
    return None
