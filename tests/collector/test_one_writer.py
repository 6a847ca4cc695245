"""One live writer per spool (issue 13, item 2), with real processes: a second `up` or `collect` on a lake whose
collector is running says which process holds the spool and exits 1 before touching anything; the first one
loses nothing."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys

import polars as pl

from gpuledger.lake import scan
from gpuledger.spool import default_dir

CONFIG = """
[collector]
interval_s = 0.2
flush_interval_s = 300  # no flush of its own during the test: its open segment stays put
node = "n1"

[simulator]
nodes = 1
gpus_per_node = 2
models = ["H100"]
backfill_days = 0

[dashboard]
port = {port}
"""


def gpuledger(*args):
    return [sys.executable, "-m", "gpuledger.cli", *args]


def test_a_second_process_names_the_holder_exits_1_and_touches_nothing(tmp_path):
    lake, cfg = tmp_path / "lake", tmp_path / "c.toml"
    with socket.socket() as busy:  # the dashboards' port taken too, as by a running `up`
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        cfg.write_text(CONFIG.format(port=busy.getsockname()[1]))
        first = subprocess.Popen(
            gpuledger("collect", "--source", "sim", "--print-acks", "--lake", str(lake), "--config", str(cfg)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        acks = [first.stdout.readline()]  # blocks until the first batch is durable: the spool is open
        assert acks[0].startswith("ack "), first.stderr.read() if first.poll() is not None else acks
        spool = default_dir(str(lake), "n1")
        live = sorted(spool.glob("seg-*.wal"))
        holder = f"spool {spool} is in use by process {first.pid} on host {socket.gethostname()}"
        for second in (
            ["up", "--lake", str(lake), "--config", str(cfg)],
            ["collect", "--source", "sim", "--once", "--lake", str(lake), "--config", str(cfg)],
        ):
            r = subprocess.run(gpuledger(*second), capture_output=True, text=True, timeout=300)
            assert r.returncode == 1, r.stderr
            assert r.stderr.splitlines() == [
                f"Error: spool error: {holder}: one writer per spool (stop that one, or give this one another "
                "lake or collector.node)"
            ]
            assert set(live) <= set(spool.glob("seg-*.wal"))  # the live segment is still there, not replayed
    first.send_signal(signal.SIGTERM)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0 and "Traceback" not in err, err
    acks += out.splitlines()
    acked = {}
    for line in acks:
        _, table, rows, ts = line.split()
        if table == "gpu_samples":
            acked[int(ts)] = acked.get(int(ts), 0) + int(rows)
    got = scan(lake, "gpu_samples").collect().group_by(pl.col("ts").dt.epoch("us")).len()
    assert dict(zip(got["ts"].to_list(), got["len"].to_list(), strict=True)) == acked  # each once, none lost
    assert len(acked) >= 2
