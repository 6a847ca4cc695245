"""The served webhook (`gpuledger enforcer serve`) on an object-store lake through a store outage (moto's S3 server
in its own process): with the store stopped it keeps deciding from the table it loaded while the audit waits in its
local spool until the store answers again, also across a restart. (`enforcer check` and the decision table on both
stores: tests/enforcer/test_check.py, test_quota_keys.py, test_server_tls.py.)"""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
import re
import shutil
import signal

import pytest

from gpuledger.store import open_store

from builders import serve_enforcer, stop_enforcer
from conftest import END, REPO
from s3_server import MotoServer, upload

AT = dt.datetime.fromtimestamp(END, dt.timezone.utc).isoformat()  # the analysed lake's end: its table is fresh
H100 = "NVIDIA H100 80GB HBM3"
REVIEW = json.loads(
    (REPO / "tests" / "fixtures" / "admission" / "kubewarden_loadtesting_pod_create_v1.json").read_text()
)
# The analysed lake's table is from END, long ago: any age is fresh, so the policies (not the failure mode) decide.
FRESH = "[enforcer]\nmax_table_age_s = 1e12\n"


def gpu_review(uid: str, gpus: int) -> dict:
    """DERIVED from the kubewarden Pod CREATE: `gpus` H100s on its first container, in vision's namespace."""
    doc = copy.deepcopy(REVIEW)
    doc["request"].update(uid=uid, namespace="vision-train")
    doc["request"]["object"]["metadata"]["namespace"] = "vision-train"
    spec = doc["request"]["object"]["spec"]
    spec["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    spec["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    return doc


def serve(tmp_path, lake, replica: str, env: dict):
    return serve_enforcer(tmp_path, lake, replica, env, start_s=60)


def stop(p) -> str:
    """SIGTERM, what the kubelet sends: the audit is flushed on the way out. Returns its stderr."""
    return stop_enforcer(p, signal.SIGTERM, wait_s=60)


def _sql(cli, lake: str, query: str) -> list[dict]:
    r = cli("sql", "--lake", lake, "--format", "json", query)
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def _hook_env(tmp_path) -> dict:
    """A served webhook's environment: a fresh decision table's config, no cluster to watch, and its audit spool
    (an S3 lake's is on local disk) under tmp_path/state."""
    (tmp_path / "c.toml").write_text(FRESH)
    return os.environ | {
        "GPULEDGER_CONFIG": str(tmp_path / "c.toml"),
        "KUBECONFIG": str(tmp_path / "no-kubeconfig"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }


@pytest.mark.slow
def test_served_on_s3_as_on_the_local_lake_and_the_audit_survives_a_store_outage(
    cli, moto_server, analysed_lake, tmp_path, monkeypatch
):
    env = _hook_env(tmp_path)
    first = [REVIEW, gpu_review("u-deny", 100), gpu_review("u-small", 1)]
    # The local lake's answers, from the same command.
    local = tmp_path / "local"
    shutil.copytree(analysed_lake, local)
    p, client = serve(tmp_path, local, "r1", dict(env))
    want = [client.post("/validate", json=r).json()["response"] for r in first]
    client.close()
    stop(p)
    assert [r["allowed"] for r in want] == [True, False, True]

    # Its own server: this test stops it, and moto forgets every object when it stops (saved and put back).
    with MotoServer(moto_server.python) as srv:
        srv.create_bucket("lake-hook")
        for k, v in srv.env().items():
            monkeypatch.setenv(k, v)
        lake = open_store("s3://lake-hook/p")
        upload(analysed_lake, lake)
        p, client = serve(tmp_path, str(lake), "r1", env | srv.env())
        try:
            assert client.get("/readyz").status_code == 200  # the decision table, read from the bucket
            assert [client.post("/validate", json=r).json()["response"] for r in first] == want
            kept = srv.save("lake-hook")
            srv.stop()
            # The store is gone: decisions go on from the table loaded, the audit waits in the local spool.
            during = [
                client.post("/validate", json=gpu_review(f"u-out-{i}", n)).json()["response"]
                for i, n in enumerate((1, 100))
            ]
            assert [(r["uid"], r["allowed"]) for r in during] == [("u-out-0", True), ("u-out-1", False)]
            # The webhook counts what it admitted since the table was loaded: u-small and u-out-0, one GPU each.
            held = float(re.match(r"tenant vision uses (\S+) of", want[1]["status"]["message"]).group(1))
            assert during[1]["status"]["message"] == (
                f"tenant vision uses {held + 2:g} of 40 {H100} GPUs; this Pod asks 100 "
                f"(quota exceeded by {held + 2 + 100 - 40:g})"
            )
            client.close()
            srv.start()
            srv.load("lake-hook", kept)
        finally:
            stop(p)
        rows = _sql(cli, str(lake), "SELECT uid, node, decision FROM admission_decisions ORDER BY uid")
        spool = tmp_path / "state" / "gpuledger" / "spool" / "s3" / "lake-hook" / "p" / "webhook-r1"
        assert spool.is_dir() and not [f for f in spool.glob("seg-*.wal") if f.stat().st_size]
    uids = [REVIEW["request"]["uid"], "u-deny", "u-out-0", "u-out-1", "u-small"]
    decision = ["allow", "deny", "allow", "deny", "allow"]
    assert rows == sorted(
        ({"uid": u, "node": "r1", "decision": d} for u, d in zip(uids, decision, strict=True)), key=lambda r: r["uid"]
    )
    # The local lake's audit has the same rows for the same reviews.
    local_rows = _sql(cli, str(local), "SELECT uid, node, decision FROM admission_decisions ORDER BY uid")
    assert local_rows == [r for r in rows if not r["uid"].startswith("u-out")]


@pytest.mark.slow
def test_stopped_while_the_store_is_down_the_next_start_writes_the_spooled_audit(
    cli, moto_server, analysed_lake, tmp_path, monkeypatch
):
    env = _hook_env(tmp_path)
    spool = tmp_path / "state" / "gpuledger" / "spool" / "s3" / "lake-down" / "p" / "webhook-r1"
    with MotoServer(moto_server.python) as srv:
        srv.create_bucket("lake-down")
        for k, v in srv.env().items():
            monkeypatch.setenv(k, v)
        lake = open_store("s3://lake-down/p")
        upload(analysed_lake, lake)
        p, client = serve(tmp_path, str(lake), "r1", env | srv.env())
        try:
            kept = srv.save("lake-down")
            srv.stop()
            answers = [client.post("/validate", json=gpu_review(f"u-{n}", n)).json()["response"] for n in (1, 100)]
            assert [r["allowed"] for r in answers] == [True, False]
            client.close()
        finally:
            err = stop(p)  # the store never came back: the last flush gives up, one line
        assert "unreachable" in err and f"the decisions stay in {spool} until a start writes them" in err
        assert [f for f in spool.glob("seg-*.wal") if f.stat().st_size]
        srv.start()
        srv.load("lake-down", kept)
        p, client = serve(tmp_path, str(lake), "r1", env | srv.env())  # its start writes what the spool kept
        client.close()
        stop(p)
        rows = _sql(cli, str(lake), "SELECT uid, node, decision FROM admission_decisions ORDER BY uid")
    assert rows == [
        {"uid": "u-1", "node": "r1", "decision": "allow"},
        {"uid": "u-100", "node": "r1", "decision": "deny"},
    ]
    assert not [f for f in spool.glob("seg-*.wal") if f.stat().st_size]
