"""Ready-made fake fleets, each one FakeNvml built from a real capture (see fakes.captures for what is synthesised).

Every call returns a fresh FakeNvml, so a test can mutate or break its fleet without touching another test's.
"""

from __future__ import annotations

import copy
import math

from .captures import (
    A100_XML,
    H100,
    H100_MIG,
    H200,
    H200_MIG,
    L40S,
    T4_XML,
    generated_serial,
    generated_uuid,
    load_exporter_capture,
)
from .fake_pynvml import FakeNvml
from .smi_xml import load_smi_xml


def h100_node(count: int = 8) -> FakeNvml:
    """`count` copies of the loaded H100 (device 0 is the capture as is): each copy gets its own UUID and serial, the
    next PCI device number on the captured bus, and its own copy of the captured load, its PIDs offset by 1000 x index.
    """
    cap = load_exporter_capture(H100)
    base = cap.gpus[0]
    domain, bus, rest = base.pci_bus_id.split(":")
    first = int(rest.split(".")[0], 16)
    gpus = []
    for i in range(count):
        gpu = copy.deepcopy(base)
        gpu.uuid, gpu.serial = generated_uuid("GPU", H100, f"node{i}"), generated_serial(H100, f"node{i}")
        gpu.pci_bus_id = f"{domain}:{bus}:{first + i:02X}.0"
        for proc in gpu.processes:
            proc.pid += 1000 * i
        gpus.append(gpu)
    return FakeNvml(gpus, driver_version=cap.driver_version, nvml_version=cap.nvml_version)


def h100_mig() -> FakeNvml:
    """The H100 in MIG mode: 3g.40gb (GI 2), 2g.20gb (GI 3), 1g.10gb (GI 9), 1g.10gb (GI 10); load on GI 2 / CI 0."""
    return load_exporter_capture(H100_MIG).nvml()


def h200() -> FakeNvml:
    return load_exporter_capture(H200).nvml()


def h200_mig() -> FakeNvml:
    """The H200 in MIG mode: GI 2 split into 1c.3g.71gb (CI 0) and 2c.3g.71gb (CI 1, the load), 2g.35gb, 2x 1g.18gb."""
    return load_exporter_capture(H200_MIG).nvml()


def l40s() -> FakeNvml:
    """The L40S, which has no MIG (nvmlDeviceGetMigMode: NotSupported), running two NVENC ffmpeg processes."""
    return load_exporter_capture(L40S).nvml()


def t4() -> FakeNvml:
    """The Tesla T4 of telegraf's `nvidia-smi -q -x` test data (driver 515.105.01): Xorg (graphics, not listed by
    nvmlDeviceGetComputeRunningProcesses) and one python compute process."""
    return load_smi_xml(T4_XML).nvml()


def a100_mig() -> FakeNvml:
    """The A100-SXM4-80GB of telegraf's test data with MIG on: four 1g.20gb devices, GI 3-6, idle."""
    return load_smi_xml(A100_XML, mig_profile=a100_profile).nvml()


def a100_profile(sm_count: int, memory_mib: int) -> str:
    """The MIG profile of an A100 instance: 14 SMs per compute slice (7g = 98 SMs) and the memory rounded up to GB,
    which gives the MIG user guide's A100-SXM4-80GB names (1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)."""
    return f"{sm_count // 14}g.{math.ceil(memory_mib / 1024)}gb"
