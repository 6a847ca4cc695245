"""A real Prometheus (Debian package `prometheus`, its own process on a free loopback port) scrapes `gpuledger
exporter` (the CLI, its own process) over an analysed simulated lake, with deploy/prometheus/gpuledger-rules.yaml
loaded: PromQL returns the series the exporter serves, a group_left join on the *_info gauge carries the driver onto
each model's figures, and every rule evaluates without error against the real series."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from s3_server import free_port

REPO = Path(__file__).resolve().parents[2]
PROMETHEUS = shutil.which("prometheus")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(PROMETHEUS is None, reason="Debian package prometheus not installed"),
]


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def query(prom: str, q: str) -> list:
    return json.loads(get(f"{prom}/api/v1/query?{urllib.parse.urlencode({'query': q})}"))["data"]["result"]


def wait_for(pred, what: str, timeout_s: float = 60.0):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            if pred():
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def stack(tmp_path, analysed_lake):
    port, prom_port = free_port(), free_port()
    exporter = subprocess.Popen(
        [sys.executable, "-m", "gpuledger.cli", "exporter", "--lake", str(analysed_lake), "--port", str(port)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": ""},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    shutil.copy(REPO / "deploy" / "prometheus" / "gpuledger-rules.yaml", tmp_path / "rules.yaml")
    cfg = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": ["rules.yaml"],
        "scrape_configs": [{"job_name": "gpuledger-exporter", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}],
    }
    (tmp_path / "prometheus.yml").write_text(json.dumps(cfg))
    prom = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    yield {"exporter": f"http://127.0.0.1:{port}/metrics", "prom": f"http://127.0.0.1:{prom_port}", "proc": exporter}
    for p in (prom, exporter):
        p.terminate()
        p.wait(10)


def test_prometheus_scrapes_the_exporter_and_the_rules_evaluate(stack):
    prom = stack["prom"]
    allocated = "gpuledger_tenant_allocated_gpus"
    wait_for(lambda: "gpuledger_tenant_allocated_gpus{" in get(stack["exporter"]), "the exporter's first snapshot")
    wait_for(lambda: len(query(prom, allocated)) > 0, "the figures in Prometheus")
    served = {
        tuple(sorted(s.labels.items())): s.value
        for f in text_string_to_metric_families(get(stack["exporter"]))
        for s in f.samples
        if s.name == allocated
    }
    got = {
        tuple(sorted((k, v) for k, v in r["metric"].items() if k not in ("__name__", "job", "instance"))): float(
            r["value"][1]
        )
        for r in query(prom, allocated)
    }
    assert got == served and len(got) >= 2
    # the static attributes joined onto each model's figures
    joined = query(
        prom, "gpuledger_fleet_gpus * on (cluster, gpu_model) group_left (driver_version) gpuledger_gpu_model_info"
    )
    models = {r["metric"]["gpu_model"] for r in query(prom, "gpuledger_fleet_gpus")}
    assert {r["metric"]["gpu_model"] for r in joined} == models and len(models) == 3
    assert all(r["metric"]["driver_version"].startswith("sim-") for r in joined)
    # the Xid counters, as a rate; the analytics' age (the lake ends 2026-11-02: stale by now)
    assert query(prom, "gpuledger_analytics_last_run_age_seconds > 0")

    def rules_evaluated():
        groups = json.loads(get(f"{prom}/api/v1/rules"))["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        return len(rules) == 18 and all(r.get("lastEvaluation", "").startswith("20") for r in rules) and rules

    wait_for(rules_evaluated, "every rule evaluated")
    rules = rules_evaluated()
    assert [r["name"] for r in rules if r["health"] != "ok"] == []
