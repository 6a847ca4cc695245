"""The ready-made fleets against the captures they come from: MIG layouts, other boards, the capture reader.

Expected numbers are quoted from tests/fixtures/nvml/ next to each assertion.
"""

from __future__ import annotations

import ctypes

import pynvml
import pytest

from fakes import fleets
from fakes.captures import FIXTURES, H100, load_exporter_capture, sections
from fakes.fake_pynvml import FakeNvml

MIB = 2**20


def started(nvml: FakeNvml) -> FakeNvml:
    nvml.nvmlInit()
    return nvml


def mig_handles(nvml: FakeNvml, parent) -> list:
    """What a collector does: walk every slot up to the maximum, skipping empty ones."""
    handles = []
    for i in range(nvml.nvmlDeviceGetMaxMigDeviceCount(parent)):
        try:
            handles.append(nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, i))
        except pynvml.NVMLError_NotFound:
            continue
    return handles


# ---- MIG ----


def test_h100_mig_enumerates_the_captured_profiles():
    nvml = started(fleets.h100_mig())
    parent = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceGetMigMode(parent) == [1, 1] and nvml.nvmlDeviceGetMaxMigDeviceCount(parent) == 7
    migs = mig_handles(nvml, parent)
    names = [nvml.nvmlDeviceGetName(m) for m in migs]  # nvidia-smi -L: "MIG 3g.40gb Device 0" ...
    assert names == [f"NVIDIA H100 80GB HBM3 MIG {p}" for p in ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb")]
    assert [nvml.nvmlDeviceGetGpuInstanceId(m) for m in migs] == [2, 3, 9, 10]
    assert [nvml.nvmlDeviceGetComputeInstanceId(m) for m in migs] == [0, 0, 0, 0]
    attrs = [nvml.nvmlDeviceGetAttributes(m) for m in migs]
    assert all(type(a) is pynvml.c_nvmlDeviceAttributes for a in attrs)
    assert [(a.gpuInstanceSliceCount, a.multiprocessorCount, a.memorySizeMB) for a in attrs] == [
        (3, 60, 40448),
        (2, 32, 20096),
        (1, 16, 9984),
        (1, 16, 9984),
    ]
    mem = nvml.nvmlDeviceGetMemoryInfo(migs[0], version=pynvml.nvmlMemory_v2)  # "11091MiB / 40448MiB"
    assert (mem.total, mem.used, mem.reserved) == (40448 * MIB, 11091 * MIB, 0)
    flag = nvml.nvmlDeviceIsMigDeviceHandle(migs[0])
    assert type(flag) is ctypes.c_uint and flag.value == 1 and nvml.nvmlDeviceIsMigDeviceHandle(parent).value == 0
    back = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(migs[2])
    assert nvml.nvmlDeviceGetUUID(back) == nvml.nvmlDeviceGetUUID(parent)
    mig_uuid = nvml.nvmlDeviceGetUUID(migs[1])
    assert (
        mig_uuid.startswith("MIG-") and nvml.nvmlDeviceGetGpuInstanceId(nvml.nvmlDeviceGetHandleByUUID(mig_uuid)) == 3
    )
    with pytest.raises(pynvml.NVMLError_NotFound):  # slots 4-6 are empty
        nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, 4)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, 7)


def test_mig_processes_utilization_and_board_readings():
    nvml = started(fleets.h100_mig())
    parent = nvml.nvmlDeviceGetHandleByIndex(0)
    migs = mig_handles(nvml, parent)
    on_gi2 = nvml.nvmlDeviceGetComputeRunningProcesses(migs[0])  # -q: all three on GI 2 / CI 0
    assert {(p.pid, p.gpuInstanceId, p.computeInstanceId) for p in on_gi2} == {
        (21180, 2, 0),
        (21181, 2, 0),
        (21198, 2, 0),
    }
    assert [nvml.nvmlDeviceGetComputeRunningProcesses(m) for m in migs[1:]] == [[], [], []]
    assert sorted(p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(parent)) == [21180, 21181, 21198]
    with pytest.raises(pynvml.NVMLError_NotSupported):  # utilization.gpu "[N/A]" in MIG mode
        nvml.nvmlDeviceGetUtilizationRates(parent)
    with pytest.raises(pynvml.NVMLError_NotSupported):  # board readings come from the parent handle
        nvml.nvmlDeviceGetPowerUsage(migs[0])
    assert nvml.nvmlDeviceGetPowerUsage(parent) == 433_780  # "433.78 W"
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetAttributes(parent)  # NVML: "currently only supports MIG device handles"
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetGpuInstanceId(parent)


def test_h200_mig_splits_one_gpu_instance_into_two_compute_instances():
    nvml = started(fleets.h200_mig())
    migs = mig_handles(nvml, nvml.nvmlDeviceGetHandleByIndex(0))
    attrs = [nvml.nvmlDeviceGetAttributes(m) for m in migs]
    assert [nvml.nvmlDeviceGetName(m).split(" MIG ")[1] for m in migs] == [
        "1c.3g.71gb",
        "2c.3g.71gb",
        "2g.35gb",
        "1g.18gb",
        "1g.18gb",
    ]
    assert [(a.gpuInstanceSliceCount, a.computeInstanceSliceCount) for a in attrs] == [
        (3, 1),
        (3, 2),
        (2, 2),
        (1, 1),
        (1, 1),
    ]
    assert [(nvml.nvmlDeviceGetGpuInstanceId(m), nvml.nvmlDeviceGetComputeInstanceId(m)) for m in migs[:2]] == [
        (2, 0),
        (2, 1),
    ]
    # The H200-MIG --query-compute-apps is empty; the -q text puts the load on GI 2 / CI 1.
    assert nvml.nvmlDeviceGetComputeRunningProcesses(migs[0]) == []
    assert sorted(p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(migs[1])) == [12249, 12250, 12267]


def test_a100_mig_from_the_xml():
    nvml = started(fleets.a100_mig())
    parent = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceGetUUID(parent) == "GPU-513536b6-7d19-9063-b049-1e69664bb298"  # real, unmasked
    migs = mig_handles(nvml, parent)
    assert {nvml.nvmlDeviceGetName(m) for m in migs} == {"NVIDIA A100-SXM4-80GB MIG 1g.20gb"}
    assert [nvml.nvmlDeviceGetGpuInstanceId(m) for m in migs] == [3, 4, 5, 6]
    assert {(a.multiprocessorCount, a.memorySizeMB) for a in map(nvml.nvmlDeviceGetAttributes, migs)} == {(14, 19968)}
    assert nvml.nvmlDeviceGetPowerUsage(parent) == 67_030 and nvml.nvmlSystemGetDriverVersion() == "535.54.03"


# ---- other boards ----


def test_t4_from_xml_lists_compute_processes_only():
    nvml = started(fleets.t4())
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceGetName(h) == "Tesla T4" and nvml.nvmlSystemGetNVMLVersion() == "11.515.105.01"
    procs = nvml.nvmlDeviceGetComputeRunningProcesses(h)  # Xorg is type G
    assert [(p.pid, p.usedGpuMemory) for p in procs] == [(5762, 1005 * MIB)]
    assert nvml.nvmlDeviceGetRetiredPages(h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS) == []
    assert (nvml.nvmlDeviceGetPowerUsage(h), nvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)) == (26_780, 1590)
    for call in (nvml.nvmlDeviceGetRemappedRows, nvml.nvmlDeviceGetMigMode):
        with pytest.raises(pynvml.NVMLError_NotSupported):
            call(h)
    with pytest.raises(pynvml.NVMLError_NotFound):  # no pmon in an XML file: no samples
        nvml.nvmlDeviceGetProcessUtilization(h, 0)


def test_l40s_has_no_mig():
    nvml = started(fleets.l40s())
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceGetMemoryInfo(h).total == 46068 * MIB and nvml.nvmlDeviceGetPowerUsage(h) == 110_230
    assert nvml.nvmlDeviceGetMaxMigDeviceCount(h) == 0
    with pytest.raises(pynvml.NVMLError_NotSupported):  # mig.mode.current "[N/A]"
        nvml.nvmlDeviceGetMigMode(h)


# ---- the capture reader ----


def test_the_reader_finds_both_states_and_replaces_masked_ids_deterministically():
    secs = sections((FIXTURES / H100).read_text())
    assert "load :: query-gpu (csv, what the exporter parses)" in secs and "idle :: pmon (per-process monitor)" in secs
    idle = load_exporter_capture(H100, state="idle").gpus[0]  # "69.85 W", "81559 MiB, 479 MiB, 0 MiB", "0 %, 0 %"
    assert (idle.power_mw, idle.memory_used_bytes, idle.util_gpu, idle.processes) == (69_850, 0, 0, [])
    load = load_exporter_capture(H100).gpus[0]
    assert load.uuid == idle.uuid != "GPU-00000000-0000-0000-0000-000000000000"
    assert load.serial == idle.serial != "0000000000000"
