"""Tenants from namespace labels: a namespace no `[[tenants]] namespaces` entry names belongs to the tenant its
label (`[enforcer] tenant_label`, by default gpuledger.io/tenant) says, as the collector attributes it.

The AdmissionReview does not carry the namespace's labels, and a lookup per request would put the API server on
the webhook's hot path (and make each admission call back into the API server it is serving). So the labels are
kept in memory by a resumable list + watch of Namespaces, as controllers' informers do; a request reads a dict.
"""

from __future__ import annotations

import logging
import threading

from gpuledger.kube_watch import Watcher

log = logging.getLogger(__name__)


class NamespaceTenants:
    """namespace -> tenant for every namespace carrying the label; `get` is what decide() reads."""

    def __init__(self, api_client, label: str, timeout_s: int = 300):
        from kubernetes import client

        self.label = label
        self._tenants: dict[str, str] = {}
        self.watcher = Watcher(
            client.CoreV1Api(api_client).list_namespace, self._on_namespace, what="namespace", timeout_s=timeout_s
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def get(self, namespace: str, default: str | None = None) -> str | None:
        return self._tenants.get(namespace, default)

    def __len__(self) -> int:
        return len(self._tenants)

    def _on_namespace(self, kind: str, ns) -> None:
        name = ns.metadata.name
        tenant = (ns.metadata.labels or {}).get(self.label)
        # One assignment or pop per event: a request on another thread sees the old value or the new one.
        if kind in ("DELETED", "VANISHED") or not tenant:
            self._tenants.pop(name, None)
        else:
            self._tenants[name] = tenant

    def start(self) -> None:
        self._thread = threading.Thread(target=self.watcher.run, args=(self._stop,), daemon=True, name="namespaces")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.watcher.stop()
