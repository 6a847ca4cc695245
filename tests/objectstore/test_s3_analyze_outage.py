"""The object store going away in the middle of `gpuledger analyze`: one line naming it and exit 1 (polars and obstore
raise their own types from deep inside a scan or a PUT: a traceback before), nothing committed; once the store is
back, the next run (after the dead run's lease expires) writes the tables an uninterrupted run writes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import obstore

from gpuledger.store import open_store

from builders import END, assert_same_lake, make_lake
from s3_server import MotoServer, download, upload

TO = "2026-11-02T00:00:00Z"  # END


def _analyze(lake: str, cfg, env: dict, **kw):
    cmd = [sys.executable, "-m", "gpuledger.cli", "analyze", "--lake", lake, "--to", TO, "--config", str(cfg)]
    return subprocess.Popen([*cmd, "--log-level", "warning"], env=env, text=True, **kw)


def test_the_store_lost_mid_run_is_one_line_and_the_next_run_recovers(moto_server, tmp_path):
    raw = tmp_path / "raw"
    make_lake(raw, nodes=3, gpus=4, days=4, step_s=300)
    cfg = tmp_path / "c.toml"
    cfg.write_text("[analytics]\nlease_s = 3\n")
    with MotoServer(moto_server.python) as srv:  # its own server: this one is stopped mid-run
        srv.create_bucket("lake-out")
        env = os.environ | srv.env() | {"XDG_STATE_HOME": str(tmp_path / "state")}
        lake = open_store("s3://lake-out/p")
        os.environ.update(srv.env())  # for upload, download and the listing below, in this process
        upload(raw, lake)
        store = lake.client()
        p = _analyze(str(lake), cfg, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # Once the first derived objects are in, the run has the job-level tables and the snapshot still to do.
        deadline = time.monotonic() + 120
        while not next(iter(obstore.list(store, prefix="p/gpu_5min/")), None):
            assert p.poll() is None and time.monotonic() < deadline, "the run ended before the store could be stopped"
            time.sleep(0.02)
        kept = srv.save("lake-out")  # what the store's disks would keep
        srv.stop()
        _, err = p.communicate(timeout=120)
        lines = err.strip().splitlines()
        assert p.returncode == 1 and "Traceback" not in err, err
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"Error: lake error: object store endpoint {srv.url} unreachable, while ")
        assert not any(k.endswith("_state/analytics/manifest.json") for k in kept)  # nothing committed

        srv.start()
        srv.load("lake-out", kept)
        # The dead run's lease (if it was in the saved objects) expires within lease_s; then a run completes.
        deadline = time.monotonic() + 60
        while (r := _analyze(str(lake), cfg, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)).wait() == 1:
            assert "another analytics run holds" in r.stderr.read() and time.monotonic() < deadline
            time.sleep(0.5)
        assert r.returncode == 0, r.stderr.read()
        download(lake, tmp_path / "got", keep=lambda rel: not rel.startswith("_state/"))
    from gpuledger.analytics.runner import run

    run(raw, until_s=END)
    assert assert_same_lake(raw, tmp_path / "got") > 10_000
