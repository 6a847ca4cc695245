"""dcgm-exporter samples -> lake rows, on the real captures in tests/fixtures/dcgm (values checked by hand
against the capture lines)."""

import json
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuledger.collector.dcgm.fields import COLUMNS, FB_FREE, LABEL_FIELDS, LONG, MIB, XID, is_blank
from gpuledger.collector.dcgm.rows import RowBuilder

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "dcgm"
FIX = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"
DATA = FIX if FIX.is_dir() else SHARED
TS = 1_800_000_000_000_000


def samples(name):
    """Samples as (name, labels, value) from prometheus_client's own parser (the reference)."""
    text = (DATA / name).read_text()
    return [(s.name, s.labels, s.value) for fam in text_string_to_metric_families(text) for s in fam.samples]


def build(name, **kw):
    return RowBuilder("c", **kw).rows(samples(name), TS, default_node="fallback")


def test_full_default_scrape_l4():
    page = build("l4-aws-kops-gpu-operator-580.105.08.prom")
    (row,) = page.samples
    assert row["gpu_uuid"].startswith("GPU-") and row["gpu_index"] == 0 and row["model"] == "NVIDIA L4"
    assert row["node"] == "i-030791dc5a37cd257"  # the Hostname label of the capture
    assert row["power_w"] == pytest.approx(16.365)
    assert row["energy_j"] == pytest.approx(4742.776)  # 4742776 mJ
    assert (row["sm_clock_mhz"], row["mem_clock_mhz"], row["temp_c"]) == (210, 405, 31.0)
    assert row["mem_used_bytes"] == 0 and row["mem_reserved_bytes"] == 470 * MIB
    assert row["mem_total_bytes"] == (22563 + 0 + 470) * MIB  # free + used + reserved
    assert row["tensor_active_ratio"] == 0.0 and row["util_gpu_pct"] == 0.0
    assert row["pod"] is None  # no pod labels: unallocated
    assert "sm_active_ratio" not in row  # not in this scrape: null in the lake, never zero
    fields = {f["field"]: f["value"] for f in page.fields}
    assert fields["DCGM_FI_PROF_PCIE_TX_BYTES"] == 112603 and fields["DCGM_FI_DEV_VGPU_LICENSE_STATUS"] == 0
    assert fields["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] == 0.0 and "DCGM_FI_DEV_GPU_UTIL" not in fields
    assert page.events == []


def test_h100_node_with_one_pod():
    page = build("h100x8-eks-gpu-operator-1pod-a.prom")
    rows = {r["gpu_index"]: r for r in page.samples}
    assert sorted(rows) == list(range(8))
    held = rows[2]
    assert (held["pod"], held["namespace"], held["container"]) == (
        "vllm-agg-0-vllmdecodeworker-dkb9q",
        "dynamo-workload",
        "main",
    )
    assert all(rows[i]["pod"] is None for i in rows if i != 2)
    assert held["power_w"] == pytest.approx(110.786) and held["temp_c"] == 29.0
    assert rows[0]["gpu_uuid"] == "GPU-81d79b08-40a0-40ae-3fc5-82b8ff8b8138"
    assert rows[0]["node"] == "ip-100-64-147-149.ec2.internal"
    assert (rows[0]["pci_bus_id"], rows[0]["driver_version"]) == ("00000000:53:00.0", "580.105.08")
    assert "mem_used_bytes" not in rows[0]  # FB fields were not captured


def test_mig_instance_gets_its_own_row():
    page = build("a100-mig-1g.5gb-docs-2.x.prom")
    rows = {r["gpu_uuid"]: r for r in page.samples}
    parent = "GPU-34319582-d595-d1c7-d1d2-179bcfa61660"
    mig = rows[f"{parent}/gi13"]
    assert (mig["parent_gpu_uuid"], mig["mig_profile"]) == (parent, "1g.5gb")
    assert mig["tensor_active_ratio"] == pytest.approx(0.930433)
    # No GPU_UTIL per instance: its activity is GR_ENGINE_ACTIVE 0.995687 as a percent (kept in gpu_fields too).
    assert mig["util_gpu_pct"] == pytest.approx(99.5687)
    assert "util_gpu_pct" not in rows[parent]  # the parent's GR_ENGINE_ACTIVE stays a field: it is no MIG row
    assert rows[parent]["power_w"] == pytest.approx(409.692) and rows[parent]["mig_profile"] is None
    assert page.events == []  # XID_ERRORS is 0
    assert {f["field"] for f in page.fields if f["gpu_uuid"] == mig["gpu_uuid"]} == {
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
    }


def test_sentinels_are_null_and_empty_pod_labels_are_unallocated():
    page = build("readme-k8s-quickstart-doc-sample.prom")
    (row,) = page.samples
    assert row["pod"] is None and row["namespace"] is None  # pod="" means no pod
    assert row["node"] == "fallback"  # no Hostname label: the scrape target's node
    (mem_temp,) = [f for f in page.fields if f["field"] == "DCGM_FI_DEV_MEMORY_TEMP"]
    assert mem_temp["value"] is None  # 9223372036854775794 = DCGM_INT64_NOT_SUPPORTED


def test_vgpu_guest_has_no_power_or_temperature():
    (row,) = build("vgpu-grid-a100-40c-vks-580.126.09.prom").samples
    assert row["model"] == "GRID A100-40C"
    assert "power_w" not in row and "temp_c" not in row
    assert row["mem_total_bytes"] == (37739 + 0 + 3220) * MIB and row["sm_clock_mhz"] == 1410


def test_via_prometheus_the_exporters_own_pod_is_not_an_allocation():
    doc = json.loads((DATA / "h100x8-eks-prometheus-api-query-gpu-util.json").read_text())
    ss = [
        (r["metric"]["__name__"], {k: v for k, v in r["metric"].items() if k != "__name__"}, float(r["value"][1]))
        for r in doc["data"]["result"]
    ]
    page = RowBuilder("c", source="prometheus", via_prometheus=True).rows(ss, TS)
    pods = {r["gpu_index"]: r["pod"] for r in page.samples}
    # GPU 2's series carry the workload's pod (the exporter's labels won the scrape); the other seven carry the
    # exporter's own pod, nvidia-dcgm-exporter-9v4gs, which is no allocation.
    assert pods == {
        0: None,
        1: None,
        2: "vllm-agg-0-vllmdecodeworker-dkb9q",
        3: None,
        4: None,
        5: None,
        6: None,
        7: None,
    }
    # With honor_labels off, the workload's labels arrive as exported_*.
    name, labels, v = ss[0]
    labels = {**labels, "exported_pod": "train-0", "exported_namespace": "ml", "exported_container": "main"}
    (row,) = RowBuilder("c", via_prometheus=True).rows([(name, labels, v)], TS).samples
    assert (row["pod"], row["namespace"], row["container"]) == ("train-0", "ml", "main")


def test_xid_is_reported_once_when_it_appears_or_changes():
    labels = {"gpu": "0", "UUID": "GPU-x", "Hostname": "n1", "err_msg": "Graphics Engine Exception"}
    b = RowBuilder("c")
    seen = []
    for v in (0, 13, 13, 0, 79):
        seen += [(e["code"], e["detail"]) for e in b.rows([(XID, labels, float(v))], TS).events]
    assert seen == [(13, "Xid 13: Graphics Engine Exception"), (79, "Xid 79: Graphics Engine Exception")]


def test_every_default_counter_has_a_destination():
    text = (DATA / "default-counters.csv").read_text()
    names = [line.split(",")[0].strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert len(names) == 26
    placed = set(COLUMNS) | {FB_FREE, XID} | LONG | LABEL_FIELDS
    assert [n for n in names if n not in placed] == []


@pytest.mark.parametrize(
    "field,value,blank",
    [
        ("DCGM_FI_DEV_MEMORY_TEMP", 9223372036854775794.0, True),
        ("DCGM_FI_DEV_FB_USED", 2147483632.0, True),  # INT32 blank
        ("DCGM_FI_PROF_SM_ACTIVE", 140737488355328.0, True),  # FP64 blank
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 2.5e9, False),  # a real counter past 2**31
        ("DCGM_FI_DEV_GPU_UTIL", float("nan"), True),
        ("DCGM_FI_DEV_POWER_USAGE", float("inf"), True),
        ("DCGM_FI_DEV_GPU_UTIL", 0.0, False),
    ],
)
def test_blank_values(field, value, blank):
    assert is_blank(field, value) is blank


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.prom")))
def test_every_capture_maps_every_sample(name):
    """No sample is dropped: each lands in a column, in gpu_fields, or (Xid) is a known event source."""
    from gpuledger.collector.dcgm.fields import XID_COUNT
    from gpuledger.collector.dcgm.rows import RowBuilder as RB

    ss = samples(name)
    page = RB("c").rows(ss, TS, default_node="fallback")
    names = [n.removesuffix("_total") for n, _, _ in ss]
    in_columns = sum(1 for n in names if n in COLUMNS or n == FB_FREE)
    events_or_labels = sum(1 for n in names if n in (XID, XID_COUNT) or n in LABEL_FIELDS)
    assert in_columns + len(page.fields) + events_or_labels == len(ss)
    assert page.samples and all(r["gpu_uuid"] for r in page.samples)
