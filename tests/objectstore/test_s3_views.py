"""The read side on an object-store lake, against moto's S3 server in its own process (tests/s3_server.py): an
analysed local lake uploaded to a bucket (the analytics write only local lakes yet), then every view, `gpuledger
sql`, the FOCUS export, the dashboards' snapshot and a page, and the webhook's decision table read from the bucket
give what they give on the local lake; the lockdown refuses local files and other buckets; a misconfigured store is
one line and exit 1."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from s3_server import upload

from gpuledger.config import defaults
from gpuledger.errors import QueryError
from gpuledger.query import Lake, sql_files
from gpuledger.store import open_store
from gpuledger.store.base import parquet_bytes
from gpuledger.store.s3 import S3Store


@pytest.fixture
def s3_lake(s3, analysed_lake) -> S3Store:
    lake = open_store(f"s3://{s3.bucket}/fleet/lake")
    assert upload(analysed_lake, lake) > 20
    return lake


def _canonical(df: pl.DataFrame) -> pl.DataFrame:
    """The rows in one order whatever order a query gave them: sorted by each row's text, floats to 9 digits (a
    parallel sum may differ in its last bits from run to run)."""

    def key(row):
        return tuple(repr(round(v, 9 - int(math.log10(abs(v) or 1)))) if isinstance(v, float) else repr(v) for v in row)

    order = sorted(range(df.height), key=lambda i: key(df.row(i)))
    return df[order] if df.height else df


def test_every_view_gives_the_local_lakes_rows(s3_lake, analysed_lake):
    with Lake(analysed_lake) as local, Lake(s3_lake) as remote:
        nonempty = 0
        for view in sql_files():
            want = local.execute(f"SELECT * FROM {view}", timeout_s=None).frame
            got = remote.execute(f"SELECT * FROM {view}", timeout_s=None).frame
            assert got.columns == want.columns, view
            assert_frame_equal(_canonical(got), _canonical(want), check_exact=False, rel_tol=1e-9, abs_tol=1e-9)
            nonempty += want.height > 0
    assert nonempty >= 20  # the analysed lake fills most views: the comparison is of rows, not of empty frames


def test_a_filter_and_a_join_read_the_same_from_s3(s3_lake, analysed_lake):
    q = (
        "SELECT j.tenant, count(*) AS jobs, sum(s.gpu_hours) AS gpu_hours FROM jobs j "
        "JOIN job_stats s USING (cluster, job_id) WHERE j.date >= $d GROUP BY ALL ORDER BY ALL"
    )
    import datetime as dt

    params = {"d": dt.date(2026, 11, 1)}
    with Lake(analysed_lake) as local, Lake(s3_lake) as remote:
        want = local.execute(q, params).frame
        assert want.height > 0
        assert_frame_equal(remote.execute(q, params).frame, want)


def test_the_lockdown_refuses_local_files_and_other_buckets(s3_lake, analysed_lake):
    some = next(analysed_lake.glob("gpu_samples/date=*/*.parquet"))
    with Lake(s3_lake) as remote:
        for path in (str(some), f"{s3_lake}/gpu_samples/{some.parent.name}/{some.name}", "s3://other-bucket/x.parquet"):
            with pytest.raises(QueryError, match="refused: queries read the lake only"):
                remote.execute(f"SELECT count(*) FROM read_parquet('{path}')")
        with pytest.raises(QueryError, match="refused"):
            remote.execute("SELECT * FROM read_csv('/etc/hostname')")


def test_a_view_lists_the_lake_again_for_each_query(s3_lake, analysed_lake):
    """A long-lived Lake (the dashboards keep a pool) sees objects written after its first query, as a glob would."""
    with Lake(s3_lake) as remote:
        before = remote.execute("SELECT count(*) FROM health_events").rows[0][0]
        extra = pl.read_parquet(next(analysed_lake.glob("gpu_samples/date=*/*.parquet")))
        day = next(analysed_lake.glob("gpu_samples/date=*")).name
        s3_lake.put(f"gpu_samples/{day}/part-late.parquet", parquet_bytes(extra))
        n = remote.execute("SELECT count(*) FROM gpu_samples").rows[0][0]
    with Lake(analysed_lake) as local:
        assert n == local.execute("SELECT count(*) FROM gpu_samples").rows[0][0] + extra.height
    assert before >= 0


def test_gpuledger_sql_and_views_over_s3(cli, s3_lake, analysed_lake):
    q = "SELECT cluster, count(*) AS n, round(sum(gpu_hours), 6) AS h FROM job_stats GROUP BY ALL ORDER BY ALL"
    local = cli("sql", "--lake", analysed_lake, "--format", "csv", q)
    remote = cli("sql", "--lake", str(s3_lake), "--format", "csv", q)
    assert local.exit_code == 0 and remote.exit_code == 0, remote.output
    assert remote.output == local.output and local.output.count("\n") >= 2
    script = cli("views", "--lake", str(s3_lake))
    assert script.exit_code == 0, script.output
    assert f"SET VARIABLE gpuledger_lake = '{s3_lake}';" in script.output
    assert "CREATE SECRET (TYPE s3" in script.output and "testing" not in script.output  # no keys printed


def test_the_focus_export_totals_equal_the_local_ones(cli, s3_lake, analysed_lake, tmp_path):
    from gpuledger.focus_export import export_focus

    cfg = defaults()
    want = export_focus(analysed_lake, cfg, "2026-11", tmp_path / "local.parquet", allow_unpriced=True)
    got = export_focus(s3_lake, cfg, "2026-11", tmp_path / "s3.parquet", allow_unpriced=True)
    assert want.rows > 0
    assert (got.rows, got.left_out) == (want.rows, want.left_out)
    assert got.billed_cost_usd == pytest.approx(want.billed_cost_usd, rel=1e-12)
    assert got.gpu_hours == pytest.approx(want.gpu_hours, rel=1e-12)
    assert_frame_equal(pl.read_parquet(tmp_path / "s3.parquet"), pl.read_parquet(tmp_path / "local.parquet"))
    r = cli(
        "export",
        "focus",
        "--lake",
        str(s3_lake),
        "--period",
        "2026-11",
        "--out",
        tmp_path / "cli.csv",
        "--allow-unpriced",
    )
    assert r.exit_code == 0, r.output
    assert f"wrote {want.rows:,} FOCUS 1.3 charge(s) for 2026-11" in r.output


def test_the_webhook_loads_its_decision_table_from_s3(s3_lake, analysed_lake):
    from gpuledger.enforcer.store import load_table

    want = load_table(analysed_lake, "default")
    assert want is not None and want.rows
    got = load_table(s3_lake, "default")
    assert (got.rows, got.computed_at, got.idle) == (want.rows, want.computed_at, want.idle)
    assert load_table(s3_lake, "no-such-cluster") is None


def test_the_dashboards_snapshot_reads_the_s3_lake(s3_lake, analysed_lake):
    from gpuledger.dashboards.data import SNAPSHOT, DashData

    local, remote = DashData(analysed_lake), DashData(s3_lake)
    local.rebuild()
    remote.rebuild()
    assert remote._present == local._present  # (its refresh key on S3: test_s3_analytics)
    for table in SNAPSHOT:
        q = f"SELECT * FROM {table}"
        want, got = local._snap.execute(q).frame, remote._snap.execute(q).frame
        assert_frame_equal(_canonical(got), _canonical(want), check_exact=False, rel_tol=1e-9, abs_tol=1e-9)
    for d in (local, remote):
        d.close()


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


def test_a_table_emptied_after_its_view_was_defined_reads_no_rows(s3_lake):
    with Lake(s3_lake) as remote:
        assert remote.execute("SELECT count(*) FROM gpu_samples").rows[0][0] > 0
        s3_lake.delete(list(s3_lake.files("gpu_samples", "date=*/*.parquet")))
        assert remote.execute("SELECT count(*), max(power_w) FROM gpu_samples").rows == [(0, None)]
