"""Huawei Ascend, from the npu-exporter's /metrics page (Ascend/mind-cluster component/npu-exporter; the older
standalone Ascend/ascend-npu-exporter v5 writes the same names with fewer labels). The table and its sources:
docs/accelerators.md; the copied pages and metric list: tests/fixtures/accelerators/.

Citations: `D:<line>` docs/en/scheduling/api/npu_exporter/01_prometheus_metrics_api.md, `T` ascend-common
devmanager/common/types.go, `V` collector/metrics/collector_for_vnpu.go, `CU` collector/metrics/common_utils.go,
`K` ascend-common devmanager/common/constants.go, `CC` collector/common/constants.go (mind-cluster 22bb3d98).

Units, decided once (tests/collector/test_ascend_rows.py::test_ascend_units):
* chip memory "MB" (HbmInfo.MemorySize "total size,MB", T:49-51; DDR the same) is 2^20 bytes: the driver's
  figures are binary (npu-smi shows a 32 GB 910A's HBM as 32768 MB, a 64 GB 910B's as 65536 MB);
* vNPU memory is "KB" (V:60-63): 2^10 bytes, the same binary unit;
* power is W (float32, D:272): board power on Atlas inference cards (310P), chip power on the others (N:254-265).
No energy metric exists in this exporter, so energy_j stays null.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuledger.collector.vendors.table import Device, Missing, Vendor, first
from gpuledger.partitions import ascend_cores

MIB = 1 << 20
KIB = 1 << 10

COLUMNS = {
    "npu_chip_info_utilization": ("util_gpu_pct", 1.0, 0),  # AICore % (U:48, D:385)
    "vnpu_pod_aicore_utilization": ("util_gpu_pct", 1.0, 0),  # a vNPU's AICore % (V:58, D:410)
    # HBM where the chip has it (910 series), else the DDR the 310-series computes in (R:32-33)
    "npu_chip_info_hbm_used_memory": ("mem_used_bytes", MIB, 0),
    "npu_chip_info_hbm_total_memory": ("mem_total_bytes", MIB, 0),
    "npu_chip_info_used_memory": ("mem_used_bytes", MIB, 1),
    "npu_chip_info_total_memory": ("mem_total_bytes", MIB, 1),
    "vnpu_pod_used_memory": ("mem_used_bytes", KIB, 0),  # KB (V:62)
    "vnpu_pod_total_memory": ("mem_total_bytes", KIB, 0),  # KB (V:60)
    "npu_chip_info_power": ("power_w", 1.0, 0),  # W
    "npu_chip_info_temperature": ("temp_c", 1.0, 0),  # degrees C (D:222)
    "npu_chip_info_aicore_current_freq": ("sm_clock_mhz", 1.0, 0),  # MHz, the AI cores' clock (D:285)
}
NODE_METRICS = frozenset(
    {
        "machine_npu_nums",
        "machine_card_nums",
        "machine_healthy_npu_nums",
        "machine_unhealthy_npu_nums",
        "machine_unknown_npu_nums",
        "npu_exporter_version_info",
    }
)
# Labels that tell one chip's series of one metric apart (per-family labels, ascend-npu-exporter-metrics.md)
INDEX_LABELS = ("process_id", "container_id", "serial_number", "product_type")
# Several pods on one chip: the exporter writes this in place of a pod (CC:162-163, since 2026-08-19). No one
# pod holds the chip, so no pod is recorded
MULTI_POD = "not_displayed_for_multi_pod"
# A vNPU's share is its AI cores over its chip's (gpuledger.partitions.ascend_cores, by the chip in model_name,
# e.g. "310P3-Ascend-V1": chip name + type + version, D:2011): 8 on a 310P (the one chip with vNPU metrics in the
# exporter, V:38-41; templates vir01, vir02, vir04), 20 on a 910B3, 32 on a 910.
# A failed read is written as -1 (FailedValue -> FailedMetricValue, K:173-176, CU:88-91): no reading, not -1 W
FAILED = -1.0


def device(labels: Mapping[str, str], via_prometheus: bool) -> Device | Missing:
    chip = labels.get("id") or labels.get("npuID")  # npu_container_info names the chip npuID (N:116-120)
    # The docs list model_name among every chip metric's labels (D:2011-2047); the code writes npu_chip_info_name's
    # model as `name` (N:121-124, and so does the golden page). The code is what runs: both are read.
    model = first(labels, "model_name", "name")
    pod, namespace, container = _pod(labels, via_prometheus)
    index = int(chip) if chip and chip.isdigit() else None
    vdev = labels.get("v_dev_id")
    if vdev:
        # A vNPU's series name its vNPU id and the physical chip's `id`, not the chip's vdie_id (V:44-63): the
        # builder finds the chip of that id on the same node
        if index is None:
            return Missing(f'v_dev_id="{vdev}"', "no id label naming its chip")
        cores = labels.get("aicore_count")
        whole = ascend_cores(model)
        try:
            share = float(cores) / whole if cores and whole else None
        except ValueError:
            share = None
        return Device(
            gpu_uuid=f"vnpu{vdev}",
            parent_gpu_uuid=None,
            partition_share=share,
            mig_profile=f"vnpu-{cores}c" if cores else "vnpu",
            gpu_index=index,
            model=model,
            pci_bus_id=None,
            driver_version=None,
            pod=pod,
            namespace=namespace,
            container=container,
            parent_index=index,
        )
    # vdie_id is "the UUID of the NPU" (D:2011-2047); the golden pages built from mock data leave it ""
    uuid = labels.get("vdie_id")
    if not uuid:
        return Missing(f'id="{chip}"' if chip else "the series", "no vdie_id label (the NPU's UUID)")
    return Device(
        gpu_uuid=uuid,
        parent_gpu_uuid=None,
        partition_share=None,
        mig_profile=None,
        gpu_index=index,
        model=model,
        pci_bus_id=labels.get("pcie_bus_info") or None,
        driver_version=None,
        pod=pod,
        namespace=namespace,
        container=container,
    )


def _pod(labels: Mapping[str, str], via_prometheus: bool) -> tuple[str | None, str | None, str | None]:
    """`namespace`, `pod_name`, `container_name` on every chip series, "" when no pod holds it (CU:105-143). The
    names differ from a scrape target's (pod, container), so they pass through Prometheus as they are, but for
    `namespace`: it collides, and becomes exported_namespace unless the job honours labels."""
    pod = labels.get("pod_name")
    if not pod or pod == MULTI_POD:
        return None, None, None
    namespace = labels.get("exported_namespace") if via_prometheus else None
    return pod, namespace or labels.get("namespace") or None, labels.get("container_name") or None


ASCEND = Vendor(
    source="ascend",
    vendor="huawei",
    columns=COLUMNS,
    node_metrics=NODE_METRICS,
    index_labels=INDEX_LABELS,
    name_prefixes=("npu_", "vnpu_", "container_npu_", "machine_npu"),
    strip_prefix="",
    device=device,
    failed_value=FAILED,
)
