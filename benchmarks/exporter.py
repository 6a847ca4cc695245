"""`gpuledger exporter` over a year of a 1,000-GPU fleet: scrape time of /metrics (p50, p99), series, memory.

    python benchmarks/exporter.py --lake DIR [--scrapes 1000]
    (DIR: `gpuledger simulate --nodes 125 --gpus-per-node 8 --days 365 --step-s 3600`, then `gpuledger analyze`;
    read only)
    python benchmarks/exporter.py --tiny
    (2 nodes x 2 GPUs for 3 days, built and analysed in a temp dir, 50 scrapes: seconds, so the suite runs it)

The exporter runs as its own process (the CLI), as in production. The script waits for its first snapshot, then
scrapes /metrics `--scrapes` times over HTTP (the round trip included, as Prometheus sees it), one at a time.
Baseline in the same run: a second exporter over an empty lake, which serves only its own four series: the cost of
the process, prometheus_client's HTTP server and exposition, so ratio = what the figures add on top.
Memory: the exporter's resident set after the scrapes (the snapshot held), and the peak while it built the first
snapshot (the lake's read).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _proc import PeakRss, gpuledger, tree_rss_bytes  # noqa: E402

TINY_END = "2026-12-01T00:00:00Z"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read()


class Running:
    """`gpuledger exporter` over `lake` as its own process, until closed."""

    def __init__(self, lake: Path, ready: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        cmd = [sys.executable, "-m", "gpuledger.cli", "exporter", "--lake", str(lake), "--port", str(self.port)]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir()
        )
        t0 = time.perf_counter()
        with PeakRss(self.proc.pid, every_s=0.05) as rss:
            while True:
                try:
                    if ready.encode() in get(self.url):
                        break
                except OSError:
                    pass
                if self.proc.poll() is not None or time.perf_counter() - t0 > 600:
                    sys.exit(f"the exporter over {lake} did not serve {ready} (exit {self.proc.poll()})")
                time.sleep(0.05)
        self.ready_s, self.peak = time.perf_counter() - t0, rss.peak
        body = get(self.url).decode()
        m = re.search(r"^gpuledger_exporter_snapshot_build_seconds (\S+)$", body, re.M)
        self.build_s = float(m.group(1)) if m else float("nan")

    def scrape(self, n: int) -> tuple[list[float], bytes]:
        times, body = [], b""
        for _ in range(n):
            t0 = time.perf_counter()
            body = get(self.url)
            times.append(time.perf_counter() - t0)
        return times, body

    def rss(self) -> int:
        return tree_rss_bytes(self.proc.pid)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def p(times: list[float], q: float) -> float:
    return statistics.quantiles(times, n=1000, method="inclusive")[int(q * 1000) - 1] if len(times) > 1 else times[0]


def series(body: bytes) -> int:
    return sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))


def run(lake: Path, empty: Path, scrapes: int) -> None:
    exp = Running(lake, "gpuledger_analytics_last_run_timestamp_seconds")
    base = Running(empty, "gpuledger_exporter_snapshot_build_seconds ")
    try:
        exp.scrape(20), base.scrape(20)  # warm-up
        t_exp, body = exp.scrape(scrapes)
        t_base, base_body = base.scrape(scrapes)
        mib = 1 << 20
        print(f"exporter over {lake}: first snapshot served after {exp.ready_s:.1f} s (built in {exp.build_s:.2f} s)")
        print(f"series {series(body):,}, /metrics {len(body) / 1024:.0f} KiB (baseline {series(base_body)} series)")
        print(
            f"scrape p50 {p(t_exp, 0.5) * 1000:.2f} ms  p99 {p(t_exp, 0.99) * 1000:.2f} ms  max "
            f"{max(t_exp) * 1000:.2f} ms over {scrapes} scrapes"
        )
        print(f"baseline (no analytics) p50 {p(t_base, 0.5) * 1000:.2f} ms  p99 {p(t_base, 0.99) * 1000:.2f} ms")
        print(f"ratio p99 {p(t_exp, 0.99) / p(t_base, 0.99):.1f}x")
        print(
            f"RSS {exp.rss() / mib:.0f} MiB after the scrapes, peak {exp.peak / mib:.0f} MiB while building "
            f"(baseline {base.rss() / mib:.0f} MiB)"
        )
        ok = p(t_exp, 0.99) < 0.1
        print(f"p99 under 100 ms: {'yes' if ok else 'NO'}")
    finally:
        exp.close()
        base.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lake", type=Path)
    ap.add_argument("--scrapes", type=int, default=1000)
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty"
        empty.mkdir()
        if a.tiny:
            lake = Path(tmp) / "lake"
            sim = ["--nodes", "2", "--gpus-per-node", "2", "--days", "3", "--step-s", "600", "--end", TINY_END]
            gpuledger("simulate", "--lake", str(lake), *sim, "--workers", "1")
            gpuledger("analyze", "--lake", str(lake), "--to", TINY_END)
            run(lake, empty, 50)
        elif a.lake is None:
            ap.error("--lake DIR or --tiny")
        else:
            run(a.lake, empty, a.scrapes)


if __name__ == "__main__":
    os.environ.setdefault("POLARS_MAX_THREADS", str(os.cpu_count() or 1))
    main()
