"""Source `k8s`: the lifecycle of GPU pods, from a resumable watch of the Kubernetes API.

The watch runs in a background thread and turns every pod state into a jobs row at once (the observation
time is the row's `updated_at`); each `collect()` hands the rows gathered since the last one to the spool.
Tenants: the config's namespace -> tenant map first, else the namespace's `gpuledger.io/tenant` label.
Workload classes: the pod's label, the config's [[classes]] rows, then the owner chain (docs/workload-classes.md).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

from gpuledger.collector.k8s.pods import BadQuantity, gpu_request, job_row
from gpuledger.collector.source import Batch
from gpuledger.config import TENANT_LABEL, Config
from gpuledger.kube_watch import Watcher, load_api
from gpuledger.store import LakeRef

log = logging.getLogger(__name__)
# ownerReference kind -> plural for the generic custom-object lookup (lowercase kind + "s" otherwise).
PLURALS = {"Deployment": "deployments", "ReplicaSet": "replicasets", "StatefulSet": "statefulsets"}


class K8sSource:
    name = "k8s"

    def __init__(
        self, cfg: Config, api_client=None, clock: Callable[[], float] = time.time, watch_timeout_s: int = 300
    ):
        from kubernetes import client

        self.cfg = cfg
        self.clock = clock
        self.api_client = api_client if api_client is not None else load_api()
        self.core = client.CoreV1Api(self.api_client)
        self.custom = client.CustomObjectsApi(self.api_client)
        self.tenants = cfg.tenant_of_namespace()
        self._ns_cache: dict[str, str | None] = {}
        self._owner_cache: dict[tuple[str, str, str], list] = {}
        self._api_versions: dict[str, str] = {}  # owner kind -> apiVersion, learnt from ownerReferences
        self._rows: list[dict] = []
        self._lock = threading.Lock()
        self.bad_pods = 0
        self.accelerators = cfg.accelerator_resources()
        self._unmapped: set[str] = set()  # pods already said to ask for an unmapped accelerator
        self.watcher = Watcher(
            self.core.list_pod_for_all_namespaces, self._on_pod, timeout_s=watch_timeout_s, keep=self._is_gpu_pod
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lookups (cached: namespaces and owners change rarely) --------------------------------------------
    def tenant_of(self, namespace: str) -> str | None:
        if namespace in self.tenants:
            return self.tenants[namespace]
        if namespace not in self._ns_cache:
            try:
                ns = self.core.read_namespace(namespace)
                self._ns_cache[namespace] = (ns.metadata.labels or {}).get(TENANT_LABEL)
            except Exception as e:  # noqa: BLE001 - no RBAC for namespaces, or gone: unattributed, not fatal
                log.debug("k8s: cannot read namespace %s: %s", namespace, e)
                self._ns_cache[namespace] = None
        return self._ns_cache[namespace]

    def owners_of(self, kind: str, namespace: str, name: str) -> list:
        key = (kind, namespace, name)
        if key not in self._owner_cache:
            self._owner_cache[key] = self._read_owners(kind, namespace, name)
        return self._owner_cache[key]

    def _read_owners(self, kind: str, namespace: str, name: str) -> list:
        from kubernetes import client

        try:
            if kind == "Job":
                obj = client.BatchV1Api(self.api_client).read_namespaced_job(name, namespace)
                return obj.metadata.owner_references or []
            if kind == "ReplicaSet":
                obj = client.AppsV1Api(self.api_client).read_namespaced_replica_set(name, namespace)
                return obj.metadata.owner_references or []
            api_version = self._api_versions.get(kind)
            if not api_version or "/" not in api_version:
                return []
            group, version = api_version.split("/", 1)
            plural = PLURALS.get(kind, kind.lower() + "s")
            obj = self.custom.get_namespaced_custom_object(group, version, namespace, plural, name)
            return [_Ref(r) for r in obj.get("metadata", {}).get("ownerReferences", [])]
        except Exception as e:  # noqa: BLE001 - RBAC or a deleted owner: stop the walk here
            log.debug("k8s: cannot read %s %s/%s: %s", kind, namespace, name, e)
            return []

    # -- the watch ----------------------------------------------------------------------------------------
    def _is_gpu_pod(self, pod) -> bool:
        try:
            return gpu_request(pod, self.accelerators) is not None
        except BadQuantity:
            return False

    def _on_pod(self, kind: str, pod) -> None:
        for ref in pod.metadata.owner_references or []:
            self._api_versions.setdefault(ref.kind, ref.api_version)
        try:
            row = job_row(
                pod,
                cluster=self.cfg.cluster,
                tenant_of=self.tenant_of,
                observed_at_s=self.clock(),
                deleted=kind in ("DELETED", "VANISHED"),
                owner_lookup=self.owners_of,
                class_rules=self.cfg.classes,
                accelerators=self.accelerators,
            )
        except BadQuantity as e:
            self.bad_pods += 1
            log.warning("k8s: skipping %s", e)
            return
        if row is not None and row["gpu_sharing"] == "unmapped" and row["job_id"] not in self._unmapped:
            # Said once a pod: its row is written with 0 GPUs, so quotas and costs do not count it until a config
            # [[accelerators]] row maps the resource.
            self._unmapped.add(row["job_id"])
            req = gpu_request(pod, self.accelerators)
            log.warning(
                "k8s: pod %s/%s asks for %s, which looks like an accelerator but no [[accelerators]] row maps it: "
                "recorded with 0 GPUs",
                row["namespace"],
                row["pod"],
                ", ".join(req.unmapped if req else ()),
            )
        if row is not None:
            with self._lock:
                self._rows.append(row)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self.watcher.run, args=(self._stop,), name="k8s-watch", daemon=True)
            self._thread.start()

    def take_rows(self) -> list[dict]:
        """The rows observed since the last call (without starting the watch thread)."""
        with self._lock:
            rows, self._rows = self._rows, []
        return rows

    def collect(self, now_s: float) -> Iterator[Batch]:
        self.start()
        rows = self.take_rows()
        if rows:
            yield Batch.from_rows("jobs", rows)

    def close(self) -> None:
        self._stop.set()
        self.watcher.stop()
        if self._thread is not None:
            self._thread.join(timeout=5)


class _Ref:
    """An ownerReference from a custom object's JSON, with the attributes of a V1OwnerReference."""

    def __init__(self, d: dict):
        self.kind, self.name = d.get("kind"), d.get("name")
        self.api_version, self.controller = d.get("apiVersion"), d.get("controller", False)


def from_config(cfg: Config, lake: LakeRef, now_s: float, urls: tuple[str, ...]) -> K8sSource:
    """Entry point `k8s` (collector/source.py SourceFactory): the cluster's pods, in-cluster or from kubeconfig."""
    return K8sSource(cfg)
