"""A Kubernetes API server stand-in that replays recorded pod states over real HTTP, so the real kubernetes
client (its REST layer, watch framing and deserialization) runs unchanged in tests.

It serves what the pod watcher and the source use: paginated `GET /api/v1/pods`, `?watch=true` streams from a
resourceVersion (one ERROR 410 event when that version was compacted away), `GET /api/v1/namespaces/<ns>`
and `GET /apis/batch/v1/namespaces/<ns>/jobs/<name>`. Tests add events as they go.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


class RecordedApiServer:
    def __init__(self):
        self.rv = 100
        self.events: list[tuple[int, str, dict]] = []  # (resourceVersion, type, pod)
        self.pods: dict[str, dict] = {}  # uid -> latest pod (the list view)
        self.compacted_below = 0  # watches from an older resourceVersion get 410 Gone
        self.namespaces: dict[str, dict] = {}
        self.jobs: dict[tuple[str, str], dict] = {}
        self.requests: list[str] = []
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

    def api_client(self):
        from kubernetes import client

        conf = client.Configuration()
        conf.host = self.url
        return client.ApiClient(conf)

    def emit(self, kind: str, pod: dict) -> int:
        with self._lock:
            self.rv += 1
            pod = copy.deepcopy(pod)
            pod.setdefault("apiVersion", "v1")
            pod.setdefault("kind", "Pod")
            pod["metadata"]["resourceVersion"] = str(self.rv)
            self.events.append((self.rv, kind, pod))
            if kind == "DELETED":
                self.pods.pop(pod["metadata"]["uid"], None)
            else:
                self.pods[pod["metadata"]["uid"]] = pod
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
                if u.path == "/api/v1/pods" and q.get("watch") == "true":
                    return self._watch(q)
                if u.path == "/api/v1/pods":
                    return self._list(q)
                if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 4:
                    ns = server.namespaces.get(parts[3])
                    if ns is None:
                        return self._json(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                    return self._json(200, ns)
                if parts[:4] == ["apis", "batch", "v1", "namespaces"] and len(parts) == 7:
                    job = server.jobs.get((parts[4], parts[6]))
                    if job is None:
                        return self._json(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                    return self._json(200, job)
                return self._json(404, {"kind": "Status", "code": 404, "reason": "NotFound"})

            def _list(self, q):
                with server._lock:
                    items = sorted(server.pods.values(), key=lambda p: p["metadata"]["uid"])
                    rv = server.rv
                limit = int(q.get("limit", 0) or 0) or len(items) or 1
                start = int(q.get("continue", 0) or 0)
                page = items[start : start + limit]
                cont = str(start + limit) if start + limit < len(items) else None
                meta = {"resourceVersion": str(rv)}
                if cont:
                    meta["continue"] = cont
                self._json(200, {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": page})

            def _watch(self, q):
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
                            new = [(rv, k, p) for rv, k, p in server.events if rv > sent]
                        for rv, kind, pod in new:
                            send({"type": kind, "object": pod})
                            sent = rv
                        time.sleep(0.02)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        return Handler
