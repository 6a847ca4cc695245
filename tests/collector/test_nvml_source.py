"""The nvml source against the fake pynvml (tests/fakes), scripted from real nvidia-smi captures. Expected
numbers are the capture's own (nvidia_gpu_exporter__...h100-80gb-hbm3__590.48.01.txt, `load` state)."""

import pynvml
import pytest

from gpuledger.collector.nvml_source import NvmlSource
from gpuledger.collector.sources import open_nvml
from gpuledger.config import CollectorConfig, Config
from gpuledger.errors import SourceError

from fakes import fleets

MIB = 1 << 20
T = 1_800_000_000.0
CFG = Config(cluster="c", collector=CollectorConfig(node="node-a", process_interval_s=60))


def scrape(src, now=T):
    out = {}
    for b in src.collect(now):
        cols = b.columns
        out[b.table] = [dict(zip(cols, vals, strict=True)) for vals in zip(*cols.values(), strict=True)]
    return out


def test_h100_values_and_units_from_the_capture():
    nvml = fleets.h100_node(8)
    src = NvmlSource(CFG, nvml=nvml)
    rows = scrape(src)
    gpus = rows["gpu_samples"]
    assert [r["gpu_index"] for r in gpus] == list(range(8)) and len({r["gpu_uuid"] for r in gpus}) == 8
    g = gpus[0]
    assert g["model"] == "NVIDIA H100 80GB HBM3" and g["node"] == "node-a" and g["source"] == "nvml"
    assert g["pci_bus_id"] == "00000000:00:09.0" and g["driver_version"] == "590.48.01"  # the capture's bus and driver
    assert g["mem_total_bytes"] == 81559 * MIB  # memory.total [MiB] in the capture
    assert g["mem_used_bytes"] == 19818 * MIB and g["mem_reserved_bytes"] == 479 * MIB  # v2: used excludes reserved
    assert g["power_w"] == pytest.approx(631.95)  # NVML says 631950 mW
    assert g["power_limit_w"] == 700.0 and g["temp_c"] == 59.0
    assert (g["util_gpu_pct"], g["util_mem_pct"]) == (100.0, 11.0)
    assert (g["sm_clock_mhz"], g["mem_clock_mhz"]) == (1980, 2619)
    assert g["energy_j"] == pytest.approx(nvml.devices[0].energy_mj / 1000)
    assert (g["ecc_corrected_total"], g["ecc_uncorrected_total"]) == (0, 0)
    procs = [p for p in rows["gpu_processes"] if p["gpu_uuid"] == g["gpu_uuid"]]
    assert sorted((p["pid"], p["used_mem_bytes"]) for p in procs) == sorted(
        (p.pid, p.used_memory_bytes) for p in nvml.devices[0].processes
    )
    (node,) = rows["nodes"]
    assert (node["gpu_count"], node["gpu_model"]) == (8, "NVIDIA H100 80GB HBM3")
    src.close()


def test_nvml_is_initialised_once_per_source():
    nvml = fleets.h100_node(2)
    src = NvmlSource(CFG, nvml=nvml)
    for k in range(3):
        scrape(src, T + k)
    assert nvml.calls["nvmlInit"] + nvml.calls["nvmlInitWithFlags"] == 1


def test_not_supported_fields_are_null_never_zero():
    nvml = fleets.h100_node(2)
    nvml.not_supported(1, "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetPowerUsage")
    g = scrape(NvmlSource(CFG, nvml=nvml))["gpu_samples"]
    assert g[1]["energy_j"] is None and g[1]["power_w"] is None
    assert g[0]["energy_j"] is not None and g[1]["temp_c"] == 59.0


def test_a_lost_gpu_is_one_health_event_and_the_others_keep_going():
    nvml = fleets.h100_node(4)
    src = NvmlSource(CFG, nvml=nvml)
    scrape(src, T)
    nvml.lose(2)
    first = scrape(src, T + 10)
    assert [r["gpu_index"] for r in first["gpu_samples"]] == [0, 1, 3]
    (ev,) = first["health_events"]
    assert ev["kind"] == "lost" and ev["gpu_uuid"] == nvml.devices[2].uuid and "GpuIsLost" in ev["detail"]
    second = scrape(src, T + 20)
    assert [r["gpu_index"] for r in second["gpu_samples"]] == [0, 1, 3]
    assert "health_events" not in second  # reported once, not every scrape


def test_xid_events_arrive_as_health_events():
    nvml = fleets.h100_node(2)
    src = NvmlSource(CFG, nvml=nvml)
    nvml.queue_xid(1, 79)
    nvml.queue_xid(0, 48)
    ev = scrape(src)["health_events"]
    assert sorted((e["gpu_uuid"], e["code"]) for e in ev) == sorted(
        [(nvml.devices[1].uuid, 79), (nvml.devices[0].uuid, 48)]
    )
    assert all(e["kind"] == "xid" for e in ev)
    assert "health_events" not in scrape(src, T + 1)  # drained


def test_mig_instances_get_their_own_rows_and_processes():
    nvml = fleets.h100_mig()
    rows = scrape(NvmlSource(CFG, nvml=nvml))
    parent = next(r for r in rows["gpu_samples"] if r["parent_gpu_uuid"] is None)
    migs = [r for r in rows["gpu_samples"] if r["parent_gpu_uuid"] == parent["gpu_uuid"]]
    assert sorted(r["mig_profile"] for r in migs) == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    assert all(r["gpu_uuid"].startswith("MIG-") for r in migs)
    big = next(r for r in migs if r["mig_profile"] == "3g.40gb")
    assert big["mem_total_bytes"] == 42412802048
    assert parent["util_gpu_pct"] is None  # NVML has no utilization for a GPU in MIG mode
    on_big = [p for p in rows["gpu_processes"] if p["gpu_uuid"] == big["gpu_uuid"]]
    assert sorted(p["pid"] for p in on_big) == [21180, 21181, 21198]  # the load ran on GI 2 (3g.40gb)


def test_processes_are_attributed_to_pods_through_proc_cgroup(tmp_path):
    nvml = fleets.h100_node(1)
    pid = nvml.devices[0].processes[0].pid
    uid = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
    cid = "f" * 64
    (tmp_path / str(pid)).mkdir()
    # cgroup v2, systemd driver, containerd: the form kubelet uses on current distributions
    (tmp_path / str(pid) / "cgroup").write_text(
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid.replace('-', '_')}.slice/"
        f"cri-containerd-{cid}.scope\n"
    )
    procs = scrape(NvmlSource(CFG, nvml=nvml, proc_root=tmp_path))["gpu_processes"]
    mine = next(p for p in procs if p["pid"] == pid)
    assert (mine["pod_uid"], mine["container"]) == (uid, cid)
    others = [p for p in procs if p["pid"] != pid]
    assert others and all(p["pod_uid"] is None for p in others)  # no cgroup file: not attributable


def test_processes_are_sampled_at_their_own_interval():
    src = NvmlSource(CFG, nvml=fleets.h100_node(1))
    assert "gpu_processes" in scrape(src, T)
    assert "gpu_processes" not in scrape(src, T + 10)  # process_interval_s = 60
    assert "gpu_processes" in scrape(src, T + 61)


def test_library_not_found_is_a_clear_error_and_up_falls_back():
    nvml = fleets.t4()
    nvml.fail_init(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    with pytest.raises(SourceError, match="nvml: NVML could not start \\(NVMLError_LibraryNotFound"):
        NvmlSource(CFG, nvml=nvml)
    nvml = fleets.t4()
    nvml.fail_init(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    src, why = open_nvml(CFG, nvml)
    assert src is None and "LibraryNotFound" in why and "no usable NVIDIA driver" in why
    nvml = fleets.h100_node(2)
    src, why = open_nvml(CFG, nvml)
    assert src is not None and why == "NVML reports 2 GPU(s), driver 590.48.01"
    assert nvml.calls["nvmlInit"] + nvml.calls["nvmlInitWithFlags"] == 1  # and the source keeps it
    src.close()


@pytest.mark.parametrize(
    "text,pod,container",
    [
        # cgroup v1, cgroupfs driver, docker (kubelet's pod<uid>/<container id> layout)
        (
            "12:memory:/kubepods/burstable/pod0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d/" + "a" * 64 + "\n"
            "11:cpuset:/kubepods/burstable/pod0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d/" + "a" * 64 + "\n",
            "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
            "a" * 64,
        ),
        # cgroup v2, systemd driver, CRI-O, a guaranteed pod (no QoS slice)
        (
            "0::/kubepods.slice/kubepods-pod0a1b2c3d_4e5f_4a6b_8c7d_9e0f1a2b3c4d.slice/crio-" + "b" * 64 + ".scope\n",
            "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
            "b" * 64,
        ),
        ("0::/user.slice/user-1000.slice/session-3.scope\n", None, None),  # a login shell: no pod
    ],
)
def test_cgroup_paths(text, pod, container):
    from gpuledger.collector.nvml.cgroups import parse_cgroup

    ref = parse_cgroup(text)
    assert (ref.pod_uid, ref.container_id) == (pod, container)


ALL_CODES = sorted({v for k, v in vars(pynvml).items() if k.startswith("NVML_ERROR_") and isinstance(v, int)})


@pytest.mark.parametrize("code", ALL_CODES)
def test_every_nvml_error_code_is_handled(code):
    """Whatever NVML raises for one GPU, the scrape does not crash and the other GPU's row is written."""
    nvml = fleets.h100_node(2)
    src = NvmlSource(CFG, nvml=nvml)
    real = nvml.nvmlDeviceGetTemperature
    bad = nvml.devices[1].uuid

    def temperature(handle, sensor):
        if nvml.nvmlDeviceGetUUID(handle) == bad:
            raise pynvml.NVMLError(code)
        return real(handle, sensor)

    nvml.nvmlDeviceGetTemperature = temperature
    got = scrape(src)
    by_uuid = {r["gpu_uuid"]: r for r in got["gpu_samples"]}
    assert by_uuid[nvml.devices[0].uuid]["temp_c"] == 59.0
    events = got.get("health_events", [])
    if bad in by_uuid:  # a "this field is missing" error: null, never zero
        assert by_uuid[bad]["temp_c"] is None and not events
    else:
        (ev,) = events
        assert ev["gpu_uuid"] == bad and ev["kind"] in ("lost", "scrape_error")
