"""`analyze --scheduler` on an object-store lake: real Dask worker processes read the bucket with their own AWS
settings (inherited from the environment the test gives the cluster) and return each day's objects to the client,
which puts them. The bucket afterwards holds what a local run of the same raw files writes, row for row, and nothing
staged; a worker that cannot reach the bucket fails the run before any table is written."""

from __future__ import annotations

import shutil

import pytest
from distributed import LocalCluster
from s3_server import download, upload

from gpuledger.analytics import runner
from gpuledger.analytics.runner import TELEMETRY, run, watermark
from gpuledger.errors import ClusterError
from gpuledger.store import open_store

from builders import assert_same_lake
from conftest import END, make_lake


@pytest.fixture
def s3_cluster(s3, tmp_path, monkeypatch):
    """Two worker processes started after the s3 fixture set the AWS variables, so they reach the bucket."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, protocol="tcp", dashboard_address=":0") as c:
        yield c


def test_a_cluster_run_on_s3_writes_what_a_local_run_writes(s3, s3_cluster, tmp_path, monkeypatch):
    src = tmp_path / "local"
    make_lake(src, nodes=2, gpus=2, step_s=60, days=2.5)
    lake = open_store(f"s3://{s3.bucket}/eu/lake")
    upload(src, lake)
    monkeypatch.setattr(runner, "CHUNK_DAYS", 2)  # two chunks, each put whole
    run(src, until_s=END)
    got = {r.job: r.rows for r in run(lake, until_s=END, scheduler=s3_cluster.scheduler_address)}
    assert got["gpu_5min"] == 4 * 288 * 2.5  # 4 GPUs x 288 buckets a day x 2.5 days
    keys = download(lake, tmp_path / "got", keep=lambda rel: not rel.startswith("_state/"))
    assert assert_same_lake(src, tmp_path / "got") > 5000
    assert not [k for k in keys if "staging" in k or k.endswith(".tmp")]
    # A re-run from mid-morning: the workers keep that day's earlier rows from the objects they replace.
    from_s = END - 5.5 * 3600
    run(src, until_s=END, from_s=from_s)
    run(lake, until_s=END, from_s=from_s, scheduler=s3_cluster.scheduler_address)
    shutil.rmtree(tmp_path / "got")
    download(lake, tmp_path / "got", keep=lambda rel: not rel.startswith("_state/"))
    assert_same_lake(src, tmp_path / "got")
    for job in TELEMETRY:
        assert watermark(lake, job) == watermark(src, job) == END


def test_workers_that_cannot_reach_the_bucket_fail_the_run_before_it_writes(s3, tmp_path, monkeypatch):
    src = tmp_path / "local"
    make_lake(src, nodes=1, gpus=1, step_s=600, days=1)
    lake = open_store(f"s3://{s3.bucket}/eu/lake")
    upload(src, lake)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    # The workers get another endpoint (nothing listens there); the client keeps the right one.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, protocol="tcp", dashboard_address=":0") as c:
        monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint_url)
        with pytest.raises(ClusterError) as e:
            run(lake, until_s=END, scheduler=c.scheduler_address)
    assert "do not see the lake at" in str(e.value) and "\n" not in str(e.value)
    assert not download(lake, tmp_path / "got", keep=lambda rel: rel.startswith("gpu_5min/"))
