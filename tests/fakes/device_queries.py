"""The telemetry half of FakeNvml: per-device readings, processes and MIG, each shaped exactly as pynvml returns it.

Kept apart from fake_pynvml.py (handles, init, faults, events) only for size. DeviceQueries is a mixin: it relies on
FakeNvml's `_target(handle, mig_ok=)`, `_handle(index, slot)`, `clock_us` and the `nvml_api` calling convention below.
Return types follow pynvml.py of nvidia-ml-py 13.x line by line: ints from `c_uint.value`, the real structs, a list of
`nvmlFriendlyObject` for processes, a list slice of a ctypes array for process samples, `[current, pending]` for the
MIG mode, a 4-tuple for remapped rows and a `c_uint` (not an int or bool) from nvmlDeviceIsMigDeviceHandle.
"""

from __future__ import annotations

import ctypes
import functools

import pynvml

from .devices import FakeProcess

# not_supported() takes any name of a family; aliases share the C call (or, for Throttle, the same bitmask).
FAMILY = {
    "nvmlInitWithFlags": "nvmlInit",
    "nvmlDeviceGetPciInfo_v3": "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetCurrentClocksThrottleReasons": "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetComputeRunningProcesses_v2": "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetComputeRunningProcesses_v3": "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetAttributes_v2": "nvmlDeviceGetAttributes",
    "nvmlEventSetWait_v2": "nvmlEventSetWait",
}

NOT_AVAILABLE_ID = 0xFFFFFFFF  # nvml.h: GI/CI ids are "set to 0xFFFFFFFF otherwise" (MIG off, or not attributable)
_CLOCKS = {
    pynvml.NVML_CLOCK_GRAPHICS: "graphics",
    pynvml.NVML_CLOCK_SM: "sm",
    pynvml.NVML_CLOCK_MEM: "mem",
    pynvml.NVML_CLOCK_VIDEO: "video",
}


def nvml_error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)  # NVMLError.__new__ returns the subclass for the code, e.g. NVMLError_GpuIsLost


def present(value):
    """A reading the board supports, or NVMLError_NotSupported for None."""
    if value is None:
        raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
    return value


def nvml_api(fn):
    """Mark a FakeNvml method as an NVML function: count the call, and refuse it before nvmlInit like the library."""
    name = fn.__name__

    @functools.wraps(fn)
    def call(self, *args, **kwargs):
        with self._lock:
            self.calls[name] += 1
            if name not in ("nvmlInit", "nvmlInitWithFlags") and self._init_count == 0:
                raise nvml_error(pynvml.NVML_ERROR_UNINITIALIZED)
            self._calling = name  # read by _target() before anything can release the lock
            return fn(self, *args, **kwargs)

    call.nvml_api = True
    return call


class DeviceQueries:
    # ---- memory, utilization, power, energy, temperature, clocks ----

    @nvml_api
    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        _, gpu, inst = self._target(handle, mig_ok=True)
        if version and version != pynvml.nvmlMemory_v2:
            raise nvml_error(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        if inst is None:
            total, used, reserved = gpu.memory_total_bytes, gpu.memory_used_bytes, gpu.memory_reserved_bytes
        else:
            total, used, reserved = inst.memory_total_bytes, inst.memory_used_bytes, 0
        free = total - reserved - used  # nvidia-smi (v2): 81559 MiB = 479 reserved + 19818 used + 61263 free (+-1)
        if not version:  # the real binding tests `if not version`, so 0 also means v1
            memory = pynvml.c_nvmlMemory_t()
            memory.total, memory.free, memory.used = total, free, used + reserved  # v1: total = free + used
        else:
            memory = pynvml.c_nvmlMemory_v2_t()
            memory.version, memory.total, memory.reserved = version, total, reserved
            memory.free, memory.used = free, used
        return memory

    @nvml_api
    def nvmlDeviceGetUtilizationRates(self, handle):
        gpu = self._target(handle)[1]
        util = pynvml.c_nvmlUtilization_t()
        util.gpu, util.memory = present(gpu.util_gpu), present(gpu.util_mem)  # "[N/A]" in MIG mode
        return util

    @nvml_api
    def nvmlDeviceGetPowerUsage(self, handle):
        return present(self._target(handle)[1].power_mw)

    @nvml_api
    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return present(self._target(handle)[1].enforced_power_limit_mw)

    @nvml_api
    def nvmlDeviceGetPowerManagementLimit(self, handle):
        return present(self._target(handle)[1].power_limit_mw)

    @nvml_api
    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return present(self._target(handle)[1].energy_mj)

    @nvml_api
    def nvmlDeviceGetTemperature(self, handle, sensor):
        gpu = self._target(handle)[1]
        if sensor != pynvml.NVML_TEMPERATURE_GPU:  # the only sensor nvmlTemperatureSensors_t defines
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return present(gpu.temperature_c)

    @nvml_api
    def nvmlDeviceGetClockInfo(self, handle, type):
        return self._clock(handle, type, "")

    @nvml_api
    def nvmlDeviceGetMaxClockInfo(self, handle, type):
        return self._clock(handle, type, "max_")

    def _clock(self, handle, clock_type: int, prefix: str) -> int:
        gpu = self._target(handle)[1]
        if clock_type not in _CLOCKS:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return present(getattr(gpu, f"{prefix}{_CLOCKS[clock_type]}_clock_mhz"))

    @nvml_api
    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return present(self._target(handle)[1].clocks_event_reasons)

    @nvml_api
    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return present(self._target(handle)[1].clocks_event_reasons)  # deprecated name, same bits

    # ---- memory errors ----

    @nvml_api
    def nvmlDeviceGetTotalEccErrors(self, handle, errorType, counterType):
        gpu = self._target(handle)[1]
        kinds = {
            pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED: "corrected",
            pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED: "uncorrected",
        }
        counters = {pynvml.NVML_VOLATILE_ECC: "volatile", pynvml.NVML_AGGREGATE_ECC: "aggregate"}
        if errorType not in kinds or counterType not in counters:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return present(getattr(gpu, f"ecc_{kinds[errorType]}_{counters[counterType]}"))

    @nvml_api
    def nvmlDeviceGetRetiredPages(self, device, sourceFilter):
        gpu = self._target(device)[1]
        pages = {
            pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS: gpu.retired_pages_sbe,
            pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR: gpu.retired_pages_dbe,
        }
        if sourceFilter not in pages:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return [int(p) for p in present(pages[sourceFilter])]  # pynvml: list(map(int, c_pages[0:count]))

    @nvml_api
    def nvmlDeviceGetRemappedRows(self, device):
        return tuple(present(self._target(device)[1].remapped_rows))

    # ---- processes ----

    @nvml_api
    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return self._processes(handle)

    @nvml_api
    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle):
        return self._processes(handle)

    @nvml_api
    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle):
        return self._processes(handle)

    def _processes(self, handle) -> list:
        """As pynvml builds it: c_nvmlProcessInfo_v3_t structs turned into nvmlFriendlyObject, NOT_AVAILABLE -> None.

        On the parent of a MIG GPU this is the aggregate over all instances (NVML gives it to privileged callers
        only); on a MIG device handle, the processes of that instance.
        """
        _, gpu, inst = self._target(handle, mig_ok=True)
        procs: list[FakeProcess] = gpu.processes if inst is None else gpu.instance_processes(inst)
        if not procs:
            return []  # the binding's "special case, no running processes"
        structs = (pynvml.c_nvmlProcessInfo_v3_t * len(procs))()
        not_available = pynvml.NVML_VALUE_NOT_AVAILABLE_ulonglong.value
        for struct, proc in zip(structs, procs, strict=True):
            struct.pid = proc.pid
            struct.usedGpuMemory = not_available if proc.used_memory_bytes is None else proc.used_memory_bytes
            struct.gpuInstanceId = NOT_AVAILABLE_ID if proc.gpu_instance_id is None else proc.gpu_instance_id
            struct.computeInstanceId = (
                NOT_AVAILABLE_ID if proc.compute_instance_id is None else proc.compute_instance_id
            )
        infos = [pynvml.nvmlStructToFriendlyObject(s) for s in structs]
        for info in infos:
            if info.usedGpuMemory == not_available:
                info.usedGpuMemory = None
        return infos

    @nvml_api
    def nvmlDeviceGetProcessUtilization(self, handle, timeStamp):
        """Samples newer than timeStamp (us), one per process with a sample; none -> NVMLError_NotFound (NVML docs)."""
        gpu = self._target(handle)[1]
        sampled = [p for p in gpu.processes if p.sm_util is not None]
        if not sampled or self.clock_us <= timeStamp:
            raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND)
        samples = (pynvml.c_nvmlProcessUtilizationSample_t * len(sampled))()
        for sample, proc in zip(samples, sampled, strict=True):
            sample.pid, sample.timeStamp, sample.smUtil = proc.pid, self.clock_us, proc.sm_util
            sample.memUtil, sample.encUtil, sample.decUtil = proc.mem_util or 0, proc.enc_util or 0, proc.dec_util or 0
        return samples[0 : len(sampled)]

    # ---- MIG ----

    @nvml_api
    def nvmlDeviceGetMigMode(self, device):
        gpu = self._target(device)[1]
        current = present(gpu.mig_mode)
        return [current, current if gpu.mig_mode_pending is None else gpu.mig_mode_pending]

    @nvml_api
    def nvmlDeviceGetMaxMigDeviceCount(self, device):
        return self._mig_slots(self._target(device)[1])

    @staticmethod
    def _mig_slots(gpu) -> int:
        # NVML docs: "Returns zero if MIG is not supported or enabled."
        return gpu.mig_capacity if gpu.mig_mode == pynvml.NVML_DEVICE_MIG_ENABLE else 0

    @nvml_api
    def nvmlDeviceGetMigDeviceHandleByIndex(self, device, index):
        gpu_index, gpu, _ = self._target(device)
        present(gpu.mig_mode)
        if not 0 <= index < self._mig_slots(gpu):
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if index >= len(gpu.mig) or gpu.mig[index] is None:
            raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND)  # an empty slot, as after a partial MIG layout
        return self._handle(gpu_index, index)

    @nvml_api
    def nvmlDeviceIsMigDeviceHandle(self, device):
        return ctypes.c_uint(self._target(device, mig_ok=True)[2] is not None)  # pynvml returns the c_uint itself

    @nvml_api
    def nvmlDeviceGetGpuInstanceId(self, device):
        return self._mig_instance(device).gpu_instance_id

    @nvml_api
    def nvmlDeviceGetComputeInstanceId(self, device):
        return self._mig_instance(device).compute_instance_id

    def _mig_instance(self, device):
        inst = self._target(device, mig_ok=True)[2]
        if inst is None:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)  # documented for MIG device handles only
        return inst

    @nvml_api
    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, migDevice):
        index, _, inst = self._target(migDevice, mig_ok=True)
        if inst is None:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self._handle(index)

    @nvml_api
    def nvmlDeviceGetAttributes(self, device):
        return self._attributes(device)

    @nvml_api
    def nvmlDeviceGetAttributes_v2(self, device):
        return self._attributes(device)

    def _attributes(self, device) -> pynvml.c_nvmlDeviceAttributes:
        inst = self._target(device, mig_ok=True)[2]
        if inst is None:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)  # NVML docs: "currently only supports MIG device handles"
        attrs = pynvml.c_nvmlDeviceAttributes()
        attrs.multiprocessorCount, attrs.sharedCopyEngineCount = inst.sm_count, inst.copy_engines
        attrs.sharedDecoderCount, attrs.sharedEncoderCount = inst.decoders, inst.encoders
        attrs.sharedJpegCount, attrs.sharedOfaCount = inst.jpegs, inst.ofas
        attrs.gpuInstanceSliceCount, attrs.computeInstanceSliceCount = (
            inst.gpu_instance_slices,
            inst.compute_instance_slices,
        )
        attrs.memorySizeMB = inst.memory_total_bytes // 2**20  # the field is MiB despite its name (nvml.h)
        return attrs
