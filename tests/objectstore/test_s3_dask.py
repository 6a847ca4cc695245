"""`analyze --scheduler` on an object-store lake: Dask's worker processes read the bucket with the AWS settings of
the environment they start in, so a worker that cannot reach the bucket fails the run before any table is written.
(What a cluster run writes, on both stores: tests/analytics/test_dask_engine.py.)"""

from __future__ import annotations

import pytest
from distributed import LocalCluster

from gpuledger.analytics.runner import run
from gpuledger.errors import ClusterError
from gpuledger.store import open_store

from conftest import END, make_lake
from s3_server import download, upload


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
