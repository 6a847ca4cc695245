"""The fake pynvml against the real module (signatures, types, error classes) and against the captures it is built from.

Expected numbers are read off the capture files in tests/fixtures/nvml/ (quoted next to each assertion), so a loader
bug that shifts a column or a unit fails here rather than in a collector test.
"""

from __future__ import annotations

import inspect
import threading
import time

import pynvml
import pytest

from fakes import fleets
from fakes.fake_pynvml import FakeNvml

MIB = 2**20
NA_ID = 0xFFFFFFFF

# The functions the NVML collector may rely on; the parametrised test below checks each against the real module.
REQUIRED = """nvmlInit nvmlInitWithFlags nvmlShutdown nvmlSystemGetDriverVersion nvmlSystemGetNVMLVersion
nvmlDeviceGetCount nvmlDeviceGetHandleByIndex nvmlDeviceGetHandleByUUID nvmlDeviceGetIndex nvmlDeviceGetUUID
nvmlDeviceGetName nvmlDeviceGetSerial nvmlDeviceGetPciInfo nvmlDeviceGetPciInfo_v3 nvmlDeviceGetMemoryInfo
nvmlDeviceGetUtilizationRates nvmlDeviceGetPowerUsage nvmlDeviceGetEnforcedPowerLimit nvmlDeviceGetPowerManagementLimit
nvmlDeviceGetTotalEnergyConsumption nvmlDeviceGetTemperature nvmlDeviceGetClockInfo nvmlDeviceGetMaxClockInfo
nvmlDeviceGetCurrentClocksEventReasons nvmlDeviceGetCurrentClocksThrottleReasons nvmlDeviceGetTotalEccErrors
nvmlDeviceGetRetiredPages nvmlDeviceGetRemappedRows nvmlDeviceGetComputeRunningProcesses
nvmlDeviceGetComputeRunningProcesses_v2 nvmlDeviceGetComputeRunningProcesses_v3 nvmlDeviceGetProcessUtilization
nvmlDeviceGetMigMode nvmlDeviceGetMaxMigDeviceCount nvmlDeviceGetMigDeviceHandleByIndex nvmlDeviceIsMigDeviceHandle
nvmlDeviceGetGpuInstanceId nvmlDeviceGetComputeInstanceId nvmlDeviceGetDeviceHandleFromMigDeviceHandle
nvmlDeviceGetAttributes nvmlDeviceGetAttributes_v2 nvmlEventSetCreate nvmlDeviceRegisterEvents nvmlEventSetWait
nvmlEventSetWait_v2 nvmlEventSetFree""".split()
IMPLEMENTED = sorted(n for n in dir(FakeNvml) if getattr(getattr(FakeNvml, n), "nvml_api", False))


def started(nvml: FakeNvml) -> FakeNvml:
    nvml.nvmlInit()
    return nvml


# ---- the same module surface ----


def test_the_fake_implements_every_required_function():
    assert set(REQUIRED) <= set(IMPLEMENTED)


@pytest.mark.parametrize("name", IMPLEMENTED)
def test_each_function_exists_in_the_real_module_with_the_same_parameters(name):
    def params(fn):
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    assert params(getattr(FakeNvml([]), name)) == params(getattr(pynvml, name))


def test_constants_structs_and_errors_are_the_real_ones_and_missing_functions_are_absent():
    nvml = FakeNvml([])
    assert nvml.NVML_TEMPERATURE_GPU == pynvml.NVML_TEMPERATURE_GPU
    assert nvml.nvmlMemory_v2 == pynvml.nvmlMemory_v2
    assert nvml.c_nvmlMemory_v2_t is pynvml.c_nvmlMemory_v2_t
    assert nvml.NVMLError_GpuIsLost is pynvml.NVMLError_GpuIsLost
    assert nvml.nvmlExceptionClass(pynvml.NVML_ERROR_NOT_SUPPORTED) is pynvml.NVMLError_NotSupported
    # Not implemented, or (v3) not exported by the captured 590 driver: absent rather than calling libnvidia-ml.
    for name in ("nvmlDeviceGetFanSpeed", "nvmlEventSetWait_v3", "nvmlDeviceGetPciInfo_v2", "nvmlNoSuchThing"):
        assert not hasattr(nvml, name)


def test_calls_before_init_or_after_the_last_shutdown_raise_uninitialized():
    nvml = fleets.h100_node(1)
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlShutdown()
    nvml.nvmlInit()
    nvml.nvmlInitWithFlags(0)
    nvml.nvmlShutdown()
    assert nvml.nvmlDeviceGetCount() == 1  # refcounted: one nvmlInit is still open
    nvml.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.calls["nvmlInit"] == 1 and nvml.calls["nvmlDeviceGetCount"] == 2


# ---- values and types from the H100 capture ----


def test_h100_readings_match_the_capture_in_nvml_units_and_types():
    nvml = started(fleets.h100_node(1))
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    assert isinstance(h, pynvml.c_nvmlDevice_t)
    assert nvml.nvmlSystemGetDriverVersion() == "590.48.01"
    assert nvml.nvmlSystemGetNVMLVersion() == "13.590.48.01"  # CUDA 13.1 driver
    assert nvml.nvmlDeviceGetName(h) == "NVIDIA H100 80GB HBM3"
    assert isinstance(nvml.nvmlDeviceGetUUID(h), str) and isinstance(nvml.nvmlDeviceGetSerial(h), str)

    pci = nvml.nvmlDeviceGetPciInfo(h)  # "00000000:00:09.0, 0x0000, 0x00, 0x09, ..., 0x233010DE, 0x16C110DE"
    assert isinstance(pci, pynvml.nvmlPciInfo_t)
    assert (pci.busId, pci.busIdLegacy, pci.domain, pci.bus, pci.device) == (
        "00000000:00:09.0",
        "0000:00:09.0",
        0,
        0,
        9,
    )
    assert (pci.pciDeviceId, pci.pciSubSystemId) == (0x233010DE, 0x16C110DE)

    mem = nvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)  # "81559 MiB, 479 MiB, 19818 MiB, 61263 MiB"
    assert isinstance(mem, pynvml.c_nvmlMemory_v2_t) and mem.version == pynvml.nvmlMemory_v2
    assert (mem.total, mem.reserved, mem.used) == (81559 * MIB, 479 * MIB, 19818 * MIB)
    assert abs(mem.free - 61263 * MIB) <= MIB  # nvidia-smi rounds each figure to a MiB
    v1 = nvml.nvmlDeviceGetMemoryInfo(h)
    assert isinstance(v1, pynvml.c_nvmlMemory_t) and not hasattr(v1, "reserved")
    assert (v1.total, v1.free, v1.used) == (mem.total, mem.free, (19818 + 479) * MIB)  # v1 used includes reserved

    util = nvml.nvmlDeviceGetUtilizationRates(h)  # "100 %, 11 %"
    assert isinstance(util, pynvml.c_nvmlUtilization_t) and (util.gpu, util.memory) == (100, 11)
    assert nvml.nvmlDeviceGetPowerUsage(h) == 631_950  # power.draw "631.95 W", in mW
    assert nvml.nvmlDeviceGetEnforcedPowerLimit(h) == nvml.nvmlDeviceGetPowerManagementLimit(h) == 700_000
    assert nvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU) == 59
    clocks = {t: nvml.nvmlDeviceGetClockInfo(h, t) for t in (0, 1, 2, 3)}
    assert clocks == {
        pynvml.NVML_CLOCK_GRAPHICS: 1980,
        pynvml.NVML_CLOCK_SM: 1980,
        pynvml.NVML_CLOCK_MEM: 2619,
        3: 1545,
    }
    assert nvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM) == 2619
    assert nvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_VIDEO) == 1545  # -q "Max Clocks / Video"
    assert nvml.nvmlDeviceGetCurrentClocksEventReasons(h) == nvml.nvmlDeviceGetCurrentClocksThrottleReasons(h) == 0
    for kind in (pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED):
        assert nvml.nvmlDeviceGetTotalEccErrors(h, kind, pynvml.NVML_VOLATILE_ECC) == 0
    assert nvml.nvmlDeviceGetRemappedRows(h) == (0, 0, 0, 0)  # "0, 0, No, No"
    with pytest.raises(pynvml.NVMLError_NotSupported):  # retired_pages.*.count "[N/A]": Hopper remaps rows
        nvml.nvmlDeviceGetRetiredPages(h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
    assert nvml.nvmlDeviceGetMigMode(h) == [pynvml.NVML_DEVICE_MIG_DISABLE] * 2
    assert nvml.nvmlDeviceGetMaxMigDeviceCount(h) == 0


def test_h100_processes_come_back_as_pynvml_builds_them():
    nvml = started(fleets.h100_node(1))
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    procs = nvml.nvmlDeviceGetComputeRunningProcesses(h)  # query-compute-apps: 2566, 1542 and 15690 MiB
    assert all(type(p) is pynvml.nvmlFriendlyObject for p in procs)
    assert {p.pid: p.usedGpuMemory for p in procs} == {11327: 2566 * MIB, 11328: 1542 * MIB, 11345: 15690 * MIB}
    assert {(p.gpuInstanceId, p.computeInstanceId) for p in procs} == {(NA_ID, NA_ID)}  # MIG off
    assert [vars(p) for p in nvml.nvmlDeviceGetComputeRunningProcesses_v2(h)] == [vars(p) for p in procs]

    samples = nvml.nvmlDeviceGetProcessUtilization(h, 0)  # pmon: only gpu_burn has a sample, "99 10"
    assert type(samples) is list and all(type(s) is pynvml.c_nvmlProcessUtilizationSample_t for s in samples)
    assert [(s.pid, s.smUtil, s.memUtil) for s in samples] == [(11345, 99, 10)]
    with pytest.raises(pynvml.NVMLError_NotFound):  # nothing newer than the sample just read
        nvml.nvmlDeviceGetProcessUtilization(h, samples[0].timeStamp)

    nvml.devices[0].processes[0].used_memory_bytes = None  # what WDDM reports: NVML_VALUE_NOT_AVAILABLE
    assert nvml.nvmlDeviceGetComputeRunningProcesses(h)[0].usedGpuMemory is None


def test_values_change_between_scrapes():
    nvml = started(fleets.h100_node(1))
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    before = nvml.nvmlDeviceGetTotalEnergyConsumption(h)
    last_sample = nvml.nvmlDeviceGetProcessUtilization(h, 0)[0].timeStamp
    nvml.devices[0].util_gpu = 90
    nvml.advance(10)
    assert nvml.nvmlDeviceGetUtilizationRates(h).gpu == 90
    assert nvml.nvmlDeviceGetTotalEnergyConsumption(h) - before == 631_950 * 10  # mW x s = mJ
    assert nvml.nvmlDeviceGetProcessUtilization(h, last_sample)[0].timeStamp == last_sample + 10_000_000


def test_an_h100_node_has_eight_distinct_gpus():
    nvml = started(fleets.h100_node())
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    uuids = [nvml.nvmlDeviceGetUUID(h) for h in handles]
    assert len(set(uuids)) == 8 and len({nvml.nvmlDeviceGetSerial(h) for h in handles}) == 8
    assert not any(u.startswith("GPU-00000000") for u in uuids)  # the capture's mask is replaced
    assert [nvml.nvmlDeviceGetPciInfo(h).busId for h in handles] == [f"00000000:00:{d:02X}.0" for d in range(9, 17)]
    assert [nvml.nvmlDeviceGetIndex(nvml.nvmlDeviceGetHandleByUUID(u)) for u in uuids] == list(range(8))
    assert nvml.nvmlDeviceGetIndex(nvml.nvmlDeviceGetHandleByUUID(uuids[3].encode())) == 3  # bytes too
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetHandleByUUID("GPU-not-here")
    assert fleets.h100_node(2).devices[1].uuid == uuids[1]  # deterministic


# ---- fault injection ----


def test_errors_are_the_real_pynvml_classes():
    nvml = started(fleets.h100_node(1))
    nvml.lose(0)
    with pytest.raises(pynvml.NVMLError) as caught:
        nvml.nvmlDeviceGetHandleByIndex(0)
    assert type(caught.value) is pynvml.NVMLError_GpuIsLost
    assert caught.value == pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST) and str(caught.value) == "GPU is lost"


def test_a_lost_gpu_fails_alone_after_the_given_number_of_calls():
    nvml = started(fleets.h100_node(3))
    h1 = nvml.nvmlDeviceGetHandleByIndex(1)
    nvml.lose(1, after_calls=2)
    assert nvml.nvmlDeviceGetPowerUsage(h1) == 631_950
    assert nvml.nvmlDeviceGetTemperature(h1, pynvml.NVML_TEMPERATURE_GPU) == 59
    for call in (lambda: nvml.nvmlDeviceGetUUID(h1), lambda: nvml.nvmlDeviceGetHandleByIndex(1)):
        with pytest.raises(pynvml.NVMLError_GpuIsLost):
            call()
    assert nvml.nvmlDeviceGetCount() == 3
    assert [nvml.nvmlDeviceGetPowerUsage(nvml.nvmlDeviceGetHandleByIndex(i)) for i in (0, 2)] == [631_950] * 2


def test_losing_a_mig_gpu_loses_its_mig_devices():
    nvml = started(fleets.h100_mig())
    mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(nvml.nvmlDeviceGetHandleByIndex(0), 0)
    nvml.lose(0)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nvml.nvmlDeviceGetMemoryInfo(mig)


def test_not_supported_covers_the_whole_family_on_one_gpu():
    nvml = started(fleets.h100_node(2))
    h0, h1 = (nvml.nvmlDeviceGetHandleByIndex(i) for i in (0, 1))
    nvml.not_supported(0, "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetComputeRunningProcesses_v3")
    for call in (nvml.nvmlDeviceGetTotalEnergyConsumption, nvml.nvmlDeviceGetComputeRunningProcesses):
        with pytest.raises(pynvml.NVMLError_NotSupported):
            call(h0)
    assert nvml.nvmlDeviceGetTotalEnergyConsumption(h1) == 631_950 * 3600  # one hour at the captured draw
    with pytest.raises(ValueError, match="nvmlDeviceGetFanSpeed"):
        nvml.not_supported(0, "nvmlDeviceGetFanSpeed")


def test_fail_init_raises_the_given_error_every_time_or_a_number_of_times():
    nvml = fleets.h100_node(1)
    nvml.fail_init(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    for _ in range(2):
        with pytest.raises(pynvml.NVMLError_LibraryNotFound):
            nvml.nvmlInit()
    nvml.fail_init(pynvml.NVML_ERROR_DRIVER_NOT_LOADED, times=1)
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        nvml.nvmlInitWithFlags(0)
    nvml.nvmlInit()
    assert nvml.nvmlDeviceGetCount() == 1 and nvml.calls["nvmlInit"] == 3


def test_handles_are_opaque_and_belong_to_their_fake():
    a, b = started(fleets.h100_node(1)), started(fleets.h100_node(1))
    h = a.nvmlDeviceGetHandleByIndex(0)
    for bad in (b.nvmlDeviceGetHandleByIndex(0), None, 0):
        with pytest.raises(pynvml.NVMLError_InvalidArgument):
            a.nvmlDeviceGetName(bad)
    assert a.nvmlDeviceGetName(h) == "NVIDIA H100 80GB HBM3"


# ---- events ----


def test_xid_events_arrive_then_the_wait_times_out():
    nvml = started(fleets.h100_node(2))
    events = nvml.nvmlEventSetCreate()
    nvml.nvmlDeviceRegisterEvents(nvml.nvmlDeviceGetHandleByIndex(1), pynvml.nvmlEventTypeXidCriticalError, events)
    assert nvml.queue_xid(0, 48) == 0  # GPU 0 is not registered: nobody hears it
    assert nvml.queue_xid(1, 79) == 1
    event = nvml.nvmlEventSetWait(events, 0)
    assert type(event) is pynvml.c_nvmlEventData_t
    assert (event.eventType, event.eventData) == (pynvml.nvmlEventTypeXidCriticalError, 79)
    assert (event.gpuInstanceId, event.computeInstanceId) == (NA_ID, NA_ID)
    assert nvml.nvmlDeviceGetIndex(event.device) == 1
    with pytest.raises(pynvml.NVMLError_Timeout):
        nvml.nvmlEventSetWait_v2(events, 0)
    nvml.nvmlEventSetFree(events)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlEventSetWait(events, 0)


def test_a_mig_xid_carries_its_instance_and_wakes_a_blocked_waiter():
    nvml = started(fleets.h100_mig())
    events = nvml.nvmlEventSetCreate()
    parent = nvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported):  # Clock events: not in this board's supported set
        nvml.nvmlDeviceRegisterEvents(parent, pynvml.nvmlEventTypeClock, events)
    nvml.nvmlDeviceRegisterEvents(parent, pynvml.nvmlEventTypeXidCriticalError, events)
    timer = threading.Timer(0.05, nvml.queue_xid, (0, 31), {"gpu_instance_id": 2, "compute_instance_id": 0})
    timer.start()
    started_at = time.monotonic()
    event = nvml.nvmlEventSetWait(events, 5000)
    timer.join()
    assert (event.eventData, event.gpuInstanceId, event.computeInstanceId) == (31, 2, 0)
    assert time.monotonic() - started_at < 5  # woken by the Xid, not by the timeout
