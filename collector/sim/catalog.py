"""GPU models the simulator can field. Memory totals and power limits are the values NVML reports on real
boards (../shared/data/nvml captures for H100/H200/L40S; NVIDIA datasheets for the rest)."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20


@dataclass(frozen=True)
class GpuSpec:
    key: str  # short name used on the command line and in node names
    name: str  # NVML product name (nvmlDeviceGetName)
    mem_bytes: int
    power_limit_w: float
    idle_w: float
    sm_clock_max_mhz: int
    sm_clock_idle_mhz: int
    mem_clock_mhz: int

    @property
    def k8s_product(self) -> str:
        """The gpu-feature-discovery label value (nvidia.com/gpu.product): spaces become dashes."""
        return self.name.replace(" ", "-")


CATALOG: dict[str, GpuSpec] = {
    s.key: s
    for s in (
        GpuSpec("H100", "NVIDIA H100 80GB HBM3", 81559 * MIB, 700.0, 70.0, 1980, 345, 2619),
        GpuSpec("H200", "NVIDIA H200", 143771 * MIB, 700.0, 75.0, 1980, 345, 3201),
        GpuSpec("A100", "NVIDIA A100-SXM4-80GB", 81920 * MIB, 400.0, 55.0, 1410, 210, 1593),
        GpuSpec("L40S", "NVIDIA L40S", 46068 * MIB, 350.0, 35.0, 2520, 210, 9001),
        GpuSpec("L4", "NVIDIA L4", 23034 * MIB, 72.0, 16.0, 2040, 210, 6251),
        GpuSpec("T4", "Tesla T4", 15360 * MIB, 70.0, 10.0, 1590, 300, 5001),
    )
}
