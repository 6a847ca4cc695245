"""The dcgm source over real HTTP: good pages become rows; a target that hangs, refuses, answers 500, sends HTML
or a malformed page becomes a scrape_error event naming it and the reason, and the other targets' rows are
written all the same."""

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuledger.collector.dcgm_source import DcgmSource
from gpuledger.config import CollectorConfig, Config

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"
T = 1_800_000_000.0
BAD_PAGE = b'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x"} 5\nDCGM_FI_DEV_GPU_UTIL{UUID="GPU-x",gpu="0"} 6\n'


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def _send(self, code, body, ctype="text/plain; version=0.0.4"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/l4":
            self._send(200, (FIX / "l4-aws-kops-gpu-operator-580.105.08.prom").read_bytes())
        elif self.path == "/h100":
            self._send(200, (FIX / "h100x8-eks-gpu-operator-1pod-b.prom").read_bytes())
        elif self.path == "/500":
            self._send(500, b"oops")
        elif self.path == "/html":
            self._send(200, b"<html>login</html>", "text/html")
        elif self.path == "/dup":
            self._send(200, BAD_PAGE)
        elif self.path == "/empty":
            self._send(200, b"")
        elif self.path == "/node-exporter":  # another exporter's page: valid, but no GPU on it
            self._send(200, b"# TYPE node_load1 gauge\nnode_load1 0.25\n")
        elif self.path == "/hang":
            time.sleep(2)
            self._send(200, b"")


@pytest.fixture(scope="module")
def server():
    s = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{s.server_address[1]}"
    s.shutdown()


def refused_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/metrics"  # closed again: nothing listens there


def rows(batches):
    return {
        b.table: [dict(zip(b.columns, v, strict=True)) for v in zip(*b.columns.values(), strict=True)] for b in batches
    }


def test_good_and_bad_targets_in_one_round(server):
    refused = refused_url()
    urls = [
        f"{server}/l4",
        f"{server}/h100",
        f"{server}/500",
        f"{server}/html",
        f"{server}/dup",
        f"{server}/hang",
        refused,
    ]
    src = DcgmSource(Config(collector=CollectorConfig(interval_s=10)), urls, timeout_s=0.5)
    got = rows(src.collect(T))
    assert {r["model"] for r in got["gpu_samples"]} == {"NVIDIA L4", "NVIDIA H100 80GB HBM3"}
    assert len(got["gpu_samples"]) == 1 + 8
    errors = {e["detail"] for e in got["health_events"]}
    assert all(e["kind"] == "scrape_error" and e["source"] == "dcgm" for e in got["health_events"])
    assert f"{server}/500: HTTP 500 Internal Server Error" in errors
    assert f"{server}/html: wrong content type 'text/html', expected text/plain" in errors
    assert f"{server}/dup: line 2: duplicate series" in errors
    assert f"{server}/hang: no answer within 0.5 s" in errors
    assert f"{refused}: connection refused" in errors
    assert len(errors) == 5
    src.close()


def test_failing_targets_back_off_and_recover(server):
    src = DcgmSource(Config(collector=CollectorConfig(interval_s=10)), [f"{server}/500", f"{server}/l4"])
    attempts = []
    for step in range(0, 80, 10):
        got = rows(src.collect(T + step))
        if "health_events" in got:
            attempts.append(step)
        assert len(got["gpu_samples"]) == 1  # the healthy target is scraped every time
    assert attempts == [0, 10, 30, 70]  # retried at once, then after 20 s and 40 s
    src.close()


def test_no_urls_is_a_clear_error():
    from gpuledger.errors import SourceError

    with pytest.raises(SourceError, match="dcgm: no URL"):
        DcgmSource(Config(), [])


@pytest.mark.parametrize("path, samples", [("/empty", 0), ("/node-exporter", 1)])
def test_a_page_without_dcgm_metrics_is_a_scrape_error(server, path, samples):
    src = DcgmSource(Config(collector=CollectorConfig(interval_s=10)), [server + path])
    (batch,) = list(src.collect(T))
    assert batch.table == "health_events" and batch.columns["kind"] == ["scrape_error"]
    detail = f"{server}{path}: no DCGM metrics on the page ({samples} samples, none DCGM_FI_*)"
    assert batch.columns["detail"] == [detail]
    src.close()


def test_collect_once_from_pages_without_dcgm_metrics_exits_1(server, tmp_path):
    from click.testing import CliRunner

    from gpuledger.cli import main

    args = ["collect", "--source", "dcgm", "--url", server + "/empty", "--url", server + "/node-exporter", "--once"]
    r = CliRunner().invoke(main, [*args, "--lake", str(tmp_path / "lake")])
    assert r.exit_code == 1
    assert r.output.splitlines()[-2:] == [
        f"  {server}/empty: no DCGM metrics on the page (0 samples, none DCGM_FI_*)",
        f"  {server}/node-exporter: no DCGM metrics on the page (1 samples, none DCGM_FI_*)",
    ]
