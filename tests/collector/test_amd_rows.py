"""AMD device-metrics-exporter pages -> rows, by the AMD table (collector/vendors/amd.py). Each test names the kind
of fixture it rests on (tests/fixtures/accelerators/SOURCES.md): REAL captures, or SYNTHETIC pages built here on a
real capture's label set where no capture exists (a full page, CPX partitions with values, a device without a
serial). Values are checked by hand, the conversion in a comment."""

from pathlib import Path

import pytest

from gpuledger.collector.dcgm.exposition import parse, parse_reference
from gpuledger.collector.vendors.amd import AMD
from gpuledger.collector.vendors.rows import VendorRows

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "accelerators"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "accelerators"
TS = 1_800_000_000_000_000


def read(text, via_prometheus=False, node="node-a"):
    page, errors = VendorRows(AMD, "c", via_prometheus=via_prometheus).rows(
        parse(text), TS, default_node=node, where=lambda i: f"sample {i}"
    )
    return {r["gpu_uuid"]: r for r in page.samples}, page.fields, errors


def row(**kw):
    """A gpu_samples row of source amd with every identity key, None where the page has nothing."""
    base = dict.fromkeys(
        ("gpu_index", "parent_gpu_uuid", "partition_share", "mig_profile", "model", "pci_bus_id", "driver_version")
        + ("pod", "namespace", "container")
    )
    return {"ts": TS, "cluster": "c", **base, "vendor": "amd", "source": "amd", **kw}


@pytest.mark.skipif(not SHARED.is_dir(), reason="no ../shared/data/accelerators here")
def test_every_shared_file_is_copied():
    # REAL and GOLDEN: the copies in tests/fixtures/accelerators are the shared folder's, byte for byte
    shared = sorted(p.name for p in SHARED.glob("*.prom"))
    assert shared and shared == sorted(p.name for p in FIX.glob("*.prom") if not p.name.startswith("synthetic-"))
    for name in shared:
        assert (FIX / name).read_bytes() == (SHARED / name).read_bytes(), name


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("amd-*.prom")))
def test_the_fast_parser_reads_every_amd_fixture_as_prometheus_client_does(name):
    # REAL captures: the parser the sources use against the reference (prometheus_client + the module's rules)
    text = (FIX / name).read_text()
    assert parse(text) == parse_reference(text)


def test_real_mi300x_spx_raw_line_is_one_whole_gpu_named_by_its_serial():
    # REAL: the Kaiwo raw /metrics line (amd-dme-mi300x-spx-kaiwo-raw-line.prom), pod labels present but empty
    rows, fields, errors = read((FIX / "amd-dme-mi300x-spx-kaiwo-raw-line.prom").read_text())
    assert rows == {
        "692409005408": row(
            node="tw038",  # the hostname label, not the target's
            gpu_uuid="692409005408",  # serial_number: gpu_uuid is an optional label, the serial a default one
            gpu_index=2,
            model="AMD Instinct MI300X OAM",  # card_series; card_model is the part number 102-G30211-0C
            driver_version="6.12.12",
            util_gpu_pct=0.0,  # gpu_gfx_activity 0 (%)
        )
    }
    assert fields == [] and errors == []


def test_real_prometheus_series_cpx_partition_is_a_child_with_its_share_and_the_spx_gpu_has_its_pod():
    # REAL, as Prometheus stored it (amd-dme-mi300x-cpx-spx-kaiwo-prometheus-series.prom): read as the prometheus
    # source reads series, with the target's instance/job/node labels on them
    rows, _, errors = read((FIX / "amd-dme-mi300x-cpx-spx-kaiwo-prometheus-series.prom").read_text(), True)
    assert errors == []
    assert rows["692409005296/p0"] == row(
        node="tw009",
        gpu_uuid="692409005296/p0",  # partition 0 of the GPU with serial 692409005296
        gpu_index=47,  # gpu_id: a partition's own index
        parent_gpu_uuid="692409005296",
        partition_share=1 / 8,  # CPX on an MI300X: one partition per XCD, 8 XCDs
        mig_profile="cpx.nps4",
        model="AMD Instinct MI300X OAM",
        driver_version="6.12.12",
        util_gpu_pct=0.0,
        # pod="default-metrics-exporter-vvvkm" is the exporter's own pod put there by the scrape (no namespace,
        # the GPU Operator's DaemonSet name): no pod holds this partition
    )
    assert rows["692409005328"] == row(
        node="tw038",
        gpu_uuid="692409005328",
        gpu_index=0,
        model="AMD Instinct MI300X OAM",
        driver_version="6.12.12",
        pod="high-utilization-57ls6",
        namespace="default",
        container="workload",
        util_gpu_pct=100.0,
    )


def test_real_pre_1_0_page_units_and_legacy_labels():
    # REAL: the pre-1.0 exporter's page (amd-dme-pre-v1-metricutil-mini.prom), upper-case labels, no hostname
    rows, fields, errors = read((FIX / "amd-dme-pre-v1-metricutil-mini.prom").read_text())
    assert rows == {
        "692247001282": row(
            node="node-a",  # no hostname label: the target's host
            gpu_uuid="692247001282",  # SERIAL_NUMBER
            power_w=41.0,  # gpu_average_package_power 41 W (rank 1 beats gpu_power_usage, rank 2)
            mem_total_bytes=68_702_000_000,  # gpu_total_memory 68702 "MB" x 10^6
            util_gpu_pct=0.0,  # gpu_usage 0 %
        )
    }
    # The power reading that lost the tie is kept, not dropped; gpu_nodes_total is the node's, no device's
    assert [(f["gpu_uuid"], f["field"], f["value"]) for f in fields] == [("692247001282", "gpu_power_usage", 41.0)]
    assert errors == []


def test_amd_units():
    # The decision for AMD's "MB" (collector/vendors/amd.py): 10^6 bytes. The pre-1.0 page's 68702 MB total is
    # 68,702 x 10^6 B = 63.98 GiB, a 64 GiB MI210; as MiB it would be 68702 / 1024 = 67.09 GiB, no Instinct card.
    assert 68_702 * 10**6 / 2**30 == pytest.approx(63.98, abs=0.005)
    assert AMD.columns["gpu_used_vram"][1] == AMD.columns["gpu_total_vram"][1] == 1_000_000
    # SYNTHETIC line on the Kaiwo raw line's label set: the other units
    labels = (FIX / "amd-dme-mi300x-spx-kaiwo-raw-line.prom").read_text().split("{", 1)[1].rsplit("}", 1)[0]
    page = "".join(
        f"{name}{{{labels}}} {value}\n"
        for name, value in [
            ("gpu_used_vram", "1536"),  # 1536 "MB" = 1,536,000,000 B
            ("gpu_total_vram", "196592"),  # 196,592,000,000 B
            ("gpu_package_power", "748"),  # 748 W, integer
            ("gpu_energy_consumed", "4.2e+12"),  # 4.2e12 uJ x 1e-6 = 4.2e6 J
            ("gpu_junction_temperature", "51"),  # degrees C
            ("gpu_umc_activity", "12"),  # % of the memory controller
            ("gpu_ecc_correct_total", "3"),
            ("gpu_ecc_uncorrect_total", "0"),
        ]
    )
    (r,) = read(page)[0].values()
    assert r["mem_used_bytes"] == 1_536_000_000 and r["mem_total_bytes"] == 196_592_000_000
    assert r["power_w"] == 748.0 and r["energy_j"] == pytest.approx(4.2e6) and r["temp_c"] == 51.0
    assert r["util_mem_pct"] == 12.0 and (r["ecc_corrected_total"], r["ecc_uncorrected_total"]) == (3, 0)


def cpx_page(prefix=""):
    """SYNTHETIC: an MI300X in CPX/NPS4 (8 partitions, gpu_id 8-15, the parent's serial on each), on the Kaiwo
    label set, with HELP/TYPE lines as client_golang writes them. The exporter's partition rules
    (metricslist.md L:83-93): activity and power on partition 0 only (the others report 0 W), energy absent on
    the others. A pod holds partition 3."""
    out = []

    def labels(p, pod=("", "", "")):
        return (
            f'card_model="102-G30211-0C",card_series="AMD Instinct MI300X OAM",container="{pod[2]}",'
            f'gpu_compute_partition_type="cpx",gpu_id="{8 + p}",gpu_memory_partition_type="nps4",'
            f'gpu_partition_id="{p}",hostname="tw010",namespace="{pod[1]}",pod="{pod[0]}",serial_number="692409005400"'
        )

    pods = {3: ("train-0", "ml", "main")}
    for name, help_, values in [
        ("gpu_gfx_activity", "Graphics engine usage in Percentage (0-100)", {0: "37"}),
        ("gpu_package_power", "Current socket power in Watts", {p: ("512" if p == 0 else "0") for p in range(8)}),
        ("gpu_energy_consumed", "Accumulated energy consumed by the GPU in uJ", {0: "2.5e+11"}),
        ("gpu_used_vram", "Used VRAM memory of the GPU (in MB)", {p: str(1000 * (p + 1)) for p in range(8)}),
        ("gpu_total_vram", "Total VRAM memory of the GPU (in MB)", {p: "24574" for p in range(8)}),
        ("gpu_xgmi_link_rx", "Accumulated XGMI Link Data Read in KB", {0: "2.776148269e+09"}),
    ]:
        out.append(f"# HELP {prefix}{name} {help_}\n# TYPE {prefix}{name} gauge\n")
        for p, v in values.items():
            extra = 'link_index="1",' if name == "gpu_xgmi_link_rx" else ""
            lab = labels(p, pods.get(p, ("", "", "")))
            if extra:  # client_golang sorts labels: link_index goes after hostname
                lab = lab.replace('hostname="tw010",', 'hostname="tw010",' + extra)
            out.append(f"{prefix}{name}{{{lab}}} {v}\n")
    out.append(
        f'# HELP {prefix}gpu_nodes_total Number of GPUs in the node\n{prefix}gpu_nodes_total{{hostname="tw010"}} 8\n'
    )
    return "".join(out)


def test_cpx_partitions_are_children_of_the_serial_each_an_eighth_and_the_pod_is_on_its_partition():
    # SYNTHETIC (cpx_page): the partitions as MIG instances are, parent and share
    text = cpx_page()
    assert parse(text) == parse_reference(text)
    rows, fields, errors = read(text)
    assert errors == []
    assert sorted(rows) == [f"692409005400/p{p}" for p in range(8)]
    assert {(r["parent_gpu_uuid"], r["partition_share"], r["mig_profile"]) for r in rows.values()} == {
        ("692409005400", 1 / 8, "cpx.nps4")
    }
    assert sum(r["partition_share"] for r in rows.values()) == pytest.approx(1.0)
    p0, p3, p7 = rows["692409005400/p0"], rows["692409005400/p3"], rows["692409005400/p7"]
    assert (p0["gpu_index"], p0["util_gpu_pct"], p0["power_w"]) == (8, 37.0, 512.0)
    assert p0["energy_j"] == pytest.approx(2.5e5)  # 2.5e11 uJ x 1e-6
    assert (p0["mem_used_bytes"], p0["mem_total_bytes"]) == (1_000_000_000, 24_574_000_000)  # 1000, 24574 MB
    assert (p7["mem_used_bytes"], p7["power_w"], p7.get("util_gpu_pct"), p7.get("energy_j")) == (
        8_000_000_000,  # 8000 MB
        0.0,  # "all other partitions report 0" (no per-XCD power sensor): as the exporter says
        None,  # no activity off the primary partition
        None,
    )
    assert (p3["pod"], p3["namespace"], p3["container"]) == ("train-0", "ml", "main")
    assert all(rows[u]["pod"] is None for u in rows if u != "692409005400/p3")
    # The XGMI counter is no column: gpu_fields, its link index in the name, the KB value as reported
    assert [(f["gpu_uuid"], f["field"], f["value"]) for f in fields] == [
        ("692409005400/p0", 'gpu_xgmi_link_rx{link_index="1"}', 2.776148269e09)
    ]


def test_the_amd_name_prefix_is_read_as_the_bare_names():
    # SYNTHETIC (cpx_page with MetricsFieldPrefix "amd_", as the exporter's shipped examples configure it)
    assert read(cpx_page("amd_")) == read(cpx_page())


def test_real_docs_example_keeps_every_unknown_metric_in_gpu_fields_with_its_index_labels():
    # REAL but redacted by AMD (amd-dme-docs-metricslist-clock-xgmi-redacted.prom): gpu_clock and gpu_xgmi_link_*
    # have no column. The redaction gives GPUs 0, 3 and 5 one serial "xxxx", so they read as one device here.
    rows, fields, errors = read((FIX / "amd-dme-docs-metricslist-clock-xgmi-redacted.prom").read_text())
    assert list(rows) == ["xxxx"] and errors == []
    assert len(fields) == 21  # 5 clocks + 8 rx + 8 tx: none dropped
    got = {f["field"]: f["value"] for f in fields}
    assert got['gpu_clock{clock_index="2",clock_type="system"}'] == 132.0  # MHz, as reported
    assert got['gpu_xgmi_link_tx{link_index="7"}'] == pytest.approx(3.545990503)  # truncated in AMD's docs
    assert len(got) == 21


def test_an_unknown_amd_metric_goes_to_gpu_fields():
    # SYNTHETIC: a metric no table lists, on the Kaiwo raw line's labels
    labels = (FIX / "amd-dme-mi300x-spx-kaiwo-raw-line.prom").read_text().split("{", 1)[1].rsplit("}", 1)[0]
    rows, fields, errors = read(f"gpu_future_metric{{{labels}}} 7.5\ngpu_gfx_activity{{{labels}}} 3\n")
    assert rows["692409005408"]["util_gpu_pct"] == 3.0 and errors == []
    assert [(f["gpu_uuid"], f["field"], f["value"], f["source"]) for f in fields] == [
        ("692409005408", "gpu_future_metric", 7.5, "amd")
    ]


def test_a_gpu_without_a_serial_is_skipped_with_one_error_naming_its_first_line_and_the_rest_is_kept():
    # SYNTHETIC (cpx_page with partition 5's serial label taken out)
    text = cpx_page().replace(
        'gpu_partition_id="5",hostname="tw010",namespace="",pod="",serial_number="692409005400"',
        'gpu_partition_id="5",hostname="tw010",namespace="",pod=""',
    )
    rows, _, errors = read(text)
    assert len(rows) == 7 and "692409005400/p5" not in rows
    assert len(errors) == 1
    e = errors[0]
    # gpu_package_power is the first family with a partition-5 line: the page's 7th sample (0-based: 1 + 5)
    assert e["detail"] == 'amd: device gpu_id="13" skipped: no serial_number or gpu_uuid label (sample 6)'
    assert (e["kind"], e["node"], e["source"], e["gpu_uuid"]) == ("scrape_error", "tw010", "amd", None)


@pytest.mark.parametrize(
    ("series", "compute", "share"),
    [
        ("AMD Instinct MI300X OAM", "cpx", 1 / 8),  # 8 XCDs (gpuledger.partitions.AMD_XCDS)
        ("AMD Instinct MI300A", "cpx", 1 / 6),  # 6 XCDs
        ("AMD Instinct MI300A", "qpx", 1 / 4),  # QPX quarters the GPU whatever its XCDs
        ("AMD Instinct MI300X OAM", "dpx", 1 / 2),
        ("AMD Instinct MI400X", "cpx", None),  # XCDs not listed: no share is claimed (none guessed)
        ("AMD Instinct MI400X", "tpx", 1 / 3),  # but a third is a third
    ],
)
def test_a_partitions_share_is_the_partition_rules(series, compute, share):
    # SYNTHETIC: cpx_page's partitions, of another model or mode
    text = cpx_page().replace("AMD Instinct MI300X OAM", series).replace('type="cpx"', f'type="{compute}"')
    rows, _, errors = read(text)
    assert errors == [] and len(rows) == 8
    assert {(r["partition_share"], r["mig_profile"]) for r in rows.values()} == {(share, f"{compute}.nps4")}
