"""A fake `pynvml` module: pass `FakeNvml(devices=[...])` wherever code takes the real module (`NvmlSource(nvml=...)`).

It mimics nvidia-ml-py 13.x (`pynvml.py`) call for call: the same function and parameter names, the real ctypes
structs and return types, and errors that are the real `pynvml.NVMLError_*` classes, so `except
pynvml.NVMLError_GpuIsLost` works whether the caller imported the real module or reads the class off the fake.
Constants, structs and error classes fall through to the real module; an NVML function the fake does not implement is
an AttributeError (hasattr() is False), never a call into libnvidia-ml, which test machines do not have.

Device handles are real `pynvml.c_nvmlDevice_t` pointers, opaque and never dereferenced: each call returns a new
pointer object (as the real binding does), whose address encodes the GPU and MIG slot, so handles cannot be compared
with `==` or used as dict keys here either. Handles from another FakeNvml are rejected with NVMLError_InvalidArgument.

Where real NVML behaviour is not pinned down by the binding, the docs or the captures, the fake picks the stricter
reading and says so: on a MIG device handle only the calls NVML documents for MIG handles work (name, UUID, memory,
attributes, GI/CI ids, parent handle, running processes); every board-level reading raises NVMLError_NotSupported,
so a collector must read power, clocks, temperature and ECC from the parent handle.
"""

from __future__ import annotations

import collections
import ctypes
import inspect
import itertools
import threading
import time

import pynvml

from .device_queries import FAMILY, NOT_AVAILABLE_ID, DeviceQueries, nvml_api, nvml_error, present
from .devices import FakeGpu, MigInstance

# Pure-Python helpers of the real module that never load libnvidia-ml; every other function there is blocked.
_PASS_THROUGH = frozenset({"nvmlExceptionClass", "nvmlStructToFriendlyObject", "nvmlFriendlyObjectToStruct"})
_STRIDE = 16  # pointer alignment of the fake addresses
_SPAN = 1 << 36  # address range owned by one FakeNvml: device keys in the lower half, event sets in the upper
_fakes = itertools.count(1)


class _EventSet:
    def __init__(self) -> None:
        self.registered: dict[int, int] = {}  # GPU index -> event type mask
        self.queue: collections.deque = collections.deque()


class FakeNvml(DeviceQueries):
    """Stands in for the `pynvml` module over a scripted list of GPUs (fakes.fleets has ready-made ones).

    Fault injection, all documented on the methods: fail_init(), lose(), not_supported(), queue_xid(); advance()
    moves time. `calls` counts every NVML function called by name (failed calls included).
    """

    def __init__(
        self,
        devices: list[FakeGpu],
        *,
        driver_version: str = "590.48.01",
        nvml_version: str = "13.590.48.01",
        clock_us: int = 1_784_016_758_000_000,  # 2026-07-14T08:12:38Z, when the H100 capture was taken
    ) -> None:
        for attr in ("uuid", "pci_bus_id"):
            seen = collections.Counter(getattr(g, attr) for g in devices)
            if dupes := sorted(v for v, n in seen.items() if n > 1):
                raise ValueError(f"FakeNvml devices share {attr}: {', '.join(dupes)}")
        self.devices = list(devices)
        self.driver_version = driver_version
        self.nvml_version = nvml_version
        self.clock_us = clock_us
        self.calls: collections.Counter[str] = collections.Counter()
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._base = next(_fakes) * _SPAN
        self._init_count = 0
        self._init_failure: tuple[int, int | None] | None = None  # (code, failures left or None for every call)
        self._lose_after: dict[int, int] = {}
        self._lost: set[int] = set()
        self._event_sets: dict[int, _EventSet] = {}
        self._set_ids = itertools.count(1)
        self._calling = ""

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        real = getattr(pynvml, name)  # constants, structs and NVMLError classes are the real ones
        if inspect.isfunction(real) and name not in _PASS_THROUGH:
            raise AttributeError(f"FakeNvml does not implement {name} (the real one needs libnvidia-ml)")
        return real

    # ---- fault injection and time ----

    def fail_init(self, code: int, times: int | None = None) -> None:
        """Make nvmlInit/nvmlInitWithFlags raise NVMLError(code), e.g. NVML_ERROR_LIBRARY_NOT_FOUND or
        NVML_ERROR_DRIVER_NOT_LOADED; `times` failures then success, or every call when None."""
        self._init_failure = (code, times)

    def lose(self, index: int, after_calls: int = 0) -> None:
        """GPU `index` falls off the bus after `after_calls` more calls touching it (handle lookups included): from
        then on every call on it or its MIG devices raises NVMLError_GpuIsLost. Other GPUs keep working, and
        nvmlDeviceGetCount still counts it (the fake never removes a device)."""
        if not 0 <= index < len(self.devices):
            raise IndexError(f"lose: no GPU {index} in a fleet of {len(self.devices)}")
        self._lose_after[index] = after_calls

    def not_supported(self, index: int, *functions: str) -> None:
        """Make GPU `index` (and its MIG devices) answer NVMLError_NotSupported to these NVML functions; naming one
        member of a family (e.g. ..._v3, the deprecated Throttle name) covers all of it."""
        for name in functions:
            if not getattr(getattr(type(self), name, None), "nvml_api", False):
                raise ValueError(f"not_supported: {name!r} is not an NVML function FakeNvml implements")
            self.devices[index].unsupported.add(FAMILY.get(name, name))

    def queue_xid(
        self, index: int, xid: int, *, gpu_instance_id: int | None = None, compute_instance_id: int | None = None
    ) -> int:
        """Raise Xid `xid` on GPU `index`: every event set registered for nvmlEventTypeXidCriticalError on it gets a
        c_nvmlEventData_t (eventData = xid; GI/CI ids for a MIG-attributable Xid, else 0xFFFFFFFF) that
        nvmlEventSetWait returns. Like the driver, an Xid raised before registration reaches nobody: returns the
        number of event sets it was delivered to."""
        with self._cond:
            delivered = 0
            for event_set in self._event_sets.values():
                if event_set.registered.get(index, 0) & pynvml.nvmlEventTypeXidCriticalError:
                    data = pynvml.c_nvmlEventData_t()
                    data.device = self._handle(index)
                    data.eventType = pynvml.nvmlEventTypeXidCriticalError
                    data.eventData = xid
                    data.gpuInstanceId = NOT_AVAILABLE_ID if gpu_instance_id is None else gpu_instance_id
                    data.computeInstanceId = NOT_AVAILABLE_ID if compute_instance_id is None else compute_instance_id
                    event_set.queue.append(data)
                    delivered += 1
            self._cond.notify_all()
            return delivered

    def advance(self, seconds: float) -> None:
        """Let `seconds` pass: energy counters grow by power x time (mW x s = mJ) and new per-process utilization
        samples become readable (their timeStamp is the fake clock)."""
        with self._lock:
            self.clock_us += round(seconds * 1_000_000)
            for gpu in self.devices:
                if gpu.energy_mj is not None and gpu.power_mw is not None:
                    gpu.energy_mj += round(gpu.power_mw * seconds)

    # ---- handles ----

    def _handle(self, index: int, slot: int | None = None) -> pynvml.c_nvmlDevice_t:
        key = (index + 1) << 8 | (0 if slot is None else slot + 1)
        return ctypes.cast(ctypes.c_void_p(self._base + key * _STRIDE), pynvml.c_nvmlDevice_t)

    def _decode(self, handle) -> tuple[int, int | None]:
        if not isinstance(handle, pynvml.c_nvmlDevice_t):
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        offset = (ctypes.cast(handle, ctypes.c_void_p).value or 0) - self._base
        key, rest = divmod(offset, _STRIDE)
        index, slot = (key >> 8) - 1, (key & 0xFF) - 1
        if rest or not 0 <= offset < _SPAN // 2 or not 0 <= index < len(self.devices):
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if slot < 0:
            return index, None
        gpu = self.devices[index]
        if gpu.mig_mode != pynvml.NVML_DEVICE_MIG_ENABLE or slot >= len(gpu.mig) or gpu.mig[slot] is None:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)  # the MIG device was destroyed or MIG turned off
        return index, slot

    def _touch(self, index: int) -> None:
        if index in self._lost:
            raise nvml_error(pynvml.NVML_ERROR_GPU_IS_LOST)
        left = self._lose_after.get(index)
        if left == 0:
            self._lost.add(index)
            raise nvml_error(pynvml.NVML_ERROR_GPU_IS_LOST)
        if left is not None:
            self._lose_after[index] = left - 1

    def _target(self, handle, *, mig_ok: bool = False) -> tuple[int, FakeGpu, MigInstance | None]:
        """The GPU (and MIG instance) a handle names, after the lost-GPU and not-supported faults."""
        index, slot = self._decode(handle)
        self._touch(index)
        gpu = self.devices[index]
        if FAMILY.get(self._calling, self._calling) in gpu.unsupported:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        inst = None if slot is None else gpu.mig[slot]
        if inst is not None and not mig_ok:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return index, gpu, inst

    # ---- init and system ----

    def _init(self) -> None:
        if self._init_failure is not None:
            code, left = self._init_failure
            if left is None or left > 0:
                self._init_failure = None if left == 1 else (code, None if left is None else left - 1)
                raise nvml_error(code)
        self._init_count += 1  # refcounted like the library: each nvmlInit needs its nvmlShutdown

    @nvml_api
    def nvmlInit(self):
        self._init()

    @nvml_api
    def nvmlInitWithFlags(self, flags):
        self._init()

    @nvml_api
    def nvmlShutdown(self):
        self._init_count -= 1

    @nvml_api
    def nvmlSystemGetDriverVersion(self):
        return self.driver_version

    @nvml_api
    def nvmlSystemGetNVMLVersion(self):
        return self.nvml_version

    # ---- enumeration and identity ----

    @nvml_api
    def nvmlDeviceGetCount(self):
        return len(self.devices)

    @nvml_api
    def nvmlDeviceGetHandleByIndex(self, index):
        if not 0 <= index < len(self.devices):
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        self._touch(index)
        return self._handle(index)

    @nvml_api
    def nvmlDeviceGetHandleByUUID(self, uuid):
        wanted = uuid.decode() if isinstance(uuid, bytes) else uuid  # the real binding takes str or bytes
        for index, gpu in enumerate(self.devices):
            slots = [i for i, m in enumerate(gpu.mig) if m is not None and m.uuid == wanted]
            if gpu.uuid == wanted or (slots and gpu.mig_mode == pynvml.NVML_DEVICE_MIG_ENABLE):
                self._touch(index)
                return self._handle(index, slots[0] if slots else None)
        raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND)

    @nvml_api
    def nvmlDeviceGetIndex(self, handle):
        return self._target(handle)[0]

    @nvml_api
    def nvmlDeviceGetUUID(self, handle):
        _, gpu, inst = self._target(handle, mig_ok=True)
        return gpu.uuid if inst is None else inst.uuid

    @nvml_api
    def nvmlDeviceGetName(self, handle):
        _, gpu, inst = self._target(handle, mig_ok=True)
        # A MIG device is named after its parent and profile, e.g. "NVIDIA H100 80GB HBM3 MIG 1g.10gb".
        return gpu.name if inst is None else f"{gpu.name} MIG {inst.profile}"

    @nvml_api
    def nvmlDeviceGetSerial(self, handle):
        return present(self._target(handle)[1].serial)

    @nvml_api
    def nvmlDeviceGetPciInfo(self, handle):
        return self._pci_info(handle)

    @nvml_api
    def nvmlDeviceGetPciInfo_v3(self, handle):
        return self._pci_info(handle)

    def _pci_info(self, handle) -> pynvml.nvmlPciInfo_t:
        gpu = self._target(handle)[1]
        domain, bus, rest = gpu.pci_bus_id.split(":")
        info = pynvml.nvmlPciInfo_t()
        info.domain, info.bus, info.device = int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16)
        info.pciDeviceId, info.pciSubSystemId = gpu.pci_device_id, gpu.pci_subsystem_id
        info.busId = pynvml.NVML_DEVICE_PCI_BUS_ID_FMT % (info.domain, info.bus, info.device)
        info.busIdLegacy = pynvml.NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT % (info.domain, info.bus, info.device)
        return info

    # ---- events ----

    @nvml_api
    def nvmlEventSetCreate(self):
        key = next(self._set_ids)
        self._event_sets[key] = _EventSet()
        return ctypes.cast(ctypes.c_void_p(self._base + _SPAN // 2 + key * _STRIDE), pynvml.c_nvmlEventSet_t)

    def _event_key(self, event_set) -> int:
        if isinstance(event_set, pynvml.c_nvmlEventSet_t):
            key, rest = divmod((ctypes.cast(event_set, ctypes.c_void_p).value or 0) - self._base - _SPAN // 2, _STRIDE)
            if not rest and key in self._event_sets:
                return key
        raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)  # never created here, or already freed

    def _event_set(self, event_set) -> _EventSet:
        return self._event_sets[self._event_key(event_set)]

    @nvml_api
    def nvmlDeviceGetSupportedEventTypes(self, handle):
        return self._target(handle)[1].supported_events

    @nvml_api
    def nvmlDeviceRegisterEvents(self, handle, eventTypes, eventSet):
        index, gpu, _ = self._target(handle)
        event_set = self._event_set(eventSet)
        if eventTypes & ~gpu.supported_events:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)  # "some of requested event types" are not supported
        event_set.registered[index] = event_set.registered.get(index, 0) | eventTypes

    @nvml_api
    def nvmlEventSetWait(self, eventSet, timeoutms):
        return self._wait(eventSet, timeoutms)

    @nvml_api
    def nvmlEventSetWait_v2(self, eventSet, timeoutms):
        return self._wait(eventSet, timeoutms)

    # nvmlEventSetWait_v3 (params struct) is in nvidia-ml-py 13.x but not exported by driver 590.48.01's
    # libnvidia-ml.so (see the nvml-symbols section of the captures), so it is left unimplemented here.

    def _wait(self, event_set, timeoutms) -> pynvml.c_nvmlEventData_t:
        events = self._event_set(event_set)
        deadline = time.monotonic() + timeoutms / 1000
        while not events.queue:  # blocks like the driver, so an event thread can wait on queue_xid() from a test
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise nvml_error(pynvml.NVML_ERROR_TIMEOUT)
            self._cond.wait(remaining)
        return events.queue.popleft()

    @nvml_api
    def nvmlEventSetFree(self, eventSet):
        del self._event_sets[self._event_key(eventSet)]
