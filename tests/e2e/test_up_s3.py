"""`gpuledger up` on an object-store lake (issue 16 item 1), end to end as a user runs it: one real process against
moto's S3 server in its own process (tests/s3_server.py) backfills the simulated fleet into `s3://bucket/x`,
collects live, runs the analytics (their state and lease in the bucket), serves the dashboards over the bucket, and
stops cleanly on Ctrl-C, with `gpuledger sql` reading the same bucket meanwhile."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import polars as pl
import pyarrow.fs as pafs
import pytest

from gpuledger.lake import scan

from builders import page_request
from s3_server import free_port

CONFIG = """
[collector]
interval_s = 1
flush_interval_s = 2
node = "ups3"

[dashboard]
port = {port}
auth_user = "ops"
auth_password_env = "UPS3_DASHBOARD_PASSWORD"

[exporter]
port = {exporter_port}
refresh_s = 1

[simulator]
nodes = 2
gpus_per_node = 2
models = ["L4"]
backfill_days = 0.05
backfill_step_s = 60
history_days = 0
# The window is the 72 minutes before the test's own clock: at the default load 0.5 its 4 GPUs saw no job in it at
# some times of day, and with no job the analytics write no decision table. At 2, jobs run at every hour.
load = 2.0
"""
GPUS = 2 * 2
# 0.05 days at 60 s = 72 steps, 72 or 73 by where the window starts on its step grid.
BACKFILL_STEPS = (72, 73)
# config.DEFAULT_TENANTS' "*" quotas
QUOTA_GPUS = {"nlp": 96, "platform": 16, "recsys": 48, "research": 32, "vision": 64}
PASSWORD = "s3cret"
LOGIN = {"Authorization": "Basic " + base64.b64encode(f"ops:{PASSWORD}".encode()).decode()}
DEADLINE_S = 180  # generous: on 2 shared cores all of it took 12-50 s (50 with the dashboards' 30 s refresh)


def _keys(server, bucket: str) -> set[str]:
    infos = server.filesystem().get_file_info(pafs.FileSelector(bucket, recursive=True, allow_not_found=True))
    return {i.path.removeprefix(f"{bucket}/") for i in infos if i.type == pafs.FileType.File}


def _get(url: str, headers: dict | None = None, data: bytes | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=data, headers=(headers or {}) | {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError:
        return 0, b""  # not listening yet


def _page(port: int, path: str) -> tuple[int, bytes]:
    """What the browser asks for to draw `path`: the page callback's output (figures drawn from the lake)."""
    return _get(f"http://127.0.0.1:{port}/_dash-update-component", LOGIN, json.dumps(page_request(path)).encode())


def _sql(lake: str, query: str, env: dict) -> pl.DataFrame:
    cmd = [sys.executable, "-m", "gpuledger.cli", "sql", "--lake", lake, "--format", "csv", query]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return pl.read_csv(r.stdout.encode())


@pytest.mark.slow
def test_up_on_an_s3_lake_backfills_analyses_serves_and_stops_cleanly(moto_server, tmp_path, monkeypatch):
    bucket = f"up-{uuid.uuid4().hex[:12]}"
    moto_server.create_bucket(bucket)
    lake = f"s3://{bucket}/x"
    env = os.environ | moto_server.env() | {"XDG_STATE_HOME": str(tmp_path / "state")}
    for k, v in moto_server.env().items():  # this process reads the bucket too (polars' scan below)
        monkeypatch.setenv(k, v)
    port, exporter_port = free_port(), free_port()
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG.format(port=port, exporter_port=exporter_port))
    err = tmp_path / "up.stderr"
    with err.open("w") as log:
        p = subprocess.Popen(
            [sys.executable, "-m", "gpuledger.cli", "up", "--lake", lake, "--config", str(cfg)],
            stdout=subprocess.DEVNULL,
            stderr=log,  # a file: a pipe nobody reads would fill and block the process
            env=env | {"UPS3_DASHBOARD_PASSWORD": PASSWORD},
        )
    try:
        # The analytics' first run starts with the process; its manifest is the state's last write.
        wanted = ("x/_state/analytics/manifest.json", "x/gpu_hourly/", "x/decisions/", "x/gpu_samples/")
        deadline = time.monotonic() + DEADLINE_S
        while True:
            keys = _keys(moto_server, bucket)
            missing = [w for w in wanted if not any(k == w or (w.endswith("/") and k.startswith(w)) for k in keys)]
            health = _get(f"http://127.0.0.1:{port}/healthz")
            if not missing and health == (200, b"ok\n"):
                break
            assert p.poll() is None, f"up exited {p.returncode}: {err.read_text()}"
            assert time.monotonic() < deadline, f"still missing {missing}, /healthz {health}; {err.read_text()}"
            time.sleep(1)
        head = err.read_text()
        assert "collector: the simulated fleet, because" in head
        assert f"gpuledger is up: lake {lake}, scraping every 1 s, dashboards on http://127.0.0.1:{port}/" in head

        # The dashboards read the bucket. Their snapshot of it was taken on the first request (Dash sets itself up
        # on any, /healthz included), maybe before the analytics' first run committed; it is taken again once the
        # manifest's ETag changes, checked every 30 s. So wait until the shell lists the lake's GPU model, then
        # the pages must draw from it. Every page but /healthz wants the login.
        assert _get(f"http://127.0.0.1:{port}/")[0] == 401
        assert _get(f"http://127.0.0.1:{port}/", LOGIN)[0] == 200
        while True:
            status, shell = _get(f"http://127.0.0.1:{port}/_dash-layout", LOGIN)
            if status == 200 and b"NVIDIA L4" in shell:
                break
            assert p.poll() is None, f"up exited {p.returncode}: {err.read_text()}"
            assert time.monotonic() < deadline, f"the dashboards never showed the lake's model: {status} {shell[:300]}"
            time.sleep(1)
        for path in ("/", "/tenants"):
            status, page = _page(port, path)
            assert status == 200 and b"NVIDIA L4" in page, (path, page[:300])

        # `gpuledger sql` on the same bucket while up writes to it: live scrapes past the backfill land there.
        while (n := _sql(lake, "SELECT count(*) AS n FROM gpu_samples", env)["n"][0]) <= GPUS * BACKFILL_STEPS[-1]:
            assert p.poll() is None, f"up exited {p.returncode}: {err.read_text()}"
            assert time.monotonic() < deadline, f"no live samples past the backfill's {n}: {err.read_text()}"
            time.sleep(1)
        # The enforcer's table, from the bucket: each default tenant's any-model quota ("*"), and for a tenant with
        # jobs on L4 the same quota again (only vision has a model of its own, H100).
        rows = _sql(lake, "SELECT tenant, gpu_model, quota_gpus FROM decisions", env)
        any_model = rows.filter(pl.col("gpu_model").is_null())
        assert dict(any_model.select("tenant", "quota_gpus").iter_rows()) == QUOTA_GPUS
        for tenant, model, quota in rows.filter(pl.col("gpu_model").is_not_null()).iter_rows():
            assert (model, quota) == ("NVIDIA L4", QUOTA_GPUS[tenant]), tenant
        # The exporter of derived figures reads the same bucket: the quotas, once it has seen the analytics commit.
        want = b'gpuledger_tenant_quota_gpus{cluster="default",gpu_model="*",tenant="nlp"} 96.0'
        while want not in (metrics := _get(f"http://127.0.0.1:{exporter_port}/metrics")[1]):
            assert time.monotonic() < deadline, f"the exporter never served the quotas: {metrics[-500:]}"
            time.sleep(1)

        p.send_signal(signal.SIGINT)  # Ctrl-C
        p.wait(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    rest = err.read_text()
    assert p.returncode == 0, rest
    assert "Traceback" not in rest, rest
    stopped = re.search(rf"stopped cleanly after (\d+) scrape\(s\); everything flushed to {re.escape(lake)}\n", rest)
    assert stopped, rest
    scrapes = int(stopped.group(1))
    assert scrapes >= 1

    # Everything flushed: the backfill's steps plus every live scrape of the 4 GPUs, read by polars and DuckDB
    # alike, no sample twice.
    samples = scan(lake, "gpu_samples").collect()
    assert samples.height in {GPUS * (b + scrapes) for b in BACKFILL_STEPS}, (samples.height, scrapes)
    assert samples.select("ts", "gpu_uuid").is_duplicated().sum() == 0
    assert _sql(lake, "SELECT count(*) AS n FROM gpu_samples", env)["n"][0] == samples.height
    keys = _keys(moto_server, bucket)
    assert "x/_state/analytics/lease.json" not in keys  # the analytics' lease released, none left to wait out
    assert not any(k.startswith("x/_spool") for k in keys)  # the spool is local (XDG_STATE_HOME), never the lake
