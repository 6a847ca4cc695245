"""The exporter on both stores: the hand-built lake gives the same series from a folder and from a bucket (moto,
tests/s3_server.py), and on an object-store lake a real analytics run's commit (its state manifest) is what makes the
exporter rebuild."""

from __future__ import annotations

import pytest

from gpuledger.analytics.exporter import Exporter
from gpuledger.analytics.exporter.server import registry
from gpuledger.store import open_store

from builders import END
from exporter_case import RUN, samples, value, write_case
from s3_server import upload


def test_same_series_from_a_folder_and_a_bucket(tmp_path, s3):
    local = tmp_path / "lake"
    write_case(local)
    remote = open_store(f"s3://{s3.bucket}/fleet/lake")
    assert upload(local, remote) > 10
    got = {}
    for name, lake in (("local", local), ("s3", remote)):
        exp = Exporter(lake, idle_min_h=2.0, clock=lambda: RUN.timestamp() + 60)
        assert exp.refresh()
        got[name] = {k: v for k, v in samples(registry(exp)).items() if "_exporter_" not in k[0]}
    assert got["s3"] == got["local"] and len(got["local"]) > 50


@pytest.mark.slow
def test_an_analytics_commit_on_s3_rebuilds_the_snapshot(s3, small_lake):
    from gpuledger.analytics.runner import run

    lake = open_store(f"s3://{s3.bucket}/fleet/lake")
    upload(small_lake, lake)
    first = END - 6 * 3600
    run(lake, until_s=first)
    exp = Exporter(lake, idle_min_h=2.0, clock=lambda: END + 60)
    assert exp.refresh()
    last_run = "gpuledger_analytics_last_run_timestamp_seconds"
    assert value(samples(registry(exp)), last_run, cluster="default") == first
    assert not exp.refresh()  # no commit since: the manifest's version is the same, nothing read
    run(lake, until_s=END)
    assert exp.refresh()
    s = samples(registry(exp))
    assert value(s, last_run, cluster="default") == END
    assert value(s, "gpuledger_analytics_last_run_age_seconds", cluster="default") == 60
    assert any(n == "gpuledger_tenant_allocated_gpus" for n, _ in s)
