"""The analytics' state and lease on an object-store lake (issue 16 item 1), against moto's S3 server in its own
process (tests/s3_server.py).

A simulated fleet is collected into the bucket (the collector's own sim source, spool and lake writer, on a simulated
clock: a scrape every 2 minutes, a flush every hour, as `gpuledger collect --source sim` does in real time), then
analysed there. The state a run commits is a snapshot in the bucket: the run's local working copy is only a cache,
and a run without it writes what a run from scratch of the same raw files writes. One run at a time: a live lease
object refuses a second run in one line naming its holder and nothing derived is written; a run killed with -9 leaves
its lease, which refuses the next run until it expires, and the run after that writes what an uninterrupted run
writes. (What the runs write, run after run, on both stores: tests/analytics/test_incremental.py.)
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import duckdb
import obstore
import polars as pl
import pytest

from gpuledger.analytics.runner import run
from gpuledger.collector import sources
from gpuledger.collector.runner import Collector
from gpuledger.config import SimConfig, defaults
from gpuledger.lake import LakeWriter
from gpuledger.schema import DERIVED_TABLES
from gpuledger.spool import Spool
from gpuledger.store import open_store
from gpuledger.store.s3 import S3Store

from builders import differences
from s3_server import download, upload

T0 = 1_793_491_200.0 - 2 * 3600  # 2026-10-31T22:00Z: HOURS from here span two dates
HOURS = 3
PREFIX = "fleet/eu"
# 12 GPUs of two models at a load that keeps jobs starting and finishing within a few hours: with this fleet every
# derived table had rows after 3 hours (the default load 0.5 on 8 GPUs gave 3 job rows and an empty queue_depth).
SIM = SimConfig(nodes=3, gpus_per_node=4, models=("H100", "A100"), load=1.2)
DERIVED = frozenset(t.name for t in DERIVED_TABLES)
LEASE = "_state/analytics/lease.json"
MANIFEST = "_state/analytics/manifest.json"
# The killed run's lease lives this long after its last renewal (renewed every third of it). The refused rerun has to
# start a Python process and read the lease before then, on 2 shared cores: with 3 s, as little as 2 s would be left
# for that. The test waits the rest out once.
LEASE_S = 5
# Two samples in each 5-minute bucket (what gpu_5min needs to measure time covered), at half the cost of one a minute.
SCRAPE_S = 120


class SimFleet:
    """The collector (sim source, spool, lake writer) on a simulated clock starting at T0."""

    def __init__(self, lake, spool_dir: Path):
        self.now = T0
        cfg = replace(defaults(), simulator=SIM)
        src = sources.make("sim", cfg, lake, T0)  # its fleet state goes into the lake (_sim/), as collect's does
        spool = Spool(spool_dir, "n1")
        self.collector = Collector([src], spool, LakeWriter(lake), cfg.cluster, "n1", clock=lambda: self.now)
        self.collector.start()

    def advance(self, hours: int) -> float:
        """Scrape every SCRAPE_S for `hours`, flushing every hour; returns the clock."""
        for k in range(1, hours * 3600 // SCRAPE_S + 1):
            self.now += SCRAPE_S
            self.collector.scrape()
            if k % (3600 // SCRAPE_S) == 0:
                self.collector.flush()
        return self.now

    def close(self) -> None:
        self.collector.close()


def _raw(rel: str) -> bool:
    """A key (relative to the lake) that analyze reads and never writes."""
    return rel.split("/")[0] not in DERIVED and not rel.startswith("_state/")


def _derived(rel: str) -> bool:
    return rel.split("/")[0] in DERIVED


def _iso(t_s: float) -> str:
    return dt.datetime.fromtimestamp(t_s, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _keys(lake: S3Store) -> set[str]:
    """Every object under the lake's prefix, relative to it (one LIST: merged and state objects too)."""
    prefix = f"{lake.loc.key}/"
    return {m["path"][len(prefix) :] for batch in obstore.list(lake.client(), prefix=prefix) for m in batch}


def _get(lake: S3Store, rel: str) -> bytes | None:
    return lake.get(rel)


def _analyze(lake, until_s: float, env: dict, config: Path | None = None, **kw):
    cmd = [sys.executable, "-m", "gpuledger.cli", "analyze", "--lake", str(lake), "--to", _iso(until_s)]
    cmd += ["--log-level", "warning"] + (["--config", str(config)] if config else [])
    if kw.pop("background", False):
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180)


def _ok(r: subprocess.CompletedProcess) -> None:
    assert r.returncode == 0, r.stderr[-3000:]


def _refusal(r: subprocess.CompletedProcess) -> str:
    """The one stderr line of a refused run."""
    assert r.returncode == 1, (r.returncode, r.stderr[-3000:])
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def _files(root: Path, table: str) -> list[str]:
    return sorted(str(p) for p in (root / table).glob("date=*/*.parquet"))


def _same_as_local(lake: S3Store, local: Path, copy: Path, fitted_when=frozenset()) -> dict[str, int]:
    """Downloads the bucket's derived tables into `copy` and compares them with the local lake's: the same keys, the
    same rows (those of the tables `fitted_when`, but for their computed_at: the time of a fit that a later run may
    reuse). Returns each derived table's rows."""
    got = download(lake, copy, keep=_derived)
    for rel in got:
        assert re.fullmatch(r"([a-z0-9_]+)/date=\d{4}-\d\d-\d\d/part-\1\.parquet", rel), rel
    want = sorted(p.relative_to(local).as_posix() for t in DERIVED for p in (local / t).glob("date=*/*.parquet"))
    assert got == want
    rows = {}
    for table in sorted(DERIVED):
        files = _files(local, table)
        if table in fitted_when:
            a, b = (pl.read_parquet(_files(root, table)).drop("computed_at") for root in (copy, local))
            assert a.sort(a.columns).equals(b.sort(b.columns)) and a.height > 0, table
        else:
            assert differences(copy, local, table) == (0, 0), table
        rows[table] = (
            duckdb.connect().execute("SELECT count(*) FROM read_parquet(?)", [files]).fetchone()[0] if files else 0
        )
    return rows


def _filled(rows: dict[str, int]) -> None:
    """Most derived tables have rows: the comparison is of rows, not of empty tables."""
    assert sum(n > 0 for n in rows.values()) >= len(DERIVED) - 2, rows
    assert rows["gpu_hourly"] > 0 and rows["job_stats"] > 0 and rows["cost_allocation"] > 0, rows


@pytest.fixture
def env(s3, tmp_path) -> dict[str, str]:
    """The CLI's environment: the s3 fixture's AWS variables, and a state folder of this test's own (the home of the
    analytics' local working copy of an object-store lake)."""
    e = {k: v for k, v in os.environ.items() if k not in ("GPULEDGER_LAKE", "GPULEDGER_CONFIG")}
    return e | {"XDG_STATE_HOME": str(tmp_path / "state")}


@pytest.fixture(scope="module")
def raw_lake(tmp_path_factory) -> Path:
    """The fleet's HOURS collected into a local lake (raw tables only). Read-only: upload or copy it."""
    root = tmp_path_factory.mktemp("raw")
    fleet = SimFleet(root / "lake", root / "spool")
    fleet.advance(HOURS)
    fleet.close()
    return root / "lake"


def test_the_local_working_copy_is_only_a_cache_of_the_committed_state(s3, tmp_path):
    """A run commits its state to the bucket (manifest written, lease given up); with its working copy on this
    machine deleted, the next run, an hour of data later, pulls the snapshot and writes what one run from scratch
    writes. (Runs as data arrives equal a run from scratch on both stores: tests/analytics/test_incremental.py.)"""
    lake = open_store(f"s3://{s3.bucket}/{PREFIX}")
    fleet = SimFleet(lake, tmp_path / "spool")
    try:
        until = fleet.advance(HOURS)
        before = _keys(lake)  # the collector's files (and its write probe under _state/probe/), nothing of analyze's
        assert not [k for k in before if _derived(k) or k.startswith("_state/analytics/")], sorted(before)
        run(lake, until_s=until)
        keys = _keys(lake)
        assert MANIFEST in keys and LEASE not in keys  # committed, and the lease given up
        working = lake.state_folder("analytics")
        assert working.is_dir()
        shutil.rmtree(working)
        until = fleet.advance(1)
    finally:
        fleet.close()
    run(lake, until_s=until)
    assert LEASE not in _keys(lake)
    scratch = tmp_path / "scratch"
    assert any(rel.startswith("gpu_samples/") for rel in download(lake, scratch, keep=_raw))
    run(scratch, until_s=until)
    # The hour added completed no day: the forecast is the first run's fit, and its computed_at that run's time.
    _filled(_same_as_local(lake, scratch, tmp_path / "s3", fitted_when={"demand_forecast"}))


def test_a_live_lease_refuses_a_second_run_and_nothing_derived_is_written(s3, env, raw_lake):
    lake = open_store(f"s3://{s3.bucket}/{PREFIX}")
    assert upload(raw_lake, lake) > 10
    until = T0 + HOURS * 3600
    lease = json.dumps({"holder": "someone-else", "expires_at_s": time.time() + 3600}).encode()
    lake.put(LEASE, lease)

    line = _refusal(_analyze(lake, until, env))
    assert "someone-else" in line and LEASE in line, line
    keys = _keys(lake)
    assert not [k for k in keys if _derived(k)] and MANIFEST not in keys, sorted(keys)
    assert _get(lake, LEASE) == lease  # left as it was

    lake.delete([LEASE])
    _ok(_analyze(lake, until, env))
    keys = _keys(lake)
    assert MANIFEST in keys and LEASE not in keys
    assert {k.split("/")[0] for k in keys if _derived(k)} >= {"gpu_hourly", "job_stats", "cost_allocation"}


def test_a_run_killed_mid_way_holds_the_lease_until_it_expires_then_a_rerun_writes_an_uninterrupted_runs_tables(
    s3, env, raw_lake, tmp_path
):
    lake, local = open_store(f"s3://{s3.bucket}/{PREFIX}"), tmp_path / "local"
    upload(raw_lake, lake)
    shutil.copytree(raw_lake, local)
    until = T0 + HOURS * 3600
    config = tmp_path / "c.toml"
    config.write_text(f"[analytics]\nlease_s = {LEASE_S}\n")

    p = _analyze(lake, until, env, config, background=True)
    try:
        # Frozen as soon as a derived object is listed, so that nothing happens between seeing it and the kill.
        while p.poll() is None and not any(_derived(k) for k in _keys(lake)):
            time.sleep(0.01)
        p.send_signal(signal.SIGSTOP)
        assert p.poll() is None, f"analyze ended (rc {p.returncode}) before a derived object was listed"
        held = _get(lake, LEASE)
        assert held is not None, "analyze gave up its lease before it could be killed"
        assert MANIFEST not in _keys(lake)  # mid-run: not committed yet
    finally:
        p.send_signal(signal.SIGKILL)
        p.communicate()
    assert p.returncode == -signal.SIGKILL
    lease = json.loads(held)
    holder, expires_s = lease["holder"], float(lease["expires_at_s"])

    line = _refusal(_analyze(lake, until, env, config))  # at once: the dead run's lease is live
    assert str(holder) in line and LEASE in line, (line, lease)
    assert _get(lake, LEASE) == held

    _ok(_analyze(local, until, env, config))  # the uninterrupted run, while the lease runs out
    time.sleep(max(0.0, expires_s - time.time()) + 0.5)  # the lease expires: never renewed by a dead run
    _ok(_analyze(lake, until, env, config))
    assert LEASE not in _keys(lake)
    _filled(_same_as_local(lake, local, tmp_path / "s3"))
