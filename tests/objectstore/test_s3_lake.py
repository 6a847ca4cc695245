"""The collector on an object-store lake, against moto's S3 server in its own process (tests/s3_server.py): kill -9
and a store that stops mid-run losing and duplicating nothing, a collector started while the store is down, and every
misconfigured store one line and exit 1. (A flush's rows and names on both stores: tests/core/test_spool.py and
tests/core/test_lake.py.)"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest

from gpuledger.collector import sources
from gpuledger.collector.runner import Collector
from gpuledger.config import load
from gpuledger.lake import LakeWriter, frame_from_columns, scan, table_files
from gpuledger.spool import Spool
from gpuledger.store import StoreUnreachable, open_store
from gpuledger.store import s3 as store_s3

from s3_server import MotoServer, free_port

TABLES = ("gpu_samples", "gpu_processes", "nodes", "health_events")
CONFIG = """
[collector]
interval_s = 0.02
flush_interval_s = 0.15
process_interval_s = 0.5
node = "s3test"

[simulator]
nodes = 2
gpus_per_node = 4
models = ["H100"]
"""


def _collect(lake: str, cfg: Path, *args: str, env: dict | None = None, **kw):
    cmd = [sys.executable, "-m", "gpuledger.cli", "collect", "--source", "sim", "--lake", lake, "--config", str(cfg)]
    return subprocess.Popen([*cmd, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kw)


def _acks(lines, acked) -> None:
    for line in lines:
        parts = line.split()
        if len(parts) == 4 and parts[0] == "ack" and parts[1] == "gpu_samples":
            acked[int(parts[3])] += int(parts[2])


def _lost_and_duplicated(lake, acked) -> tuple[dict, int]:
    samples = scan(lake, "gpu_samples").collect()
    got = samples.group_by(pl.col("ts").dt.epoch("us")).len()
    got = dict(zip(got["ts"].to_list(), got["len"].to_list(), strict=True))
    lost = {ts: n - got.get(ts, 0) for ts, n in acked.items() if got.get(ts, 0) < n}
    return lost, int(samples.select("ts", "gpu_uuid").is_duplicated().sum())


def test_the_server_takes_more_requests_than_a_pipe_holds_and_30_file_scans(moto_server):
    """moto logs a line per request: to a pipe nobody read, it blocked after ~760 requests, which stalled the
    30-file polars scans and writes (docs/design/16-object-store.md). Its own server, so the count starts at 0."""
    frame = pl.DataFrame({"ts": range(5760), "node": [f"n{i % 30}" for i in range(5760)]})
    with MotoServer(moto_server.python) as srv:
        srv.create_bucket("lake-pipe")
        # a stalled server fails the test instead of hanging it
        opts = store_s3.storage_options(os.environ | srv.env()) | {"timeout": "20s", "max_retries": 0}
        for round_ in range(16):  # 16 x (30 writes + a 30-file scan): past the ~760 requests a pipe took
            for i in range(30):
                frame.write_parquet(f"s3://lake-pipe/t/r{round_}/part-n{i}.parquet", storage_options=opts)
            got = pl.scan_parquet(f"s3://lake-pipe/t/r{round_}/*.parquet", storage_options=opts).collect()
            assert got.height == 30 * 5760


def _sim_batches(cfg, tmp_path, scrapes=6):
    src = sources.make("sim", cfg, tmp_path / "simstate", 1_793_491_200.0)
    return [b for k in range(scrapes) for b in src.collect(1_793_491_200.0 + 10 * (k + 1)) if b.rows]


@pytest.mark.slow
def test_kill_minus_nine_on_an_s3_lake_loses_nothing(s3, tmp_path):
    """tests/collector/test_kill9.py on an object-store lake, fewer kills (each start pays a preflight over HTTP)."""
    kills = int(os.environ.get("GPULEDGER_KILLS", "50")) // 3
    lake = f"s3://{s3.bucket}/p"
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG)
    env = os.environ | {"XDG_STATE_HOME": str(tmp_path / "state")}  # the default spool folder of an s3 lake
    rng = random.Random(20261203)
    acked: dict[int, int] = defaultdict(int)
    for _ in range(kills):
        p = _collect(lake, cfg, "--print-acks", "--log-level", "warning", env=env)
        first = ""
        if rng.random() < 0.33:
            time.sleep(rng.uniform(0.3, 1.5))  # start-up, preflight, replay
        else:
            first = p.stdout.readline()
            assert first.startswith("ack "), (first, p.stderr.read() if p.poll() is not None else "")
            time.sleep(rng.uniform(0.0, 0.8))
        p.send_signal(signal.SIGKILL)
        out, err = p.communicate()
        assert p.returncode == -signal.SIGKILL, err
        _acks([first, *out.splitlines()], acked)
        for t in TABLES:  # every object a reader can list is a whole Parquet file
            for key in table_files(lake, t):
                pl.read_parquet_schema(open_store(lake).get(key))
    p = _collect(lake, cfg, "--once", env=env)
    out, err = p.communicate()
    assert p.returncode == 0, err
    lost, duplicated = _lost_and_duplicated(lake, acked)
    spool = tmp_path / "state" / "gpuledger" / "spool" / "s3" / s3.bucket / "p" / "s3test"
    print(f"\nkill -9 x{kills} on s3: {sum(acked.values())} acknowledged samples; lost {lost}; duplicated {duplicated}")
    assert len(acked) > kills
    assert lost == {}
    assert duplicated == 0
    assert spool.is_dir() and not list(spool.glob("seg-*.wal"))[1:]


@pytest.mark.slow
def test_the_store_stopped_mid_run_and_started_again_loses_and_duplicates_nothing(moto_server, tmp_path, monkeypatch):
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG + '\n[lake]\npath = "s3://lake-restart/p"\n')
    with MotoServer(moto_server.python) as srv:
        srv.create_bucket("lake-restart")
        for k, v in srv.env().items():  # for this process's reads of the lake at the end
            monkeypatch.setenv(k, v)
        env = os.environ | {"XDG_STATE_HOME": str(tmp_path / "state")}
        p = subprocess.Popen(
            [sys.executable, "-m", "gpuledger.cli", "collect", "--source", "sim", "--print-acks", "--config", str(cfg)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert p.stdout.readline().startswith("ack ")
        time.sleep(1.0)
        # moto keeps objects in memory; a real store's disks keep them. The collector is frozen while they are copied
        # out and the server stopped, so nothing it writes falls between the copy and the stop.
        p.send_signal(signal.SIGSTOP)
        kept = srv.save("lake-restart")
        assert kept
        srv.stop()
        p.send_signal(signal.SIGCONT)
        time.sleep(2.0)  # scrapes go on into the spool; flushes fail and back off
        srv.start()
        srv.load("lake-restart", kept)
        time.sleep(4.0)  # the backed-off flush comes round again
        p.send_signal(signal.SIGTERM)  # a clean stop flushes what is left
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert "flush failed (failure 1; next try in 0 s), the spool keeps the data" in err
        assert "unreachable" in err
        assert "flush works again after" in err
        acked: dict[int, int] = defaultdict(int)
        _acks(out.splitlines(), acked)
        lake = open_store("s3://lake-restart/p")
        lost, duplicated = _lost_and_duplicated(lake, acked)
    assert len(acked) > 50
    assert lost == {}
    assert duplicated == 0


def _once(lake: str, cfg: Path, env: dict) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "gpuledger.cli", "collect", "--source", "sim", "--once", "--lake", lake]
    return subprocess.run([*cmd, "--config", str(cfg)], capture_output=True, text=True, env=env, timeout=120)


def _analyze(lake: str, cfg: Path, env: dict) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "gpuledger.cli", "analyze", "--lake", lake, "--config", str(cfg)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


def _last_line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    return r.stderr.strip().splitlines()[-1]


def test_a_misconfigured_store_is_one_line_and_exit_1(moto_server, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG)
    with MotoServer(moto_server.python) as srv:  # its own server: auth stays on
        srv.create_bucket("lake-auth")
        ro_key, ro_secret = _read_only_user(srv)
        key, secret = srv.enforce_auth()
        base = os.environ | srv.env() | {"XDG_STATE_HOME": str(tmp_path / "state")}
        good = base | {"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret}
        down = f"http://127.0.0.1:{free_port()}"
        cases = {
            "unreachable": (good | {"AWS_ENDPOINT_URL": down}, "s3://lake-auth/p"),
            "bad secret": (good | {"AWS_SECRET_ACCESS_KEY": "wrong"}, "s3://lake-auth/p"),
            "unknown key": (good | {"AWS_ACCESS_KEY_ID": "AKIANOBODY"}, "s3://lake-auth/p"),
            "missing bucket": (good, "s3://no-such-lake/p"),
            "read only": (good | {"AWS_ACCESS_KEY_ID": ro_key, "AWS_SECRET_ACCESS_KEY": ro_secret}, "s3://lake-auth/p"),
        }
        lines = {name: _last_line(_once(lake, cfg, env)) for name, (env, lake) in cases.items()}
        assert _once("s3://lake-auth/p", cfg, good).returncode == 0  # the same, configured right, works
        analyze = {name: _last_line(_analyze(lake, cfg, env)) for name, (env, lake) in cases.items()}
        assert _analyze("s3://lake-auth/p", cfg, good).returncode == 0
    # `analyze` meets the store first at its lease: the same problems, named the same way.
    lease = "s3://lake-auth/p/_state/analytics/lease.json"
    assert analyze["unreachable"] == (
        f"Error: lake error: object store endpoint {down} unreachable, while writing the analytics lease {lease}"
    )
    assert "(SignatureDoesNotMatch): bad credentials, while writing the analytics lease" in analyze["bad secret"]
    assert "(InvalidAccessKeyId): bad credentials" in analyze["unknown key"]
    assert analyze["missing bucket"].startswith("Error: lake error: bucket 'no-such-lake' does not exist at ")
    assert analyze["read only"] == (
        f"Error: lake error: no permission to write to {lease} (AccessDenied), while writing the analytics lease"
    )
    assert lines["unreachable"] == (
        f"Error: lake error: object store endpoint {down} unreachable, while reading s3://lake-auth/p/_sim/default.json"
    )
    assert lines["bad secret"].startswith(f"Error: lake error: object store refused access key {key!r} for s3://")
    assert "(SignatureDoesNotMatch): bad credentials" in lines["bad secret"]
    assert "(InvalidAccessKeyId): bad credentials" in lines["unknown key"]
    assert lines["missing bucket"].startswith(
        f"Error: lake error: bucket 'no-such-lake' does not exist at {srv.url} (s3://no-such-lake/p"
    )
    assert lines["read only"].startswith("Error: lake error: no permission to write to s3://lake-auth/p/")
    assert "(AccessDenied)" in lines["read only"]


def _read_only_user(srv: MotoServer) -> tuple[str, str]:
    """An IAM user that may read and list the lake but not write it; made before enforce_auth, while moto still
    takes any request."""
    script = f"""
import boto3, json
kw = dict(endpoint_url={srv.url!r}, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
iam = boto3.client("iam", **kw)
iam.create_user(UserName="reader")
doc = {{"Version": "2012-10-17", "Statement": [{{"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"],
        "Resource": "*"}}]}}
iam.put_user_policy(UserName="reader", PolicyName="ro", PolicyDocument=json.dumps(doc))
k = iam.create_access_key(UserName="reader")["AccessKey"]
print(json.dumps([k["AccessKeyId"], k["SecretAccessKey"]]))
"""
    import json

    r = subprocess.run([srv.python, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return tuple(json.loads(r.stdout))


def test_pyarrow_and_polars_read_the_lake_with_the_settings_the_store_resolves(s3):
    """The standard AWS variables (set by the s3 fixture) reach every client through gpuledger.store.s3 alone."""
    import pyarrow.fs as pafs

    writer = LakeWriter(f"s3://{s3.bucket}/p")
    rows = frame_from_columns(
        "health_events",
        {"ts": [1_793_491_200_000_000], "cluster": ["c"], "node": ["n1"], "kind": ["xid"], "source": ["nvml"]},
    )
    (key,) = writer.write("health_events", rows, "n1-1")
    assert writer.store.url(key) == f"s3://{s3.bucket}/p/health_events/date=2026-11-01/part-n1-1.parquet"
    info = store_s3.pyarrow_filesystem().get_file_info(f"{s3.bucket}/{(writer.store.loc / key).key}")
    assert info.type == pafs.FileType.File and info.size > 0
    got = pl.read_parquet(writer.store.url(key), storage_options=writer.store.storage_options)
    assert got["node"].to_list() == ["n1"] and got["kind"].to_list() == ["xid"]


def test_a_collector_started_while_the_store_is_down_spools_and_flushes_once_it_answers(
    moto_server, tmp_path, monkeypatch, caplog
):
    """A node booting during a store outage: `collect` starts all the same, spools, and its flush writes everything
    once the store answers. `collect --once` (and a start without wait_for_lake) still fails with one line."""
    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text(CONFIG)
    batches = _sim_batches(load(cfg_path), tmp_path)

    class Replay:
        name = "replay"

        def __init__(self):
            self.left = list(batches)

        def collect(self, now_s):
            yield from self.left
            self.left = []

        def close(self):
            pass

    srv = MotoServer(moto_server.python)  # not started yet: its port refuses
    for k, v in srv.env().items():
        monkeypatch.setenv(k, v)
    now = [1_793_491_260.0]
    col = Collector(
        [Replay()], Spool(tmp_path / "spool", "n1"), LakeWriter("s3://lake-late/p"), "c", "n1", clock=lambda: now[0]
    )
    with pytest.raises(StoreUnreachable, match=rf"^object store endpoint {srv.url} unreachable"):
        LakeWriter("s3://lake-late/p").init()
    assert col.start(wait_for_lake=True) == 0
    assert col.scrape().rows == sum(b.rows for b in batches)
    col.flush_logged()
    assert "flush failed (failure 1; next try in 0 s)" in caplog.text
    assert len(list((tmp_path / "spool").glob("seg-*.wal"))) >= 2  # the flushed-to-be segment and the open one
    try:
        srv.start()
        srv.create_bucket("lake-late")
        now[0] += 30
        col.flush_logged()
        assert "flush works again after 1 failure(s)" in caplog.text
        got = scan("s3://lake-late/p", "gpu_samples").collect()
        want = sum(b.rows for b in batches if b.table == "gpu_samples")
        assert got.height == want and want > 0
        col.close()
    finally:
        srv.stop()
