"""`gpuledger sql --file` and `gpuledger views` (one script for a plain DuckDB session), on a simulated lake."""

import duckdb
import pytest
from click.testing import CliRunner

from gpuledger.cli import main
from gpuledger.query import Lake


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_sql_file_runs_the_query_in_it_with_parameters(small_lake, tmp_path):
    q = tmp_path / "busy.sql"
    q.write_text(
        "-- GPUs of one model\nSELECT count(DISTINCT gpu_uuid) AS gpus FROM gpu_samples WHERE model = $model;\n"
    )
    with Lake(small_lake) as lake:
        ((model, want),) = lake.execute(
            "SELECT model, count(DISTINCT gpu_uuid) FROM gpu_samples GROUP BY 1 LIMIT 1"
        ).rows
    r = cli("sql", "--lake", small_lake, "--file", q, "--param", f"model={model}", "--format", "csv")
    assert r.exit_code == 0, r.output
    assert r.output.splitlines() == ["gpus", str(want)]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--file", "missing.sql"], "--file 'missing.sql': cannot read it"),
        (["SELECT 1", "--file", "q.sql"], "give a query, or --file FILE.sql (not both)"),
        ([], "give a query, or --file FILE.sql (not both)"),
    ],
)
def test_sql_file_mistakes(tmp_path, args, message, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "q.sql").write_text("SELECT 1")
    r = cli("sql", "--lake", tmp_path / "lake", *args)
    assert r.exit_code == 1 and message in r.output and "Traceback" not in r.output


def test_a_query_that_writes_is_refused_from_a_file_too(small_lake, tmp_path):
    q = tmp_path / "w.sql"
    q.write_text("SELECT 1;\nCOPY (SELECT 1) TO 'out.csv';\n")
    r = cli("sql", "--lake", small_lake, "--file", q)
    assert r.exit_code == 1 and "only read-only queries are allowed" in r.output


def test_views_script_loads_every_view_in_a_plain_duckdb_session(small_lake, tmp_path):
    out = tmp_path / "gpuledger.sql"
    r = cli("views", "--lake", small_lake, "--out", out)
    assert r.exit_code == 0, r.output
    con = duckdb.connect()
    con.execute(out.read_text())
    views = {v for (v,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    with Lake(small_lake) as lake:
        want = {v for (v,) in lake.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").rows}
        (n,) = lake.execute("SELECT count(*) FROM gpu_samples").rows[0]
    assert views == want and {"focus_cost", "chargeback_monthly", "gpu_samples"} <= views
    assert con.execute("SELECT count(*) FROM gpu_samples").fetchone()[0] == n > 0
    # A table with no files yet (no admission decisions in a simulated lake) is an empty view of the right shape.
    assert con.execute("SELECT count(*) FROM admission_decisions").fetchone()[0] == 0


def test_views_give_utc_months_and_days_whatever_the_session_time_zone(analysed_lake, tmp_path):
    script = tmp_path / "gpuledger.sql"
    assert cli("views", "--lake", analysed_lake, "--out", script).exit_code == 0
    queries = [
        "SELECT tenant, month, total_usd FROM chargeback_monthly ORDER BY ALL",
        "SELECT tenant, day, gpu_model, gpu_hours FROM tenant_daily ORDER BY ALL",
        "SELECT DISTINCT BillingPeriodStart, BillingPeriodEnd FROM focus_cost ORDER BY 1",
    ]
    con = duckdb.connect()
    con.execute(script.read_text())
    utc = [con.execute(q).fetchall() for q in queries]
    # Los Angeles is behind UTC: a UTC midnight there is the evening before, so a date or month taken in the
    # session's zone would move back a day (and 2026-11-01 back a month); the views take them in UTC.
    con.execute("SET TimeZone = 'America/Los_Angeles'")
    assert [con.execute(q).fetchall() for q in queries] == utc
    assert all(utc)


def test_chargeback_keeps_unclaimed_jobs_and_leaves_out_unshared_idle(tmp_path):
    import datetime as dt

    import polars as pl

    from gpuledger.lake import LakeWriter

    day = dt.datetime(2026, 11, 3, tzinfo=dt.timezone.utc)
    rows = [  # tenant, gpu_hours, cost_usd, idle_share_usd
        ("a", 2.0, 4.0, 1.0),
        (None, 3.0, 6.0, 0.5),  # a job in a namespace no tenant owns: charged to no one, still a charge
        (None, 0.0, 0.0, 10.0),  # idle capacity the policy gave to no one: not a charge
    ]
    frame = pl.DataFrame(
        [
            dict(
                day_start=day,
                cluster="c",
                tenant=t,
                gpu_model="X",
                gpu_hours=h,
                cost_usd=c,
                idle_share_usd=i,
                energy_kwh=None,
                energy_usd=None,
                method="request",
                date=day.date(),
            )
            for t, h, c, i in rows
        ],
        schema_overrides={"day_start": pl.Datetime("us", "UTC"), "energy_kwh": pl.Float64, "energy_usd": pl.Float64},
    )
    LakeWriter(tmp_path).write_partitions("cost_daily", frame, "t")
    with Lake(tmp_path) as lake:
        got = lake.execute("SELECT tenant, cost_usd, idle_share_usd, total_usd FROM chargeback_monthly ORDER BY 1").rows
    assert got == [("a", 4.0, 1.0, 5.0), (None, 6.0, 0.5, 6.5)]
