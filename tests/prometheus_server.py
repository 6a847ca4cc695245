"""A real Prometheus (Debian package `prometheus`, its own process on a free loopback port) and what the tests that
run one share: a local server of exporter pages for it to scrape (`serve_pages`), the process itself
(`run_prometheus`), `gpuledger exporter` over a lake with deploy/prometheus/gpuledger-rules.yaml loaded
(`exporter_and_prometheus`), and the few calls of Prometheus' HTTP API the tests make (`api`, `query`, `wait_for`).
Used by tests/exporter/test_exporter_prometheus.py, test_grafana_prometheus.py, tests/e2e/test_prometheus.py and
test_prometheus_vendors.py."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from s3_server import free_port

REPO = Path(__file__).resolve().parents[1]
PROMETHEUS = shutil.which("prometheus")
EXPORTER_JOB = "gpuledger-exporter"  # the scrape job the rules (and the Grafana dashboard) expect


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def api(prom: str, path: str, timeout_s: float = 15.0, **params) -> dict | list:
    """GET /api/v1/<path>?params; the `data` of a success, AssertionError naming the query otherwise.

    An answer that is no answer is asked again until `timeout_s`: a refused or cut connection, a 5xx (Prometheus
    says 503 until it is ready), or a body that is empty or not JSON (seen once on 2 loaded cores). A query
    Prometheus refuses (a 4xx with its reason) fails at once: asking again would get the same."""
    url = f"{prom}/api/v1/{path}?{urllib.parse.urlencode(params, doseq=True)}"
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            body = json.loads(get(url))
            break
        except urllib.error.HTTPError as e:  # before OSError: it is one
            text = e.read().decode()
            if e.code < 500:  # 400 for a query that does not parse, 422 for one that cannot run
                body = json.loads(text or "{}")
                break
            why = f"HTTP {e.code}: {text[:200]!r}"
        except (OSError, http.client.HTTPException, ValueError) as e:  # ValueError: JSONDecodeError
            why = repr(e)
        if time.monotonic() >= deadline:
            raise AssertionError(f"Prometheus API {path} {params}: no answer in {timeout_s:g} s, last: {why}")
        time.sleep(0.2)
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


class _Pages(BaseHTTPRequestHandler):
    pages: Mapping[str, Callable[[], bytes]] = {}

    def log_message(self, *a):
        pass

    def do_GET(self):
        page = self.pages.get(self.path)
        if page is None:
            self.send_response(404)
            self.end_headers()
            return
        body = page()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextlib.contextmanager
def serve_pages(pages: Mapping[str, Callable[[], bytes]]) -> Iterator[str]:
    """A local HTTP server, in a thread of its own, answering GET <path> with `pages[path]()` in the Prometheus text
    format (a function: a page may be made anew for each scrape), 404 for other paths. Yields its host:port."""
    handler = type("Pages", (_Pages,), {"pages": dict(pages)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def run_prometheus(tmp_path: Path, cfg: dict) -> Iterator[tuple[str, subprocess.Popen]]:
    """Prometheus with the configuration `cfg` (written as JSON, which is YAML) on a free loopback port, its data in
    tmp_path/tsdb and its log in tmp_path/prometheus.log (a file: a pipe nobody reads would stall it once full).
    Yields its base URL and its process; stops it."""
    port = free_port()
    (tmp_path / "prometheus.yml").write_text(json.dumps(cfg))
    with open(tmp_path / "prometheus.log", "wb") as log:
        proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def exporter_and_prometheus(tmp_path: Path, lake: Path, config: str | None = None) -> Iterator[dict]:
    """`gpuledger exporter` over `lake` (with `config`'s TOML, else the built-in config) and a Prometheus scraping it
    every second (job gpuledger-exporter) with the rules loaded and evaluated every second. Yields the exporter's
    /metrics URL, Prometheus' base URL and the exporter's process; stops both."""
    port = free_port()
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
    try:
        with run_prometheus(tmp_path, cfg) as (prom, _):
            yield {"exporter": f"http://127.0.0.1:{port}/metrics", "prom": prom, "proc": exporter}
    finally:
        exporter.terminate()
        exporter.wait(10)
