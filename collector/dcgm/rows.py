"""Parsed dcgm-exporter samples -> lake rows: gpu_samples (one per GPU or MIG instance), gpu_fields (every
other field), health_events (Xid). A MIG instance's util_gpu_pct is its DCGM_FI_PROF_GR_ENGINE_ACTIVE x 100
(DCGM reports no GPU_UTIL per instance); the field is also kept in gpu_fields as it is.

Label variants seen in real captures and the Prometheus API (tests/fixtures/dcgm): `Hostname`/`hostname`,
`UUID`/`uuid`, `pod`/`pod_name`/`exported_pod`, `namespace`/`pod_namespace`/`exported_namespace`,
`container`/`container_name`/`exported_container`, `GPU_I_ID`/`GPU_I_PROFILE` for MIG, `err_code`/`err_msg`
on Xid. A GPU with no pod labels (or empty ones) is unallocated.

Through Prometheus, a series also carries the scrape target's own labels: without `honor_labels`, the
exporter pod's `pod`/`namespace`/`container` sit where the workload's would, and the workload's become
`exported_*` (tests/fixtures/dcgm/h100x8-eks-prometheus-api-query-gpu-util.json shows the exporter pod
`nvidia-dcgm-exporter-9v4gs` on unallocated GPUs). So via Prometheus, `exported_*` wins, and a plain `pod`
counts only when it is not the exporter itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpuledger.collector.dcgm.fields import (
    COLUMNS,
    FB_FREE,
    GR_ENGINE_ACTIVE,
    LABEL_FIELDS,
    MIB,
    XID,
    XID_COUNT,
    is_blank,
)
from gpuledger.mig import mig_share

EXPORTER_CONTAINERS = {"nvidia-dcgm-exporter", "dcgm-exporter"}
INT_COLUMNS = {
    "mem_used_bytes",
    "mem_reserved_bytes",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "throttle_reasons",
    "ecc_corrected_total",
    "ecc_uncorrected_total",
}


def _first(labels: Mapping[str, str], *names: str) -> str | None:
    for n in names:
        v = labels.get(n)
        if v:
            return v
    return None


@dataclass(frozen=True)
class GpuKey:
    gpu_uuid: str
    node: str | None
    gpu_index: int | None
    parent_gpu_uuid: str | None
    mig_profile: str | None
    model: str | None
    pci_bus_id: str | None
    driver_version: str | None
    pod: str | None
    namespace: str | None
    container: str | None


def gpu_key(labels: Mapping[str, str], default_node: str | None, via_prometheus: bool) -> GpuKey:
    node = _first(labels, "Hostname", "hostname") or default_node
    gpu = labels.get("gpu")
    uuid = _first(labels, "UUID", "uuid") or f"{node}/gpu{gpu}"
    gi = labels.get("GPU_I_ID")
    if via_prometheus:
        pod = _first(labels, "exported_pod", "pod_name")
        namespace = _first(labels, "exported_namespace", "pod_namespace")
        container = _first(labels, "exported_container", "container_name")
        plain = labels.get("pod")
        own = labels.get("container") in EXPORTER_CONTAINERS or (plain and plain.startswith(labels.get("job") or "\0"))
        if pod is None and plain and not own:
            pod, namespace, container = plain, labels.get("namespace"), labels.get("container")
    else:
        pod = _first(labels, "pod", "pod_name", "exported_pod")
        namespace = _first(labels, "namespace", "pod_namespace", "exported_namespace")
        container = _first(labels, "container", "container_name", "exported_container")
    if not pod:
        pod = namespace = container = None
    return GpuKey(
        gpu_uuid=f"{uuid}/gi{gi}" if gi else uuid,  # DCGM labels give no MIG UUID: parent + GPU instance id
        node=node,
        gpu_index=int(gpu) if gpu and gpu.isdigit() else None,
        parent_gpu_uuid=uuid if gi else None,
        mig_profile=labels.get("GPU_I_PROFILE") if gi else None,
        model=labels.get("modelName"),
        pci_bus_id=labels.get("pci_bus_id"),
        driver_version=labels.get("DCGM_FI_DRIVER_VERSION"),
        pod=pod,
        namespace=namespace,
        container=container,
    )


@dataclass
class PageRows:
    samples: list[dict] = field(default_factory=list)
    fields: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)


class RowBuilder:
    """Keeps what must survive between scrapes (the last Xid per GPU) and turns one page into rows."""

    def __init__(self, cluster: str, source: str = "dcgm", via_prometheus: bool = False):
        self.cluster = cluster
        self.source = source
        self.via_prometheus = via_prometheus
        self.last_xid: dict[str, float] = {}
        self.xid_counts: dict[tuple[str, str], float] = {}

    def rows(self, samples: Iterable, ts_us: int, default_node: str | None = None) -> PageRows:
        out = PageRows()
        by_gpu: dict[str, dict] = {}
        keys: dict[int, GpuKey] = {}  # the fast parser shares one labels dict per label set: key by identity
        for name, labels, value, *_ in samples:
            if name.endswith("_total"):
                # prometheus_client names a counter's sample <name>_total (OpenMetrics style); DCGM field names
                # are upper case, so a lower-case suffix is never part of one.
                name = name[:-6]
            if name in LABEL_FIELDS:
                continue
            k = keys.get(id(labels))
            if k is None:
                k = keys[id(labels)] = gpu_key(labels, default_node, self.via_prometheus)
            row = by_gpu.get(k.gpu_uuid)
            if row is None:
                row = by_gpu[k.gpu_uuid] = self._new_row(k, ts_us)
            elif row["pod"] is None and k.pod is not None:
                row.update(pod=k.pod, namespace=k.namespace, container=k.container)
            v = None if is_blank(name, value) else value
            col = COLUMNS.get(name)
            if col is not None:
                if v is not None:
                    c, factor = col
                    row[c] = int(round(v * factor)) if c in INT_COLUMNS else v * factor
            elif name == FB_FREE:
                row["_free"] = v
            elif name == GR_ENGINE_ACTIVE and k.parent_gpu_uuid is not None:
                row["_gr_active"] = v
                out.fields.append(self._field(k, ts_us, name, v))
            elif name == XID:
                self._xid(out, k, ts_us, v, labels)
            elif name == XID_COUNT:
                self._xid_count(out, k, ts_us, v, labels)
            else:
                out.fields.append(self._field(k, ts_us, name, v))
        out.samples += self.finish(by_gpu)
        return out

    def finish(self, by_gpu: dict[str, dict]) -> list[dict]:
        """The page's gpu_samples rows, one per GPU uuid in `by_gpu`, with the derived columns filled in."""
        for row in by_gpu.values():
            gr = row.pop("_gr_active", None)
            if row["parent_gpu_uuid"] is not None and row.get("util_gpu_pct") is None and gr is not None:
                # DCGM has no GPU_UTIL for a MIG instance (NVML cannot measure one); its activity is the share of
                # time its graphics engine was busy, the same "a kernel ran" notion on the instance's slices.
                row["util_gpu_pct"] = gr * 100.0
            free = row.pop("_free", None)
            if free is not None and row.get("mem_used_bytes") is not None:
                row["mem_total_bytes"] = (
                    int(round(free * MIB)) + row["mem_used_bytes"] + (row.get("mem_reserved_bytes") or 0)
                )
        return list(by_gpu.values())

    def _new_row(self, k: GpuKey, ts_us: int) -> dict:
        return {
            "ts": ts_us,
            "cluster": self.cluster,
            "node": k.node,
            "gpu_uuid": k.gpu_uuid,
            "gpu_index": k.gpu_index,
            "parent_gpu_uuid": k.parent_gpu_uuid,
            # A MIG instance's share of its GPU, by its profile's compute slices (gpuledger/mig.py)
            "partition_share": mig_share(k.mig_profile) if k.parent_gpu_uuid and k.mig_profile else None,
            "mig_profile": k.mig_profile,
            "model": k.model,
            "pci_bus_id": k.pci_bus_id,
            "driver_version": k.driver_version,
            "vendor": "nvidia",
            "source": self.source,
            "pod": k.pod,
            "namespace": k.namespace,
            "container": k.container,
        }

    def _field(self, k: GpuKey, ts_us: int, name: str, v: float | None) -> dict:
        return {
            "ts": ts_us,
            "cluster": self.cluster,
            "node": k.node,
            "gpu_uuid": k.gpu_uuid,
            "field": name,
            "value": v,
            "source": self.source,
        }

    def _event(self, k: GpuKey, ts_us: int, code: int, detail: str) -> dict:
        return {
            "ts": ts_us,
            "cluster": self.cluster,
            "node": k.node,
            "gpu_uuid": k.gpu_uuid,
            "kind": "xid",
            "code": code,
            "detail": detail,
            "source": self.source,
        }

    def _xid(self, out: PageRows, k: GpuKey, ts_us: int, v: float | None, labels: Mapping[str, str]) -> None:
        # The field holds the *last* Xid, forever: report it once when it appears or changes.
        if v is None or v == 0 or self.last_xid.get(k.gpu_uuid) == v:
            self.last_xid[k.gpu_uuid] = v or 0
            return
        self.last_xid[k.gpu_uuid] = v
        msg = labels.get("err_msg")
        out.events.append(self._event(k, ts_us, int(v), f"Xid {int(v)}" + (f": {msg}" if msg else "")))

    def _xid_count(self, out: PageRows, k: GpuKey, ts_us: int, v: float | None, labels: Mapping[str, str]) -> None:
        code = labels.get("xid") or labels.get("err_code")
        if v is None or not code:
            return
        before = self.xid_counts.get((k.gpu_uuid, code), 0.0)
        self.xid_counts[(k.gpu_uuid, code)] = v
        if v > before:
            n = int(v - before)
            out.events.append(
                self._event(
                    k, ts_us, int(code) if code.isdigit() else None, f"{n} Xid {code} error(s) in the exporter's window"
                )
            )
