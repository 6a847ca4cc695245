"""The read side's S3 specifics, against moto's S3 server in its own process (tests/s3_server.py), over an analysed
lake uploaded to a bucket: the lockdown refuses local files and other buckets, the views follow a compaction's merge
records, a table emptied after its view was defined reads no rows, the views script names a secret and no keys, and a
misconfigured store is one line and exit 1. (The views, `gpuledger sql`, the FOCUS export, the dashboards and the
webhook's decision table on both stores: tests/core/test_query.py, tests/finops/test_focus_export.py,
tests/dashboards/, tests/enforcer/test_server_tls.py.)"""

from __future__ import annotations

import json

import polars as pl
import pytest

from gpuledger.errors import QueryError
from gpuledger.query import Lake
from gpuledger.store import open_store
from gpuledger.store.base import parquet_bytes
from gpuledger.store.s3 import S3Store

from s3_server import upload


@pytest.fixture
def s3_lake(s3, analysed_lake) -> S3Store:
    lake = open_store(f"s3://{s3.bucket}/fleet/lake")
    assert upload(analysed_lake, lake) > 20
    return lake


def test_the_lockdown_refuses_local_files_and_other_buckets(s3_lake, analysed_lake):
    some = next(analysed_lake.glob("gpu_samples/date=*/*.parquet"))
    with Lake(s3_lake) as remote:
        for path in (str(some), f"{s3_lake}/gpu_samples/{some.parent.name}/{some.name}", "s3://other-bucket/x.parquet"):
            with pytest.raises(QueryError, match="refused: queries read the lake only"):
                remote.execute(f"SELECT count(*) FROM read_parquet('{path}')")
        with pytest.raises(QueryError, match="refused"):
            remote.execute("SELECT * FROM read_csv('/etc/hostname')")


def test_the_views_script_of_an_s3_lake_names_its_secret_but_prints_no_keys(cli, s3_lake):
    script = cli("views", "--lake", str(s3_lake))
    assert script.exit_code == 0, script.output
    assert f"SET VARIABLE gpuledger_lake = '{s3_lake}';" in script.output
    assert "CREATE SECRET (TYPE s3" in script.output and "testing" not in script.output  # no keys printed


def test_gpuledger_sql_on_a_misconfigured_store_is_one_line(cli, moto_server, monkeypatch):
    from s3_server import MotoServer, free_port

    with MotoServer(moto_server.python) as srv:  # its own server: auth stays on
        srv.create_bucket("lake-auth")
        key, secret = srv.enforce_auth()
        for k, v in (srv.env() | {"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret}).items():
            monkeypatch.setenv(k, v)
        assert cli("sql", "--lake", "s3://lake-auth/p", "SELECT 1").exit_code == 0  # configured right, it works
        down = f"http://127.0.0.1:{free_port()}"
        cases = {
            "unreachable": ({"AWS_ENDPOINT_URL": down}, "s3://lake-auth/p"),
            "bad credentials": ({"AWS_SECRET_ACCESS_KEY": "wrong"}, "s3://lake-auth/p"),
            "missing bucket": ({}, "s3://no-such-lake/p"),
        }
        lines = {}
        for name, (env, lake) in cases.items():
            with monkeypatch.context() as m:
                for k, v in env.items():
                    m.setenv(k, v)
                r = cli("sql", "--lake", lake, "SELECT count(*) FROM gpu_samples")
            assert r.exit_code == 1, (name, r.output)
            assert len(r.output.strip().splitlines()) == 1, (name, r.output)
            lines[name] = r.output.strip()
    assert lines["unreachable"] == (
        f"Error: lake error: object store endpoint {down} unreachable, while listing the lake s3://lake-auth/p"
    )
    assert lines["bad credentials"] == (
        f"Error: lake error: object store refused access key {key!r} for s3://lake-auth/p (SignatureDoesNotMatch): "
        "bad credentials, while listing the lake"
    )
    assert lines["missing bucket"] == (
        f"Error: lake error: bucket 'no-such-lake' does not exist at {srv.url} (s3://no-such-lake/p), while listing "
        "the lake"
    )


def test_the_views_follow_compactions_merge_records(s3_lake, analysed_lake):
    """A compaction between its merged object and its inputs' deletion (gpuledger/store/s3_compaction.py): the views
    read the merged object instead of its inputs, not both."""
    day = next(analysed_lake.glob("gpu_samples/date=*"))
    inputs = sorted(p.name for p in day.glob("*.parquet"))
    assert inputs  # one or more: without the rule the day would count twice
    merged = pl.concat([pl.read_parquet(day / n, hive_partitioning=False) for n in inputs])
    folder = f"gpu_samples/{day.name}"
    s3_lake.put(f"{folder}/part-c0123456789abcdef.parquet", parquet_bytes(merged))
    record = {"inputs": inputs, "output": "part-c0123456789abcdef.parquet"}
    s3_lake.put(f"{folder}/part~merged-0123456789abcdef.json", json.dumps(record).encode())
    q = "SELECT count(*), sum(power_w) FROM gpu_samples"
    with Lake(analysed_lake) as local, Lake(s3_lake) as remote:
        want, got = local.execute(q).rows[0], remote.execute(q).rows[0]
    assert got[0] == want[0] and got[1] == pytest.approx(want[1], rel=1e-12)
