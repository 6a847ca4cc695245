"""AMD Instinct, from ROCm device-metrics-exporter's /metrics page (the table and its sources:
docs/accelerators.md; the copied pages and metric list: tests/fixtures/accelerators/).

Citations `M:<line>` are pkg/amdgpu/gpuagent/gpuagent_gpu_metrics.go, `L:<line>` docs/configuration/metricslist.md
and `G:<line>` pkg/amdgpu/proto/gpu.proto, at ROCm/device-metrics-exporter afd0fe81.

Units, decided once (tests/collector/test_amd_rows.py::test_amd_units):
* "MB" of VRAM (`gpu_total_vram`, `gpu_used_vram`, the pre-1.0 `gpu_total_memory`) is 10^6 bytes. The sources
  say "MB" and nothing more (the conversion is in the closed gpuagent binary). The one figure there is, the
  pre-1.0 page's `gpu_total_memory 68702` for one GPU, fits only that reading: 68,702 x 10^6 B is 63.98 GiB, a
  64 GiB MI210; read as MiB it would be 67.1 GiB, a size no Instinct card has.
* power families are integer W (uint64, G:616-619, G:740-741); energy is uJ (M:874, G:628): J = uJ x 1e-6.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuledger.collector.vendors.table import Device, Missing, Vendor, first
from gpuledger.partitions import amd_xcds, instance_share

MB = 1_000_000  # AMD's "MB" (see above)

COLUMNS = {
    "gpu_gfx_activity": ("util_gpu_pct", 1.0, 0),  # % 0-100 (M:819, G:473)
    "gpu_usage": ("util_gpu_pct", 1.0, 1),  # pre-1.0: "percentage of time the GPU is busy"
    "gpu_umc_activity": ("util_mem_pct", 1.0, 0),  # % of the memory controller (M:824)
    "gpu_used_vram": ("mem_used_bytes", MB, 0),  # "MB" (M:934, G:535)
    "gpu_total_vram": ("mem_total_bytes", MB, 0),  # "MB" (M:929, G:344)
    "gpu_total_memory": ("mem_total_bytes", MB, 1),  # pre-1.0 "(in MB)"
    # W: MI3xx report socket power, MI2xx/Radeon the average package power (L:83-85); gpu_power_usage is the
    # third name for the same reading, taken only when neither other is there
    "gpu_package_power": ("power_w", 1.0, 0),
    "gpu_average_package_power": ("power_w", 1.0, 1),
    "gpu_power_usage": ("power_w", 1.0, 2),
    "gpu_energy_consumed": ("energy_j", 1e-6, 0),  # uJ, an accumulating gauge (M:874, G:628)
    # degrees C: MI3xx report the junction (hotspot), MI2xx the edge temperature (L:74-75)
    "gpu_junction_temperature": ("temp_c", 1.0, 0),
    "gpu_edge_temperature": ("temp_c", 1.0, 1),
    "gpu_ecc_correct_total": ("ecc_corrected_total", 1.0, 0),  # counts (M:974)
    "gpu_ecc_uncorrect_total": ("ecc_uncorrected_total", 1.0, 0),
}
# gpu_free_vram is no column: the docs call it the GPU's free VRAM (L:140), but the code computes it as total - used
# (M:2621), no reading of its own, so it stays in gpu_fields as reported and mem_total_bytes comes from the total.
NODE_METRICS = frozenset({"gpu_nodes_total"})  # "Number of GPUs in the node", hostname only (M:784)
# Labels that index a metric within one GPU (metricslist.md's per-family labels): part of the gpu_fields name
INDEX_LABELS = (
    "clock_index",
    "clock_type",
    "hbm_index",
    "vcn_index",
    "jpeg_index",
    "link_index",
    "xcc_index",
    "afid_index",
    "severity",
    "process_id",
)
# The exporter's own pod, which Prometheus puts on series of GPUs no pod holds (honor_labels with an empty pod):
# the GPU Operator names its DaemonSet <DeviceConfig>-metrics-exporter (the Kaiwo capture's
# `default-metrics-exporter-vvvkm`)
EXPORTER_POD = "metrics-exporter"


def _share(compute: str, model: str | None) -> float | None:
    """A partition's share of its GPU by gpuledger.partitions (DPX 1/2, TPX 1/3, QPX 1/4, CPX one XCD: 1/8 of an
    MI300X, 1/6 of an MI300A), except that a CPX partition of a model whose XCDs are not listed claims none: a
    guessed share would be written into the lake as if measured."""
    if compute == "cpx" and amd_xcds(model) is None:
        return None
    return instance_share(compute, model)


def device(labels: Mapping[str, str], via_prometheus: bool) -> Device | Missing:
    # The board serial names the GPU: it is a default label in the code (M:41-56; the docs' examples show fewer
    # labels, L:401-443: the code is what runs) and a partition carries its parent's
    # (M:2092-2099). gpu_uuid is optional and off by default, so a GPU keeps one name whether it is on or not.
    # Pre-1.0 exporters wrote SERIAL_NUMBER / GPU_UUID.
    serial = first(labels, "serial_number", "SERIAL_NUMBER") or first(labels, "gpu_uuid", "GPU_UUID")
    gpu = labels.get("gpu_id")
    if not serial:
        return Missing(f'gpu_id="{gpu}"' if gpu else "the series", "no serial_number or gpu_uuid label")
    model = first(labels, "card_series", "card_model")  # card_series is the product name; card_model a part number
    compute = (labels.get("gpu_compute_partition_type") or "").lower()
    part = labels.get("gpu_partition_id")
    parent = share = profile = None
    uuid = serial
    # A GPU in DPX/TPX/QPX/CPX mode is one "GPU" per partition, each its own gpu_id, all with the parent's serial
    # (M:1834-1839); SPX is the whole GPU, and "NA" means the driver reports no partition (M:2102-2109).
    if compute and compute != "spx" and part and part != "NA":
        parent, uuid = serial, f"{serial}/p{part}"
        share = _share(compute, model)
        memory = labels.get("gpu_memory_partition_type")
        profile = f"{compute}.{memory}" if memory else compute
    pod, namespace, container = _pod(labels, via_prometheus)
    return Device(
        gpu_uuid=uuid,
        parent_gpu_uuid=parent,
        partition_share=share,
        mig_profile=profile,
        gpu_index=int(gpu) if gpu and gpu.isdigit() else None,
        model=model,
        pci_bus_id=None,  # not a label of this exporter
        driver_version=labels.get("driver_version") or None,
        pod=pod,
        namespace=namespace,
        container=container,
    )


def _pod(labels: Mapping[str, str], via_prometheus: bool) -> tuple[str | None, str | None, str | None]:
    """The exporter fills pod/namespace/container from the kubelet's PodResources, "" when no pod holds the GPU
    (M:2060-2071). Through Prometheus without honor_labels they become exported_*; with it, an unheld GPU's
    series may carry the scrape target's own pod (and no namespace: the Kaiwo capture), which is not a holder."""
    if via_prometheus:
        pod = labels.get("exported_pod")
        if pod:
            return pod, labels.get("exported_namespace"), labels.get("exported_container")
        pod = labels.get("pod")
        job = labels.get("job") or "\0"
        if not pod or not labels.get("namespace") or EXPORTER_POD in pod or pod.startswith(job):
            return None, None, None
    else:
        pod = labels.get("pod")
        if not pod:
            return None, None, None
    return pod, labels.get("namespace") or None, labels.get("container") or None


AMD = Vendor(
    source="amd",
    vendor="amd",
    columns=COLUMNS,
    node_metrics=NODE_METRICS,
    index_labels=INDEX_LABELS,
    name_prefixes=("gpu_", "pcie_"),
    strip_prefix="amd_",  # CommonConfig.MetricsFieldPrefix; the shipped examples use "amd_"
    device=device,
)
