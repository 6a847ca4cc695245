"""`analyze --scheduler`: the pass over raw samples on a real Dask cluster (2 worker processes over TCP).

The lake a cluster run writes is compared with the local run's, table by table, row for row (DuckDB EXCEPT ALL
both ways, over every column: the run-time column computed_at is the run's `--to`, the same in both runs, so no
column is left out); so is the list of files, so no partition is written twice.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import cloudpickle
import dask
import polars as pl
import pytest
from distributed import Client, LocalCluster

from gpuledger import schema
from gpuledger.analytics import runner
from gpuledger.analytics.dask_engine import stage_day
from gpuledger.analytics.runner import TELEMETRY, run, watermark
from gpuledger.errors import ClusterError
from gpuledger.lake import table_files
from gpuledger.store import open_store

from builders import all_keys, on_disk, put_lake
from builders import assert_same_lake as same_lake
from conftest import END, REPO, make_lake

TO = "2026-11-02T00:00:00+00:00"  # END


def _cluster() -> LocalCluster:
    return LocalCluster(n_workers=2, threads_per_worker=1, processes=True, protocol="tcp", dashboard_address=":0")


@pytest.fixture(scope="module")
def cluster():
    with _cluster() as c:
        yield c


def assert_same_lake(a: Path, b: Path) -> None:
    """builders.assert_same_lake, the telemetry tables among them, and the same watermarks."""
    same_lake(a, b)
    assert {*TELEMETRY} <= {t for t in schema.TABLES if table_files(a, t)}
    for job in TELEMETRY:
        assert watermark(a, job) == watermark(b, job)


def _copies(tmp_path: Path, *names: str, **lake) -> list[Path]:
    src = tmp_path / "src"
    make_lake(src, nodes=2, gpus=2, step_s=60, **lake)
    for n in names:
        shutil.copytree(src, tmp_path / n)
    return [tmp_path / n for n in names]


def test_local_path_imports_no_dask(small_lake, tmp_path):
    lake = tmp_path / "lake"
    shutil.copytree(small_lake, lake)
    code = (
        "import sys\n"
        "from gpuledger.cli import main\n"
        f"main(['analyze', '--lake', {str(lake)!r}, '--to', {TO!r}], standalone_mode=False)\n"
        "print('loaded:', sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "gpu_5min: 3,456 rows" in done.stdout  # 12 GPUs x 288 five-minute buckets of a day: the run did happen
    assert "loaded: []" in done.stdout


def test_cluster_run_writes_what_the_local_run_writes(store, tmp_path, monkeypatch, request):
    """On each kind of Store: the workers read the store with their own settings and stage each day's files, the
    client publishes them; nothing staged is left."""
    (local,) = _copies(tmp_path, "local", days=2.5)
    put_lake(tmp_path / "src", store)
    monkeypatch.setattr(runner, "CHUNK_DAYS", 2)  # Oct 30-31, then Nov 1-2: two chunks, each published whole
    with contextlib.ExitStack() as stack:
        # Worker processes take the AWS settings from the environment they start in, which the s3 fixture has just
        # set: a cluster of their own for an object-store lake.
        cluster = request.getfixturevalue("cluster") if store.folder is not None else stack.enter_context(_cluster())
        run(local, until_s=END)
        got = {r.job: r.rows for r in run(store, until_s=END, scheduler=cluster.scheduler_address)}
        assert got["gpu_5min"] == 4 * 288 * 2.5  # 4 GPUs x 288 buckets a day x 2.5 days
        _assert_same_as(store, local, tmp_path / "got-1")
        # A re-run from mid-morning: the workers keep that day's earlier rows from the files they replace.
        from_s = END - 5.5 * 3600
        run(local, until_s=END, from_s=from_s)
        run(store, until_s=END, from_s=from_s, scheduler=cluster.scheduler_address)
        _assert_same_as(store, local, tmp_path / "got-2")
    assert not [k for k in all_keys(store) if "staging" in k or k.endswith(".tmp")]


def _assert_same_as(store, local: Path, copy: Path) -> None:
    """assert_same_lake of the store's tables (copied to `copy`) and the local lake, and the same watermarks."""
    on_disk(store, copy, keep=lambda key: not key.startswith("_state/"))
    same_lake(local, copy)
    assert {*TELEMETRY} <= {t for t in schema.TABLES if table_files(copy, t)}
    for job in TELEMETRY:
        assert watermark(store, job) == watermark(local, job) == END


def _hold_tasks(marks: str) -> None:
    """Run on each worker: its telemetry tasks say they started, then wait for `go` (so one can be killed mid-task).
    A worker the nanny restarts after a kill is a fresh process, without this."""
    import os
    import time
    from pathlib import Path

    from gpuledger.analytics import dask_engine

    real = dask_engine.telemetry_day

    def held(lake, day, *args):
        Path(marks, f"started-{os.getpid()}-{day}").touch()
        while not Path(marks, "go").exists():
            time.sleep(0.05)
        return real(lake, day, *args)

    dask_engine.telemetry_day = held


def _wait_for(found, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while not (got := found()):
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)
    return got


@pytest.mark.parametrize("allowed_failures", [0, 3], ids=["fails", "dask-retries"])
def test_worker_killed_mid_run(tmp_path, allowed_failures):
    local, lake = _copies(tmp_path, "local", "lake", days=2)
    run(local, until_s=END)
    marks = tmp_path / "marks"
    marks.mkdir()
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test module
    with dask.config.set({"distributed.scheduler.allowed-failures": allowed_failures}):
        cluster = _cluster()
    with cluster, Client(cluster, set_as_default=False) as client:
        client.run(_hold_tasks, str(marks))
        outcome = {}

        def analyze():
            try:
                outcome["reports"] = run(lake, until_s=END, scheduler=cluster.scheduler_address)
            except ClusterError as e:
                outcome["error"] = e

        t = threading.Thread(target=analyze)
        t.start()
        started = _wait_for(lambda: sorted(marks.glob("started-*")))
        os.kill(int(started[0].name.split("-")[1]), signal.SIGKILL)
        assert not any(table_files(lake, job) for job in TELEMETRY)  # nothing of the pass is visible mid-run
        (marks / "go").touch()
        t.join(120)
        assert not t.is_alive()
        if allowed_failures == 0:
            msg = str(outcome["error"])
            assert "failed for day(s) 2026-1" in msg and "\n" not in msg, msg
            assert cluster.scheduler_address in msg
            # The chunk (all three days) was not published, and the watermark did not move.
            assert not any(table_files(lake, job) for job in TELEMETRY)
            assert watermark(lake, "gpu_5min") is None
        else:
            assert "error" not in outcome, outcome
            assert_same_lake(local, lake)
        assert not list(lake.glob("*/date=*/.*.tmp"))
        run(lake, until_s=END, scheduler=cluster.scheduler_address)  # the re-run completes
    assert_same_lake(local, lake)


def _files(lake: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(lake)): (p.stat().st_size, p.stat().st_mtime_ns) for p in lake.rglob("*")}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the block ends: nothing listens there


def test_scheduler_that_does_not_answer(cli, small_lake, tmp_path):
    lake = tmp_path / "lake"
    shutil.copytree(small_lake, lake)
    before = _files(lake)
    address = f"tcp://127.0.0.1:{_closed_port()}"
    config = tmp_path / "gpuledger.toml"
    config.write_text(f'[analytics]\nscheduler = "{address}"\n')  # the config key, as `up` would use it
    r = cli("analyze", "--lake", lake, "--config", config, "--to", TO)
    assert r.exit_code == 1
    assert r.output.strip().splitlines() == [
        f"Error: cluster error: Dask scheduler {address} does not answer within 5 s"
    ]
    assert _files(lake) == before


def test_scheduler_address_is_checked(cli, small_lake, tmp_path):
    lake = tmp_path / "lake"
    shutil.copytree(small_lake, lake)
    before = _files(lake)
    r = cli("analyze", "--lake", lake, "--scheduler", "localhost", "--to", TO)
    assert r.exit_code == 1
    assert r.output.strip().splitlines() == [
        "Error: cluster error: Dask scheduler address 'localhost' is not tcp://HOST:PORT (or tls://HOST:PORT)"
    ]
    assert _files(lake) == before


def test_a_worker_that_does_not_see_the_lake_fails_its_day(small_lake, tmp_path):
    """A worker on another filesystem would read no samples and stage empty days: it fails its task instead."""
    day = dt.date(2026, 11, 1)
    lo = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    elsewhere = tmp_path / "elsewhere"
    staging = open_store(elsewhere).staging("run")  # the client made it on a disk this worker lacks
    shutil.rmtree(elsewhere)
    where = elsewhere / "_state" / "staging" / "run"
    with pytest.raises(ClusterError, match=f"does not see the lake at {elsewhere} \\(no {where}\\)"):
        stage_day(str(small_lake), staging, day, lo, lo + dt.timedelta(days=1), pl.DataFrame())
