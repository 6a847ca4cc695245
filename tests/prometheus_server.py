"""A real Prometheus (Debian package `prometheus`, its own process on a free loopback port) scraping `gpuledger
exporter` (the CLI, its own process) over a lake, with deploy/prometheus/gpuledger-rules.yaml loaded; and the few
calls of Prometheus' HTTP API the tests make. Used by tests/exporter/test_exporter_prometheus.py and
test_grafana_prometheus.py."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from s3_server import free_port

REPO = Path(__file__).resolve().parents[1]
PROMETHEUS = shutil.which("prometheus")
EXPORTER_JOB = "gpuledger-exporter"  # the scrape job the rules (and the Grafana dashboard) expect


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def api(prom: str, path: str, **params) -> dict | list:
    """GET /api/v1/<path>?params; the `data` of a success, AssertionError naming the query otherwise."""
    query = urllib.parse.urlencode(params, doseq=True)
    try:
        body = json.loads(get(f"{prom}/api/v1/{path}?{query}"))
    except urllib.error.HTTPError as e:  # 400 for a query that does not parse, with Prometheus' reason
        body = json.loads(e.read().decode() or "{}")
    assert body.get("status") == "success", (path, params, body.get("error"))
    return body["data"]


def query(prom: str, q: str) -> list:
    return api(prom, "query", query=q)["result"]


def wait_for(pred, what: str, timeout_s: float = 60.0, prom: str | None = None):
    """Until `pred()` is true (a connection refused meanwhile is a no); on a timeout, with `prom` (Prometheus' URL),
    the error names its targets and their last errors."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            if pred():
                return
        except OSError:
            pass
        time.sleep(0.3)
    seen = ""
    if prom is not None:
        targets = [(t["scrapeUrl"], t["health"], t["lastError"]) for t in api(prom, "targets")["activeTargets"]]
        own = [r["metric"] for r in query(prom, '{__name__=~"gpuledger.*"}')][:6]
        seen = f"; targets: {targets}; gpuledger series: {own}"
    raise AssertionError(f"timed out waiting for {what}{seen}")


@contextlib.contextmanager
def exporter_and_prometheus(tmp_path: Path, lake: Path, config: str | None = None) -> Iterator[dict]:
    """`gpuledger exporter` over `lake` (with `config`'s TOML, else the built-in config) and a Prometheus scraping it
    every second (job gpuledger-exporter) with the rules loaded and evaluated every second. Yields the exporter's
    /metrics URL, Prometheus' base URL and the exporter's process; stops both."""
    port, prom_port = free_port(), free_port()
    args = ["--lake", str(lake), "--port", str(port)]
    if config is not None:
        (tmp_path / "gpuledger.toml").write_text(config)
        args += ["--config", str(tmp_path / "gpuledger.toml")]
    exporter = subprocess.Popen(
        [sys.executable, "-m", "gpuledger.cli", "exporter", *args],
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
        "scrape_configs": [{"job_name": EXPORTER_JOB, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}],
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
    try:
        yield {
            "exporter": f"http://127.0.0.1:{port}/metrics",
            "prom": f"http://127.0.0.1:{prom_port}",
            "proc": exporter,
        }
    finally:
        for p in (prom, exporter):
            p.terminate()
            p.wait(10)
