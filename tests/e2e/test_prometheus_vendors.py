"""A real Prometheus (Debian package `prometheus`, on a free loopback port) scrapes AMD and Ascend exporter pages
from a local HTTP server; the collector's prometheus source reads the series back through the HTTP API into a lake,
and the rows match the pages. The scrape targets carry a ServiceMonitor's namespace/pod/container labels without
honor_labels, so the exporters' own pod labels come back as exported_*, as in a cluster.

Fixtures (tests/fixtures/accelerators/SOURCES.md): AMD, the SYNTHETIC 8 x MI300X page and the REAL Kaiwo raw line;
Ascend, the REAL 910A capture, and a SYNTHETIC copy of its chip 0-1 lines with a pod holding both chips."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from gpuledger.collector.prometheus_source import PrometheusSource
from gpuledger.collector.runner import Collector
from gpuledger.config import Config
from gpuledger.lake import LakeWriter, scan
from gpuledger.spool import Spool

import prometheus_server
from prometheus_server import PROMETHEUS, query, run_prometheus, serve_pages

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "accelerators"
CAPTURE = (FIX / "ascend-npu-exporter-910a-x8-docs-capture.prom").read_text()
# SYNTHETIC: the capture's aicore_current_freq lines of chips 0 and 1, as two other chips (vdie_id 2850... for
# 1850...) that a pod each holds
HELD = "".join(
    line.replace('container_name=""', 'container_name="server"')
    .replace('namespace=""', 'namespace="infer"')
    .replace('pod_name=""', f'pod_name="llm-{i}"')
    .replace('vdie_id="1850', 'vdie_id="2850')
    + "\n"
    for i, line in enumerate(x for x in CAPTURE.splitlines() if x.startswith("npu_chip_info_aicore_current_freq{"))
    if i < 2
)
PAGES = {
    "/amd": (FIX / "synthetic-amd-mi300x-x8-spx.prom").read_text(),
    "/amd-raw": (FIX / "amd-dme-mi300x-spx-kaiwo-raw-line.prom").read_text(),
    "/ascend": CAPTURE,
    "/ascend-held": "# TYPE npu_chip_info_aicore_current_freq gauge\n" + HELD,
}
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(PROMETHEUS is None, reason="Debian package prometheus not installed"),
]


def restamped(text: str) -> str:
    """The Ascend exporter stamps each chip sample with when it read the chip; the capture's stamps (2024) are far
    older than a Prometheus head block takes, so each is served as now, as a live exporter's would be."""
    now = str(int(time.time() * 1000))
    return re.sub(r"(?m)^(npu_[^ ]+\} \S+) \d+$", rf"\1 {now}", text)


def scrape_config(host: str) -> dict:
    def job(name, paths, target_labels):
        # What a ServiceMonitor gives each target: its Service's namespace, the exporter pod, its container
        return {
            "job_name": name,
            "static_configs": [
                {"targets": [host], "labels": {"__metrics_path__": p, "page": p, **target_labels}} for p in paths
            ],
        }

    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            job(
                "amd-gpu-exporter",
                ["/amd", "/amd-raw"],
                {"namespace": "kube-amd-gpu", "pod": "default-metrics-exporter-x7k2p", "container": "metrics-exporter"},
            ),
            job("npu-exporter", ["/ascend", "/ascend-held"], {"namespace": "kube-system", "pod": "npu-exporter-q9z"}),
        ],
    }


@pytest.fixture
def prometheus(tmp_path):
    pages = {path: (lambda text=text: restamped(text).encode()) for path, text in PAGES.items()}
    with serve_pages(pages) as host, run_prometheus(tmp_path, scrape_config(host)) as (url, _):
        yield url


def test_amd_and_ascend_series_through_a_real_prometheus_land_in_the_lake(prometheus, tmp_path):
    url = prometheus

    def wait_for(pred, what):
        prometheus_server.wait_for(pred, what, 40.0, prom=url)

    wait_for(lambda: len(query(url, "up == 1")) == 4, "targets up")
    wait_for(lambda: len(query(url, "gpu_gfx_activity")) == 8 + 1, "AMD series")
    wait_for(lambda: len(query(url, "npu_chip_info_aicore_current_freq")) == 8 + 2, "Ascend series")
    cfg = Config(cluster="c")
    col = Collector(
        [PrometheusSource(cfg, url, step_s=1)],
        Spool(tmp_path / "spool", "n1"),
        LakeWriter(tmp_path / "lake"),
        "c",
        "n1",
    )
    col.start()
    col.scrape()  # instant query
    time.sleep(2.5)
    col.scrape()  # range query from the last timestamp
    assert col.errors == 0
    col.close()

    s = scan(tmp_path / "lake", "gpu_samples").collect()
    assert set(s["source"]) == {"prometheus"} and s["ts"].n_unique() >= 2
    latest = {r["gpu_uuid"]: r for r in s.sort("ts").group_by("gpu_uuid").last().iter_rows(named=True)}
    amd = {u: r for u, r in latest.items() if r["vendor"] == "amd"}
    npu = {u: r for u, r in latest.items() if r["vendor"] == "huawei"}
    assert len(amd) == 8 + 1 and len(npu) == 8 + 2
    g2 = amd["692409005302"]
    # The exporter's pod labels collided with the target's and came back as exported_*: the workload's
    assert (g2["pod"], g2["namespace"], g2["container"], g2["node"]) == ("train-2", "ml", "main", "tw038")
    assert (g2["util_gpu_pct"], g2["power_w"], g2["mem_used_bytes"]) == (20.0, 240.0, 3_000_000_000)
    assert g2["energy_j"] == pytest.approx(3.75e6)  # 3.75e12 uJ
    # An unheld GPU carries the target's pod (the exporter's own, in the Service's namespace): no holder
    assert amd["692409005300"]["pod"] is None and amd["692409005408"]["pod"] is None
    # Ascend: the capture's chips (node: the target's host, no host label on the page), and the held ones
    chip0 = npu["185011D4-21104518-A0C4ED94-14CC040A-56102003"]
    assert (chip0["node"], chip0["sm_clock_mhz"], chip0["pod"], chip0["model"]) == (
        "127.0.0.1",
        1000,
        None,  # pod_name "" on the capture: the target's namespace is there, but no pod_name
        "910A-Ascend-V1",
    )
    held = [r for r in npu.values() if r["pod"] is not None]
    # namespace="infer" collided with the target's namespace: read back from exported_namespace
    assert sorted((r["pod"], r["namespace"], r["container"]) for r in held) == [
        ("llm-0", "infer", "server"),
        ("llm-1", "infer", "server"),
    ]
    f = scan(tmp_path / "lake", "gpu_fields").collect()
    assert "npu_chip_info_bandwidth_rx" in set(f["field"]) and 'gpu_xgmi_link_rx{link_index="1"}' in set(f["field"])
