"""Huawei Ascend npu-exporter pages -> rows, by the Ascend table (collector/vendors/ascend.py). Each test names the
kind of fixture it rests on (tests/fixtures/accelerators/SOURCES.md): the REAL 8 x 910A capture, the GOLDEN pages
built by Huawei from MOCK values (all 0, vdie_id ""), or SYNTHETIC pages built here on the golden page's label set
where no capture exists (values, pods, vNPUs). Values are checked by hand, the conversion in a comment."""

from pathlib import Path

import pytest

from gpuledger.collector.dcgm.exposition import parse, parse_reference
from gpuledger.collector.vendors.ascend import ASCEND
from gpuledger.collector.vendors.rows import VendorRows

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "accelerators"
TS = 1_800_000_000_000_000
REAL = FIX / "ascend-npu-exporter-910a-x8-docs-capture.prom"
# The real capture's chip 0 and 1 (vdie_id, PCIe address), reused by the synthetic pages
CHIP0 = ("185011D4-21104518-A0C4ED94-14CC040A-56102003", "0000:61:00.0")
CHIP1 = ("185011D4-21E04718-93B2ED94-14CC040A-BF102003", "0000:DB:00.0")


def read(text, via_prometheus=False):
    page, errors = VendorRows(ASCEND, "c", via_prometheus=via_prometheus).rows(
        parse(text), TS, default_node="npu-node", where=lambda i: f"sample {i}"
    )
    return {r["gpu_uuid"]: r for r in page.samples}, page.fields, errors


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("ascend-*.prom")))
def test_the_fast_parser_reads_every_ascend_fixture_as_prometheus_client_does(name):
    # REAL and GOLDEN pages, with the exporter's per-sample ms timestamps
    text = (FIX / name).read_text()
    fast = parse(text)
    assert fast == parse_reference(text)
    assert [s.timestamp for s in fast if s.name == "npu_chip_info_aicore_current_freq"][:1] in (
        [],
        [1723621883.587],  # the real capture's first chip, 2024-08-14 UTC
        [1606402.0],  # the golden files' mock 1606402000 ms
    )


def test_real_910a_capture_is_eight_chips_named_by_vdie_id():
    # REAL (ascend-npu-exporter-910a-x8-docs-capture.prom): 8 chips, the AI core clock, one bandwidth line
    rows, fields, errors = read(REAL.read_text())
    assert errors == []
    assert len(rows) == 8
    assert rows[CHIP0[0]] == {
        "ts": TS,  # the scrape's time; the exporter's own stamp is when it read the chip
        "cluster": "c",
        "node": "npu-node",  # no host label on the page: the target's
        "gpu_uuid": CHIP0[0],  # vdie_id, "the UUID of the NPU"
        "gpu_index": 0,  # id
        "parent_gpu_uuid": None,
        "partition_share": None,
        "mig_profile": None,
        "model": "910A-Ascend-V1",
        "pci_bus_id": "0000:61:00.0",
        "driver_version": None,
        "vendor": "huawei",
        "source": "ascend",
        "pod": None,  # pod_name="" : no pod holds it
        "namespace": None,
        "container": None,
        "sm_clock_mhz": 1000,  # npu_chip_info_aicore_current_freq 1000 MHz
    }
    assert sorted(r["gpu_index"] for r in rows.values()) == list(range(8))
    assert rows["185011DC-21F02B18-C4B66D94-14CC040A-57102003"]["pci_bus_id"] == "0000:DA:00.0"  # chip 5
    # machine_npu_nums is the node's; the bandwidth (MB/s) has no column: gpu_fields
    assert [(f["gpu_uuid"], f["field"], f["value"]) for f in fields] == [(CHIP0[0], "npu_chip_info_bandwidth_rx", 0.0)]


def test_golden_zero_npu_page_has_no_rows_and_no_error():
    # GOLDEN, mock (ascend-npu-exporter-golden-mock-0npu.prom): machine_npu_nums 0 and the version info only
    assert read((FIX / "ascend-npu-exporter-golden-mock-0npu.prom").read_text()) == ({}, [], [])


@pytest.mark.parametrize(
    "name", ["ascend-npu-exporter-golden-mock-8npu-podlabels.prom", "ascend-npu-exporter-v5-golden-mock-8npu.prom"]
)
def test_golden_pages_without_vdie_id_skip_each_chip_with_one_error_naming_its_line(name):
    # GOLDEN, mock: Huawei's test pages leave vdie_id "" on all 8 chips (16 families each), so no chip has a UUID
    rows, fields, errors = read((FIX / name).read_text())
    assert rows == {} and fields == []
    assert [e["detail"] for e in errors] == [
        # sample 0 is machine_npu_nums; chip i's first line is the first family's (aicore_current_freq), sample 1 + i
        f'ascend: device id="{i}" skipped: no vdie_id label (the NPU\'s UUID) (sample {1 + i})'
        for i in range(8)
    ]
    assert {(e["kind"], e["source"], e["node"]) for e in errors} == {("scrape_error", "ascend", "npu-node")}


def labels(chip, pod="", namespace="", container=""):
    """The golden page's 7-label set (mind-cluster CardLabel), with the real capture's chip identities."""
    return (
        f'container_name="{container}",id="{chip}",model_name="910B3-Ascend-V1",namespace="{namespace}",'
        f'pcie_bus_info="{(CHIP0, CHIP1)[chip][1]}",pod_name="{pod}",vdie_id="{(CHIP0, CHIP1)[chip][0]}"'
    )


def page(families, ts=" 1800000000000"):
    out = []
    for name, lines in families:
        out.append(f"# HELP {name} x\n# TYPE {name} gauge\n")
        out += [f"{name}{{{lab}}} {v}{ts}\n" for lab, v in lines]
    return "".join(out)


def test_ascend_units():
    # SYNTHETIC on the golden label set: chip 0 held by a pod, chip 1 with a failed power read
    held = labels(0, "llm-0", "infer", "server")
    free = labels(1)
    text = page(
        [
            ("npu_chip_info_utilization", [(held, 63), (free, 0)]),  # AICore %
            ("npu_chip_info_hbm_used_memory", [(held, 30720), (free, 3)]),  # MB = MiB: 30720 x 2^20
            ("npu_chip_info_hbm_total_memory", [(held, 65536), (free, 65536)]),  # 65536 x 2^20 = 64 GiB
            ("npu_chip_info_used_memory", [(held, 1234)]),  # DDR: loses to HBM, kept in gpu_fields
            ("npu_chip_info_power", [(held, 312.5), (free, -1)]),  # W; -1 is a failed read (FailedMetricValue)
            ("npu_chip_info_temperature", [(held, 47), (free, 39)]),  # degrees C
            ("npu_chip_info_health_status", [(held, 1), (free, -1)]),  # -1 = unknown: a field, kept as reported
        ]
    )
    assert parse(text) == parse_reference(text)
    rows, fields, errors = read(text)
    assert errors == []
    a, b = rows[CHIP0[0]], rows[CHIP1[0]]
    assert (a["util_gpu_pct"], a["mem_used_bytes"], a["mem_total_bytes"]) == (63.0, 30720 * 2**20, 64 * 2**30)
    assert (a["power_w"], a["temp_c"], a.get("energy_j")) == (312.5, 47.0, None)  # no energy metric exists
    assert (a["pod"], a["namespace"], a["container"]) == ("llm-0", "infer", "server")
    assert (b["mem_used_bytes"], b["power_w"], b["pod"]) == (3 * 2**20, None, None)
    assert sorted((f["gpu_uuid"] == CHIP0[0], f["field"], f["value"]) for f in fields) == [
        (False, "npu_chip_info_health_status", -1.0),
        (True, "npu_chip_info_health_status", 1.0),
        (True, "npu_chip_info_used_memory", 1234.0),
    ]


def test_several_pods_on_one_chip_is_no_pod_and_through_prometheus_the_namespace_is_exported_namespace():
    # SYNTHETIC on the golden label set: `not_displayed_for_multi_pod` (several pods share the chip) names none
    multi = "not_displayed_for_multi_pod"
    rows, _, _ = read(page([("npu_chip_info_utilization", [(labels(0, multi, multi, multi), 90)])]))
    assert (rows[CHIP0[0]]["pod"], rows[CHIP0[0]]["namespace"]) == (None, None)
    # As Prometheus returns the series (no timestamps): the exporter's namespace collided with the target's
    series = (
        f'npu_chip_info_utilization{{container_name="server",exported_namespace="infer",id="0",instance='
        f'"10.0.3.7:8082",job="npu-exporter",model_name="910B3-Ascend-V1",namespace="kube-system",pcie_bus_info='
        f'"{CHIP0[1]}",pod_name="llm-0",vdie_id="{CHIP0[0]}"}} 90\n'
    )
    rows, _, _ = read(series, via_prometheus=True)
    r = rows[CHIP0[0]]
    assert (r["pod"], r["namespace"], r["container"], r["node"]) == ("llm-0", "infer", "server", "10.0.3.7")


def vnpu(chip, vdev, cores, pod):
    # The vNPU label set (V:44-63): v_dev_id for vdie_id, aicore_count for pcie_bus_info, is_virtual
    return (
        f'aicore_count="{cores}",container_name="c",id="{chip}",is_virtual="true",model_name="310P3-Ascend-V1",'
        f'namespace="ns",pod_name="{pod}",v_dev_id="{vdev}"'
    )


def test_vnpus_are_children_of_their_chip_with_their_share_of_its_ai_cores():
    # SYNTHETIC: a 310P (the one chip with vNPU metrics) cut into vir04 + vir02 + vir02 for three pods
    chip = labels(0).replace("910B3-Ascend-V1", "310P3-Ascend-V1")
    text = page(
        [
            ("npu_chip_info_utilization", [(chip, 55)]),
            (
                "vnpu_pod_aicore_utilization",
                [
                    (vnpu(0, 100, "4.0", "a"), 80),
                    (vnpu(0, 101, "2.0", "b"), 20),
                    (vnpu(7, 102, "2.0", "c"), 5),  # chip 7 is not on the page
                ],
            ),
            ("vnpu_pod_total_memory", [(vnpu(0, 100, "4.0", "a"), 12582912), (vnpu(0, 101, "2.0", "b"), 6291456)]),
            ("vnpu_pod_used_memory", [(vnpu(0, 100, "4.0", "a"), 1048576)]),
        ],
        ts="",  # no stamps on these lines: the row takes the scrape time either way
    )
    rows, _, errors = read(text)
    a, b = rows[f"{CHIP0[0]}/vnpu100"], rows[f"{CHIP0[0]}/vnpu101"]
    assert (a["parent_gpu_uuid"], a["partition_share"], a["mig_profile"], a["gpu_index"]) == (
        CHIP0[0],
        0.5,  # 4 of the 310P's 8 AI cores
        "vnpu-4.0c",
        0,
    )
    assert (a["util_gpu_pct"], a["mem_total_bytes"], a["mem_used_bytes"], a["pod"]) == (
        80.0,
        12 * 2**30,  # 12582912 KB x 2^10
        2**30,  # 1048576 KB
        "a",
    )
    assert (b["partition_share"], b["mem_total_bytes"], b["pod"]) == (0.25, 6 * 2**30, "b")
    assert rows[CHIP0[0]]["util_gpu_pct"] == 55.0 and rows[CHIP0[0]]["parent_gpu_uuid"] is None
    assert len(rows) == 3
    # The vNPU of chip 7 has no parent on the page: skipped, named by its line (sample 3: after the chip's and two)
    assert [e["detail"] for e in errors] == [
        "ascend: device vnpu102 of index 7 skipped: no device with index 7 on the page to be its parent (sample 3)"
    ]


@pytest.mark.parametrize(
    ("model", "cores", "share"),
    [
        # AI cores over the chip's (gpuledger.partitions.ascend_cores), each with one of its chip's templates
        ("310P3-Ascend-V1", 4, 4 / 8),  # vir04 of a 310P's 8
        ("910B3-Ascend-V1", 5, 5 / 20),  # vir05_1c_16g of a 910B3's 20: before the partition rules, None (the
        # collector knew only the 310P's cores)
        ("910A-Ascend-V1", 8, 8 / 32),  # vir08 of a 910's 32
        ("Atlas-Ascend-V1", 4, None),  # no chip named: its cores are not known, no share is claimed
    ],
)
def test_a_vnpus_share_is_its_ai_cores_over_its_chips(model, cores, share):
    # SYNTHETIC: one vNPU on chip 0, the chip and the vNPU of the same model
    text = page(
        [
            ("npu_chip_info_utilization", [(labels(0).replace("910B3-Ascend-V1", model), 55)]),
            ("vnpu_pod_aicore_utilization", [(vnpu(0, 100, str(cores), "a").replace("310P3-Ascend-V1", model), 80)]),
        ],
        ts="",
    )
    rows, _, errors = read(text)
    assert errors == []
    v = rows[f"{CHIP0[0]}/vnpu100"]
    assert (v["parent_gpu_uuid"], v["partition_share"], v["mig_profile"]) == (CHIP0[0], share, f"vnpu-{cores}c")
