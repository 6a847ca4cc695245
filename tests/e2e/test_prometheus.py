"""A real Prometheus server (Debian package `prometheus`, started here on a free loopback port) scrapes a local
HTTP server serving real dcgm-exporter captures and the collector's own /metrics; the collector's Prometheus
source reads the DCGM series back through the HTTP API, and the lake rows match the capture values."""

from __future__ import annotations

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
from s3_server import free_port

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "dcgm"
FIX = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"
DATA = FIX if FIX.is_dir() else SHARED
PAGES = {
    "/h100": "h100x8-eks-gpu-operator-1pod-a.prom",
    "/l4": "l4-aws-kops-gpu-operator-580.105.08.prom",
    "/mig": "a100-mig-1g.5gb-docs-2.x.prom",
}
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(PROMETHEUS is None, reason="Debian package prometheus not installed"),
]


@pytest.fixture
def prometheus(tmp_path):
    """Start the page server, the collector's metrics endpoint and a Prometheus scraping both every second."""
    metrics_port = free_port()
    pages = {path: (lambda name=name: (DATA / name).read_bytes()) for path, name in PAGES.items()}
    with serve_pages(pages) as host:
        # One server, three paths: a `page` label keeps the three targets' series (up, ...) apart.
        targets = [{"targets": [host], "labels": {"__metrics_path__": p, "page": p}} for p in PAGES]
        cfg = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                # honor_labels keeps the exporter's own pod/namespace labels, as the GPU Operator's ServiceMonitor does
                {"job_name": "dcgm", "honor_labels": True, "static_configs": targets},
                {"job_name": "gpuledger", "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}]},
            ],
        }
        with run_prometheus(tmp_path, cfg) as (url, proc):
            yield {"url": url, "metrics_port": metrics_port, "spool_dir": tmp_path / "spool", "proc": proc}


def wait_for(pred, url: str, timeout_s=40.0, what: str = ""):
    prometheus_server.wait_for(pred, what, timeout_s, prom=url)


def test_dcgm_series_through_a_real_prometheus_land_in_the_lake(prometheus, tmp_path):
    from prometheus_client import start_http_server

    url = prometheus["url"]
    cfg = Config(cluster="c")
    src = PrometheusSource(cfg, url, step_s=1)
    col = Collector([src], Spool(prometheus["spool_dir"], "n1"), LakeWriter(tmp_path / "lake"), "c", "n1")
    start_http_server(prometheus["metrics_port"], addr="127.0.0.1", registry=col.metrics.registry)
    col.start()
    # Every page scraped at least once, and the collector's own metrics too.
    wait_for(lambda: len(query(url, 'up{job="dcgm"} == 1')) == 3, url, what="targets up")
    wait_for(lambda: len(query(url, "DCGM_FI_DEV_POWER_USAGE")) == 8 + 1 + 1, url, what="power series")
    col.scrape()  # instant query
    assert col.errors == 0
    time.sleep(2.5)
    col.scrape()  # range query from the last timestamp: catches up
    assert col.errors == 0
    col.flush()
    wait_for(lambda: query(url, 'gpuledger_rows_written_total{table="gpu_samples"}'), url, what="own metrics")
    col.close()

    s = scan(tmp_path / "lake", "gpu_samples").collect()
    assert set(s["source"]) == {"prometheus"}
    assert s["ts"].n_unique() >= 2  # the second scrape read a range, not one instant
    latest = s.sort("ts").group_by("gpu_uuid").last()
    by_uuid = {r["gpu_uuid"]: r for r in latest.iter_rows(named=True)}
    # Values from the capture lines, through Prometheus and back.
    h100_2 = by_uuid["GPU-8d76cfcf-a144-5e43-876b-a4b71f2aecd1"]
    assert h100_2["power_w"] == pytest.approx(110.786) and h100_2["temp_c"] == 29.0
    assert (h100_2["pod"], h100_2["namespace"]) == ("vllm-agg-0-vllmdecodeworker-dkb9q", "dynamo-workload")
    assert by_uuid["GPU-81d79b08-40a0-40ae-3fc5-82b8ff8b8138"]["pod"] is None
    l4 = next(r for r in by_uuid.values() if r["model"] == "NVIDIA L4")
    assert l4["energy_j"] == pytest.approx(4742.776) and l4["mem_total_bytes"] == (22563 + 470) * 2**20
    mig = by_uuid["GPU-34319582-d595-d1c7-d1d2-179bcfa61660/gi13"]
    assert mig["mig_profile"] == "1g.5gb" and mig["tensor_active_ratio"] == pytest.approx(0.930433)
    fields = scan(tmp_path / "lake", "gpu_fields").collect()
    assert "DCGM_FI_PROF_PCIE_TX_BYTES" in set(fields["field"])
