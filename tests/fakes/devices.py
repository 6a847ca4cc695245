"""What a fake GPU is: plain, mutable specs that FakeNvml reads on every call.

Units are NVML's, not nvidia-smi's: bytes, milliwatts, millijoules, MHz, degrees C, percent. A field set to None means
the board does not support that reading, and the NVML function that returns it raises NVMLError_NotSupported (this is
how "[N/A]" / "[Not Supported]" in a capture reaches a collector). Change a field between two scrapes to script a
change (`gpu.util_gpu = 90`); FakeNvml.advance() moves energy and the sample clock forward.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FakeProcess:
    """One compute process (what nvmlDeviceGetComputeRunningProcesses lists).

    used_memory_bytes None is what NVML reports as NVML_VALUE_NOT_AVAILABLE (WDDM); the real pynvml turns that into
    `usedGpuMemory = None`, and so does the fake. sm_util None means the process had no utilization sample, so it is
    absent from nvmlDeviceGetProcessUtilization (nvidia-smi pmon prints "-"). gpu_instance_id/compute_instance_id place
    the process on a MIG instance; None when MIG is off (NVML then reports 0xFFFFFFFF).
    """

    pid: int
    used_memory_bytes: int | None
    sm_util: int | None = None
    mem_util: int | None = None
    enc_util: int | None = None
    dec_util: int | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    name: str = ""


@dataclass
class MigInstance:
    """One MIG device (one compute instance inside one GPU instance); its index is its position in FakeGpu.mig.

    Two compute instances of one GPU instance share its memory, so both report the same memory fields (as the H200
    capture shows for GI 2).
    """

    uuid: str
    profile: str  # NVIDIA's MIG device name: "1g.10gb", or "1c.3g.71gb" for a CI smaller than its GI
    gpu_instance_id: int
    compute_instance_id: int
    gpu_instance_slices: int
    compute_instance_slices: int
    sm_count: int
    memory_total_bytes: int
    memory_used_bytes: int
    copy_engines: int = 0
    encoders: int = 0
    decoders: int = 0
    jpegs: int = 0
    ofas: int = 0


@dataclass
class FakeGpu:
    """One physical GPU as NVML sees it; its NVML index is its position in FakeNvml.devices."""

    uuid: str
    name: str
    serial: str | None
    pci_bus_id: str  # NVML_DEVICE_PCI_BUS_ID_FMT, e.g. "00000000:00:09.0"
    pci_device_id: int  # device id << 16 | vendor id, e.g. 0x233010DE
    pci_subsystem_id: int
    memory_total_bytes: int
    memory_used_bytes: int  # allocated, excluding reserved (nvidia-smi's memory.used)
    memory_reserved_bytes: int
    util_gpu: int | None
    util_mem: int | None
    power_mw: int | None
    power_limit_mw: int | None  # nvmlDeviceGetPowerManagementLimit (nvidia-smi power.limit)
    enforced_power_limit_mw: int | None
    energy_mj: int | None
    temperature_c: int | None
    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    graphics_clock_mhz: int | None = None
    video_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None
    max_mem_clock_mhz: int | None = None
    max_graphics_clock_mhz: int | None = None
    max_video_clock_mhz: int | None = None
    clocks_event_reasons: int | None = 0  # bitmask of pynvml.nvmlClocksEventReason*
    ecc_corrected_volatile: int | None = 0
    ecc_uncorrected_volatile: int | None = 0
    ecc_corrected_aggregate: int | None = 0
    ecc_uncorrected_aggregate: int | None = 0
    retired_pages_sbe: list[int] | None = None  # page addresses; None on boards that remap rows instead (A100+)
    retired_pages_dbe: list[int] | None = None
    remapped_rows: tuple[int, int, int, int] | None = None  # (correctable, uncorrectable, pending, failure)
    processes: list[FakeProcess] = field(default_factory=list)
    mig_mode: int | None = None  # pynvml.NVML_DEVICE_MIG_ENABLE/DISABLE; None: the board cannot do MIG
    mig_mode_pending: int | None = None
    mig_capacity: int = 0  # nvmlDeviceGetMaxMigDeviceCount when MIG is on: 7 on A100/H100/H200
    mig: list[MigInstance] = field(default_factory=list)
    supported_events: int = 0  # bitmask of pynvml.nvmlEventType*; registering others raises NotSupported
    unsupported: set[str] = field(default_factory=set)  # NVML function families answering NotSupported

    def instance_processes(self, inst: MigInstance) -> list[FakeProcess]:
        """The processes running on one MIG instance (matched by GPU and compute instance id)."""
        return [
            p
            for p in self.processes
            if (p.gpu_instance_id, p.compute_instance_id) == (inst.gpu_instance_id, inst.compute_instance_id)
        ]
