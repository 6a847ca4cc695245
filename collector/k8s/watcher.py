"""A resumable watch of every Pod in the cluster, the way controllers do it: list (paginated), then watch from
the list's resourceVersion; resume from the last seen resourceVersion after a dropped stream; re-list on
410 Gone (the server compacted past our version). Pods that vanished between two lists (their DELETED event
was missed) are reported as deleted, so no job stays "running" forever.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from kubernetes import watch
from kubernetes.client.exceptions import ApiException

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


class PodWatcher:
    """Calls `on_pod(kind, pod)` for every pod state seen; kind is LIST, ADDED, MODIFIED, DELETED or VANISHED."""

    def __init__(
        self,
        core_api,
        on_pod: Callable[[str, object], None],
        *,
        timeout_s: int = 300,
        keep: Callable[[object], bool] = lambda pod: True,
    ):
        self.api = core_api
        self.on_pod = on_pod
        self.timeout_s = timeout_s
        self.keep = keep  # which pods to remember for VANISHED detection (GPU pods only, to bound memory)
        self.rv: str | None = None
        self.known: dict[str, object] = {}
        self.stats = WatchStats()
        self._watch: watch.Watch | None = None

    def relist(self) -> None:
        seen: dict[str, object] = {}
        cont = None
        while True:
            page = self.api.list_pod_for_all_namespaces(limit=PAGE, _continue=cont)
            for pod in page.items or []:
                if self.keep(pod):
                    seen[pod.metadata.uid] = pod
                self.on_pod("LIST", pod)
            cont = page.metadata._continue
            if not cont:
                self.rv = page.metadata.resource_version
                break
        for uid, pod in self.known.items():
            if uid not in seen:
                self.on_pod("VANISHED", pod)
        self.known = seen
        self.stats.lists += 1

    def watch_once(self) -> None:
        """One watch stream, until the server ends it or `timeout_s` passes. Re-lists first when needed."""
        if self.rv is None:
            self.relist()
        self._watch = watch.Watch()
        try:
            for ev in self._watch.stream(
                self.api.list_pod_for_all_namespaces,
                resource_version=self.rv,
                timeout_seconds=self.timeout_s,
                allow_watch_bookmarks=True,
            ):
                kind, pod = ev["type"], ev["object"]
                if kind == "BOOKMARK":
                    self.rv = self._watch.resource_version
                    continue
                self.stats.events += 1
                self.rv = pod.metadata.resource_version
                if kind == "DELETED":
                    self.known.pop(pod.metadata.uid, None)
                elif self.keep(pod):
                    self.known[pod.metadata.uid] = pod
                self.on_pod(kind, pod)
        except ApiException as e:
            if e.status != GONE:
                raise
            log.info("k8s: watch resourceVersion %s expired (410 Gone); listing again", self.rv)
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
                log.warning("k8s: pod watch failed (%s); retrying in %.0f s", self.stats.last_error, delay)
                stop.wait(delay)
                delay = min(delay * 2, max_backoff_s)

    def stop(self) -> None:
        w = self._watch
        if w is not None:
            w.stop()
