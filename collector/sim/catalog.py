"""Accelerator models the simulator can field. Memory totals and power limits are the values the devices report on
real boards: NVML for NVIDIA (../shared/data/nvml captures for H100/H200/L40S; NVIDIA datasheets for the rest), the
vendors' public specifications for AMD and Huawei (cited per row below, with the figures that are uncertain)."""

from __future__ import annotations

from dataclasses import dataclass

from gpuledger.vendors import node_label

MIB = 1 << 20
GIB = 1 << 30


@dataclass(frozen=True)
class GpuSpec:
    key: str  # short name used on the command line and in node names
    name: str  # the model as the vendor's source writes it (NVML name, AMD card_series, Ascend model_name)
    mem_bytes: int
    power_limit_w: float
    idle_w: float
    sm_clock_max_mhz: int
    sm_clock_idle_mhz: int
    mem_clock_mhz: int
    vendor: str = "nvidia"  # gpu_samples.vendor (gpuledger/vendors.py VENDORS)

    @property
    def product_label(self) -> tuple[str, str]:
        """The node label its vendor's node labeller sets for the model (gpuledger.vendors.node_label: NVIDIA's
        gpu-feature-discovery nvidia.com/gpu.product, spaces become dashes; the AMD GPU Operator's node labeller
        amd.com/gpu.product-name, spaces become underscores: AMD_Instinct_MI300X_OAM; Huawei's Ascend device
        plugin node.kubernetes.io/npu.chip.name: the chip name, 910B3)."""
        return node_label(self.name, self.vendor)


CATALOG: dict[str, GpuSpec] = {
    s.key: s
    for s in (
        GpuSpec("H100", "NVIDIA H100 80GB HBM3", 81559 * MIB, 700.0, 70.0, 1980, 345, 2619),
        GpuSpec("H200", "NVIDIA H200", 143771 * MIB, 700.0, 75.0, 1980, 345, 3201),
        GpuSpec("A100", "NVIDIA A100-SXM4-80GB", 81920 * MIB, 400.0, 55.0, 1410, 210, 1593),
        GpuSpec("L40S", "NVIDIA L40S", 46068 * MIB, 350.0, 35.0, 2520, 210, 9001),
        GpuSpec("L4", "NVIDIA L4", 23034 * MIB, 72.0, 16.0, 2040, 210, 6251),
        GpuSpec("T4", "Tesla T4", 15360 * MIB, 70.0, 10.0, 1590, 300, 5001),
        # AMD Instinct MI300X, OAM module. AMD's data sheet ("AMD Instinct MI300X Accelerator", amd.com/content/dam/
        # amd/en/documents/instinct-tech-docs/data-sheets/amd-instinct-mi300x-data-sheet.pdf): 192 GB HBM3 (eight
        # 24 GB stacks, binary GB), 750 W peak board power, peak engine clock 2100 MHz, 5.2 Gbps memory (a 1300 MHz
        # memory clock as amd-smi reports it). The name is the exporter's card_series label (the real MI300X lines
        # in tests/fixtures/accelerators/amd-dme-mi300x-*.prom). Uncertain: the idle power (~130 W is what public
        # amd-smi listings of idle MI300X boards show, not a specified figure), the idle engine clock, and whether
        # the exporter's gpu_total_vram is a few hundred MB short of 192 GiB, as NVML's totals are.
        GpuSpec("MI300X", "AMD Instinct MI300X OAM", 192 * GIB, 750.0, 130.0, 2100, 200, 1300, "amd"),
        # Huawei Ascend 910B, as the 910B3 chip of the Atlas 800T A2 training server (hiascend.com, "Atlas 800T A2
        # 训练服务器 产品技术白皮书"; npu-smi info lists it as 910B3 with 65536 MB of HBM): 64 GB HBM2e, which the
        # npu-exporter's MB (= MiB, docs/accelerators.md) makes 64 GiB. The name follows the exporter's model_name
        # rule, chip name + type + version (910A-Ascend-V1 in the real 910A capture,
        # tests/fixtures/accelerators/ascend-npu-exporter-910a-x8-docs-capture.prom). Uncertain: the power limit
        # (400 W is the figure published for the 910B module; some 910B variants are listed at 310 W), the idle
        # power (~90 W in public npu-smi listings), the AI core clock (1800 MHz max) and the HBM clock.
        GpuSpec("Ascend910B", "910B3-Ascend-V1", 64 * GIB, 400.0, 90.0, 1800, 800, 1600, "huawei"),
    )
}
