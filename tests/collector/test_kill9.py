"""kill -9 a real collector process at random moments, many times: no acknowledged sample may be lost or
duplicated, and no unreadable Parquet file may ever be visible.

The collector prints `ack <table> <rows> <first ts>` only after the batch is fsynced in the spool. Kills
land during start-up and replay, scrapes, spool appends and flushes (the flush interval is short on purpose).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict

import polars as pl
import pytest

from gpuledger.lake import scan, table_files
from gpuledger.spool import default_dir

KILLS = int(os.environ.get("GPULEDGER_KILLS", "50"))

CONFIG = """
[collector]
interval_s = 0.02
flush_interval_s = 0.15
process_interval_s = 0.5
node = "killtest"

[simulator]
nodes = 2
gpus_per_node = 4
models = ["H100"]
"""


def _start(lake, cfg):
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuledger.cli",
            "collect",
            "--source",
            "sim",
            "--print-acks",
            "--lake",
            str(lake),
            "--config",
            str(cfg),
            "--log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_kill_minus_nine_loses_nothing(tmp_path):
    lake = tmp_path / "lake"
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG)
    rng = random.Random(20261202)
    acked: dict[int, int] = defaultdict(int)  # gpu_samples ts -> rows acknowledged
    for _ in range(KILLS):
        p = _start(lake, cfg)
        first = ""
        # A third of the kills come blind (start-up, replay); the rest after the collector is running.
        if rng.random() < 0.33:
            time.sleep(rng.uniform(0.05, 1.0))
        else:
            first = p.stdout.readline()  # blocks until the first durable batch
            assert first.startswith("ack "), (first, p.stderr.read() if p.poll() is not None else "")
            time.sleep(rng.uniform(0.0, 0.6))
        p.send_signal(signal.SIGKILL)
        out, err = p.communicate()
        assert p.returncode == -signal.SIGKILL, err
        for line in [first, *out.splitlines()]:
            parts = line.split()
            if len(parts) == 4 and parts[0] == "ack" and parts[1] == "gpu_samples":
                acked[int(parts[3])] += int(parts[2])
        # At every moment, every visible file is a complete Parquet file.
        for f in lake.rglob("*.parquet"):
            pl.read_parquet_schema(f)
    # A last clean run replays whatever the last kill left in the spool.
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuledger.cli",
            "collect",
            "--source",
            "sim",
            "--once",
            "--lake",
            str(lake),
            "--config",
            str(cfg),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr

    files = [lake / f for f in table_files(lake, "gpu_samples")]
    unreadable = []
    for f in files:
        try:
            pl.read_parquet(f)
        except Exception as e:  # noqa: BLE001 - counting, then asserting
            unreadable.append((f, e))
    samples = scan(lake, "gpu_samples").collect()
    got = samples.group_by(pl.col("ts").dt.epoch("us")).len()
    got = dict(zip(got["ts"].to_list(), got["len"].to_list(), strict=True))
    lost = {ts: n - got.get(ts, 0) for ts, n in acked.items() if got.get(ts, 0) < n}
    duplicated = samples.select("ts", "gpu_uuid").is_duplicated().sum()
    print(
        f"\nkill -9 x{KILLS}: {sum(acked.values())} acknowledged samples in {len(acked)} scrapes; "
        f"lost {sum(lost.values())}; duplicated {duplicated}; files {len(files)}; unreadable {len(unreadable)}"
    )
    assert len(acked) > KILLS  # the loop really collected
    assert lost == {}
    assert duplicated == 0
    assert unreadable == []
    assert not list(default_dir(str(lake), "killtest").glob("seg-*.wal"))[1:]  # at most the empty open one
