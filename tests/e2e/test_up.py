"""`gpuledger up` end to end, as a user runs it: a real process, a backfill, live collection, Ctrl-C."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.request

import polars as pl
import pytest

from gpuledger.lake import scan
from gpuledger.spool import default_dir

CONFIG = """
[collector]
interval_s = 0.2
flush_interval_s = 0.5
node = "uptest"
metrics_port = {metrics_port}

[dashboard]
port = {port}

[exporter]
port = {exporter_port}

[simulator]
nodes = 2
gpus_per_node = 2
models = ["L4"]
backfill_days = 0.05
backfill_step_s = 30
history_days = 0.05
history_step_s = 300
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _up(lake, cfg):
    return subprocess.Popen(
        [sys.executable, "-m", "gpuledger.cli", "up", "--lake", str(lake), "--config", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _scrapes(port) -> float:
    """The live scrapes the collector made so far, by its own /metrics (the sim source's scrape-time count)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith('gpuledger_scrape_duration_seconds_count{source="sim"}'):
                return float(line.split()[-1])
    return 0.0


def _wait_until(pred, what, timeout_s=120):
    """Until `pred()` holds (an error meanwhile is a no: the process may not listen yet, a file may be replaced
    while read). On 2 loaded cores a scrape can outlast the 0.2 s interval and the first analytics run take many
    seconds, so a fixed sleep would see a varying amount of work done."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            if pred():
                return
        except Exception:  # any failure to look is a "not yet"
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} ({timeout_s} s)")


def _wait_for(p, text, timeout_s=60):
    seen = []
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        line = p.stderr.readline()
        if not line and p.poll() is not None:
            break
        seen.append(line)
        if text in line:
            return "".join(seen)
    raise AssertionError(f"never saw {text!r}; stderr so far:\n{''.join(seen)}")


@pytest.mark.slow
def test_up_backfills_collects_live_and_stops_cleanly_on_ctrl_c(tmp_path):
    lake, cfg = tmp_path / "lake", tmp_path / "c.toml"
    port, exporter_port, metrics_port = _free_port(), _free_port(), _free_port()
    cfg.write_text(CONFIG.format(port=port, exporter_port=exporter_port, metrics_port=metrics_port))
    started = time.time()
    p = _up(lake, cfg)
    head = _wait_for(p, "gpuledger is up")
    assert f"dashboards on http://127.0.0.1:{port}/" in head
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as r:  # the dashboards are up too
        assert r.status == 200 and b"gpuledger" in r.read()
    assert f"derived figures on http://127.0.0.1:{exporter_port}/metrics" in head
    with urllib.request.urlopen(f"http://127.0.0.1:{exporter_port}/metrics", timeout=30) as r:  # and the exporter
        assert b"gpuledger_exporter_up 1.0" in r.read()
    assert "collector: the simulated fleet, because" in head  # says which source and why
    assert "empty lake: backfilling 0.05 days every 30 s, and 0.05 days before them every 300 s" in head
    _wait_until(lambda: _scrapes(metrics_port) >= 5, "5 live scrapes")
    _wait_until(lambda: scan(lake, "gpu_hourly").collect().height > 0, "the first periodic analytics run")
    p.send_signal(signal.SIGINT)  # Ctrl-C
    rest = p.communicate(timeout=60)[1]
    assert p.returncode == 0, rest
    assert "stopped cleanly" in rest and "Traceback" not in rest, rest  # all of it: a scheduled job's error
    # A scrape outlasting the 0.2 s interval skips ticks: said in one line a minute at most, not apscheduler's
    # line at every tick (collector/runner.py SkippedRuns)
    assert "maximum number of running instances" not in rest, rest
    assert sum("tick(s) skipped" in line or "outlasted its interval" in line for line in rest.splitlines()) <= 5

    s = scan(lake, "gpu_samples").collect()
    backfilled = s.filter(pl.col("ts").dt.epoch("s") < started)
    live = s.filter(pl.col("ts").dt.epoch("s") >= started)
    # The recent 0.05 days at 30 s = 144 steps, the 0.05 days before them at 300 s = 14.4 steps: 144 or 145 and 14
    # or 15, by where each window starts on its step grid.
    assert backfilled.height in {4 * (c + f) for c in (14, 15) for f in (144, 145)}
    steps_s = backfilled.sort("ts").select(pl.col("ts").diff().dt.total_seconds().over("gpu_uuid"))
    # The coarse samples are 300 s apart (13 or 14 gaps a GPU; the one into the fine days may be 300 s too).
    assert steps_s.filter(pl.col("ts") == 300).height in (4 * 13, 4 * 14, 4 * 15)
    assert live.height >= 4 * 5  # several live scrapes of 4 GPUs, all flushed on Ctrl-C
    assert scan(lake, "gpu_hourly").collect().height > 0  # the periodic analytics ran
    assert list(default_dir(str(lake), "uptest").glob("seg-*.wal")) == [] or all(
        f.stat().st_size == 0 for f in default_dir(str(lake), "uptest").glob("seg-*.wal")
    )

    # A second start continues the same fleet: no new backfill, a catch-up of the gap instead.
    time.sleep(1.0)
    p = _up(lake, cfg)
    head = _wait_for(p, "gpuledger is up")
    assert "empty lake" not in head and "filling the" in head
    _wait_until(lambda: _scrapes(metrics_port) >= 1, "a live scrape")
    p.send_signal(signal.SIGTERM)
    assert p.communicate(timeout=60)[1] and p.returncode == 0
    s2 = scan(lake, "gpu_samples").collect()
    assert s2.height > s.height
    assert s2.select("ts", "gpu_uuid").is_duplicated().sum() == 0
