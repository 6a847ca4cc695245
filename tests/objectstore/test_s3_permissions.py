"""The bucket permissions docs/deploy.md lists per component are enough, and what it says a component does not need
it does not use: each command runs as an IAM user allowed only those actions, on a moto server enforcing them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpuledger.store import open_store

from builders import make_lake
from s3_server import MotoServer, upload

READ = ("s3:ListBucket", "s3:GetObject")
WRITE = (*READ, "s3:PutObject")
ALL = (*WRITE, "s3:DeleteObject")
TO = "2026-11-02T00:00:00Z"  # builders.END
LAKE = open_store("s3://lake-perm/p")  # each server's own AWS variables, read at each use


def _gl(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuledger.cli", *args], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    path = tmp_path_factory.mktemp("perm") / "raw"
    make_lake(path, nodes=2, gpus=2, days=1, step_s=1800)
    return path


def _as_user(srv: MotoServer, raw, tmp_path, monkeypatch, actions: tuple[str, ...], analysed: bool) -> dict:
    """The raw lake in the server's bucket (analysed, with `analysed`), then auth on: the environment of a user
    allowed only `actions`."""
    with monkeypatch.context() as m:  # the server's variables, for the upload (and the analysis) in this process
        for k, v in srv.env().items():
            m.setenv(k, v)
        upload(raw, LAKE)
        if analysed:
            r = _gl(
                os.environ | {"XDG_STATE_HOME": str(tmp_path / "admin")}, "analyze", "--lake", str(LAKE), "--to", TO
            )
            assert r.returncode == 0, r.stderr[-500:]
    key, secret = srv.enforce_auth(actions)
    env = os.environ | srv.env() | {"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret}
    return env | {"XDG_STATE_HOME": str(tmp_path / "state")}


@pytest.mark.parametrize(
    ("actions", "steps"),
    [
        # The collectors: a flush PUTs new keys and reads one back on a conflict; never a DELETE.
        (WRITE, [("collect", "--source", "sim", "--once")]),
        # The analytics and compaction rewrite and delete.
        (ALL, [("analyze", "--to", TO), ("compact",)]),
        # The dashboards (their queries): reads only.
        (READ, [("sql", "SELECT count(*) AS n FROM gpu_hourly")]),
    ],
    ids=["collector", "analytics-compaction", "dashboards"],
)
def test_each_component_works_with_the_permissions_the_docs_give_it(
    moto_server, raw, tmp_path, monkeypatch, actions, steps
):
    with MotoServer(moto_server.python) as srv:  # its own server: auth stays on
        srv.create_bucket(LAKE.loc.bucket)
        env = _as_user(srv, raw, tmp_path, monkeypatch, actions, analysed=actions == READ)
        for step in steps:
            r = _gl(env, step[0], "--lake", str(LAKE), *step[1:])
            assert r.returncode == 0, f"{step}: {r.stderr[-500:]}"


@pytest.mark.parametrize(
    ("actions", "step", "line"),
    [
        (READ, ("collect", "--source", "sim", "--once"), "no permission to write to s3://lake-perm/p (AccessDenied)"),
        (WRITE, ("analyze", "--to", TO), "no permission to delete s3://lake-perm/p/"),
    ],
    ids=["collector-without-put", "analytics-without-delete"],
)
def test_one_permission_less_is_one_line_naming_it(moto_server, raw, tmp_path, monkeypatch, actions, step, line):
    with MotoServer(moto_server.python) as srv:
        srv.create_bucket(LAKE.loc.bucket)
        env = _as_user(srv, raw, tmp_path, monkeypatch, actions, analysed=False)
        r = _gl(env, step[0], "--lake", str(LAKE), *step[1:])
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-800:]
    assert last.startswith(f"Error: lake error: {line}"), last
