"""A resumable watch of every object of one kind in the cluster, the way controllers (informers) do it: list
(paginated), then watch from the list's resourceVersion; resume from the last seen resourceVersion after a dropped
stream; re-list on 410 Gone (the server compacted past our version). Objects that vanished between two lists
(their DELETED event was missed) are reported as VANISHED, so no job stays "running" forever.

Shared by the collector (objects) and the enforcer (namespaces, for their tenant labels); `load_api` finds the
cluster for both.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from gpuledger.errors import SourceError

log = logging.getLogger(__name__)

PAGE = 500
GONE = 410


@dataclass
class WatchStats:
    lists: int = 0
    relists_410: int = 0
    events: int = 0
    errors: int = 0
    last_error: str | None = None


def load_api():
    """An ApiClient from the in-cluster service account, else the local kubeconfig; a clear error if neither, or if
    the Kubernetes client (the optional extra) is not installed."""
    try:
        from kubernetes import client, config
    except ModuleNotFoundError as e:
        raise SourceError("the kubernetes client is not installed: pip install 'gpuledger[k8s]'") from e

    try:
        config.load_incluster_config()
    except config.ConfigException:
        try:
            config.load_kube_config()
        except Exception as e:  # kubeconfig missing or invalid: many exception types
            raise SourceError(f"k8s: no in-cluster service account and no usable kubeconfig ({e})") from e
    return client.ApiClient()


class Watcher:
    """Calls `on_event(kind, obj)` for every state seen of the objects `list_fn` lists (e.g. CoreV1Api's
    list_pod_for_all_namespaces or list_namespace); kind is LIST, ADDED, MODIFIED, DELETED or VANISHED."""

    def __init__(
        self,
        list_fn: Callable,
        on_event: Callable[[str, object], None],
        *,
        what: str = "pod",
        timeout_s: int = 300,
        keep: Callable[[object], bool] = lambda obj: True,
    ):
        self.list_fn = list_fn
        self.what = what  # for the logs
        self.on_event = on_event
        self.timeout_s = timeout_s
        self.keep = keep  # which objects to remember for VANISHED detection (e.g. GPU pods only, to bound memory)
        self.rv: str | None = None
        self.known: dict[str, object] = {}
        self.stats = WatchStats()
        self._watch = None  # the kubernetes Watch of the stream in progress

    def relist(self) -> None:
        seen: dict[str, object] = {}
        cont = None
        while True:
            page = self.list_fn(limit=PAGE, _continue=cont)
            for obj in page.items or []:
                if self.keep(obj):
                    seen[obj.metadata.uid] = obj
                self.on_event("LIST", obj)
            cont = page.metadata._continue
            if not cont:
                self.rv = page.metadata.resource_version
                break
        for uid, obj in self.known.items():
            if uid not in seen:
                self.on_event("VANISHED", obj)
        self.known = seen
        self.stats.lists += 1

    def watch_once(self) -> None:
        """One watch stream, until the server ends it or `timeout_s` passes. Re-lists first when needed."""
        from kubernetes import watch  # imported here: the kubernetes client is an optional dependency
        from kubernetes.client.exceptions import ApiException

        if self.rv is None:
            self.relist()
        self._watch = watch.Watch()
        try:
            for ev in self._watch.stream(
                self.list_fn,
                resource_version=self.rv,
                timeout_seconds=self.timeout_s,
                allow_watch_bookmarks=True,
            ):
                kind, obj = ev["type"], ev["object"]
                if kind == "BOOKMARK":
                    self.rv = self._watch.resource_version
                    continue
                self.stats.events += 1
                self.rv = obj.metadata.resource_version
                if kind == "DELETED":
                    self.known.pop(obj.metadata.uid, None)
                elif self.keep(obj):
                    self.known[obj.metadata.uid] = obj
                self.on_event(kind, obj)
        except ApiException as e:
            if e.status != GONE:
                raise
            log.info("k8s: %s watch resourceVersion %s expired (410 Gone); listing again", self.what, self.rv)
            self.stats.relists_410 += 1
            self.rv = None
        finally:
            self._watch = None

    def run(self, stop: threading.Event, backoff_s: float = 1.0, max_backoff_s: float = 60.0) -> None:
        delay = backoff_s
        while not stop.is_set():
            try:
                self.watch_once()
                delay = backoff_s
            except Exception as e:  # noqa: BLE001 - any API/network failure: count, report, back off, go on
                self.stats.errors += 1
                self.stats.last_error = f"{type(e).__name__}: {e}"
                log.warning("k8s: %s watch failed (%s); retrying in %.0f s", self.what, self.stats.last_error, delay)
                stop.wait(delay)
                delay = min(delay * 2, max_backoff_s)

    def stop(self) -> None:
        w = self._watch
        if w is not None:
            w.stop()
