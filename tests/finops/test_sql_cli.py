"""`gpuledger sql --file` and `gpuledger views` (one script for a plain DuckDB session), on a simulated lake."""

import datetime as dt
import resource
import signal
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from gpuledger.cli import main
from gpuledger.query import Lake

from builders import at


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


def test_views_give_utc_months_and_days_whatever_the_session_time_zone(analysed_lake, tmp_path, los_angeles):
    script = tmp_path / "gpuledger.sql"
    assert cli("views", "--lake", analysed_lake, "--out", script).exit_code == 0
    queries = [
        "SELECT DISTINCT month FROM chargeback_monthly ORDER BY 1",
        "SELECT DISTINCT day FROM tenant_daily ORDER BY 1",
        "SELECT DISTINCT BillingPeriodStart, BillingPeriodEnd FROM focus_cost ORDER BY 1",
        "SELECT DISTINCT CAST(day_start AS DATE) FROM cost_daily ORDER BY 1",  # the user's own cast: session's zone
    ]
    oct_1, nov_1, dec_1 = (dt.datetime(2026, m, 1, tzinfo=dt.timezone.utc) for m in (10, 11, 12))
    # The analysed lake is Nov 1 (UTC), with jobs that began on Oct 31. Los Angeles is behind UTC: a UTC midnight
    # there is the evening before, so a day or month taken in its zone would move back a day (Oct 30 and 31), and
    # Nov 1 back a month.
    days = [(dt.date(2026, 10, 31),), (dt.date(2026, 11, 1),)]
    utc = [[(oct_1.date(),), (nov_1.date(),)], days, [(oct_1, nov_1), (nov_1, dec_1)]]
    con = duckdb.connect()  # in the host's zone, Los Angeles
    con.execute(script.read_text())
    assert con.execute("SELECT current_setting('TimeZone')").fetchone() == ("UTC",)  # the script set it
    assert [con.execute(q).fetchall() for q in queries] == utc + [days]
    # The views take UTC days and months whatever zone the session is later set to, behind or ahead of UTC.
    for zone in ("America/Los_Angeles", "Asia/Kolkata"):
        con.execute(f"SET TimeZone = '{zone}'")
        assert [con.execute(q).fetchall() for q in queries[:3]] == utc, zone


def test_the_query_helper_answers_in_utc_on_a_host_in_another_zone(analysed_lake, los_angeles):
    sql = "SELECT min(day_start) AS t, CAST(min(day_start) AS DATE) AS day FROM cost_daily"
    r = cli("sql", "--lake", analysed_lake, "--format", "csv", sql)
    assert r.exit_code == 0, r.output
    assert r.output.splitlines() == ["t,day", "2026-10-31T00:00:00.000000+0000,2026-10-31"]  # the first UTC day


def test_chargeback_keeps_unclaimed_jobs_and_leaves_out_unshared_idle(tmp_path):
    import polars as pl

    from gpuledger.lake import LakeWriter

    day = at(3)
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


# -- no lake, typed parameters, --out that cannot be written (issue 13, items 15, 12, 11) -------------------------
def _one_line_error(r, text):
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    assert r.output.count("\n") == 1 and text in r.output, r.output


def test_a_lake_that_is_not_there_is_named_not_read_as_empty(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPULEDGER_LAKE", raising=False)
    missing = tmp_path / "no" / "such"
    _one_line_error(cli("sql", "--lake", missing, "SELECT count(*) FROM jobs"), f"no lake at {missing}: the folder")
    _one_line_error(cli("views", "--lake", missing), f"no lake at {missing}: the folder does not exist")
    # From a folder with no lake in it, by default: named whole, so the person sees which folder was looked at.
    default = tmp_path / "gpuledger-data"
    _one_line_error(cli("sql", "SELECT count(*) FROM jobs"), f"no lake at {default}: the folder does not exist")
    _one_line_error(cli("views"), f"no lake at {default}")
    (tmp_path / "notes.txt").write_text("not a lake")
    _one_line_error(cli("sql", "--lake", tmp_path, "SELECT 1"), "holds none of the lake's tables")
    (tmp_path / "project" / "__pycache__").mkdir(parents=True)  # a "_" folder that is not gpuledger's (review)
    _one_line_error(cli("sql", "--lake", tmp_path / "project", "SELECT 1"), "holds none of the lake's tables")
    # An empty folder is a lake nothing has been written to yet.
    empty = tmp_path / "empty"
    empty.mkdir()
    r = cli("sql", "--lake", empty, "--format", "csv", "SELECT count(*) AS n FROM jobs")
    assert r.exit_code == 0 and r.output.splitlines() == ["n", "0"], r.output


def test_a_parameter_can_say_its_type(small_lake, los_angeles):
    query = "SELECT $v AS v, typeof($v) AS t"
    cases = [
        ("v=0123", "123,INTEGER"),  # without a type, a number is a number (the guess)
        ("v:str=0123", "0123,VARCHAR"),
        ("v=2023_01", "2023_01,VARCHAR"),  # int() would take it as 202301 (review)
        ("v=nan", "nan,VARCHAR"),
        ("v=1.5", "1.5,DOUBLE"),
        ("v:int=7", "7,INTEGER"),
        ("v:float=7", "7.0,DOUBLE"),
        ("v:bool=yes", "true,BOOLEAN"),
        ("v:date=2026-11-01", "2026-11-01,DATE"),
        # No zone given: UTC, like every time in the lake.
        ("v:timestamp=2026-11-02T05:00:00", "2026-11-02T05:00:00.000000+0000,TIMESTAMP WITH TIME ZONE"),
        ("v:timestamp=2026-11-02T05:00:00+02:00", "2026-11-02T03:00:00.000000+0000,TIMESTAMP WITH TIME ZONE"),
    ]
    for param, want in cases:
        r = cli("sql", "--lake", small_lake, "--format", "csv", "--param", param, query)
        assert r.exit_code == 0, r.output
        assert r.output.splitlines() == ["v,t", want], param


@pytest.mark.parametrize(
    "param, message",
    [
        ("v:int=1.5", "--param 'v:int=1.5': '1.5' is not a valid int"),
        ("v:bool=maybe", "'maybe' is not a valid bool (one of true, 1, yes, false, 0, no)"),
        ("v:date=11/01/2026", "'11/01/2026' is not a valid date (YYYY-MM-DD)"),
        ("v:uuid=1", "--param 'v:uuid=1': unknown type 'uuid'; one of str, int, float, bool, date, timestamp"),
        ("v:=1", "unknown type ''"),
        ("1v:int=1", "--param '1v:int=1': expected NAME=VALUE or NAME:TYPE=VALUE"),
    ],
)
def test_a_parameter_of_the_wrong_type_is_one_line(small_lake, param, message):
    _one_line_error(cli("sql", "--lake", small_lake, "--param", param, "SELECT $v"), message)


@pytest.mark.parametrize(
    "out, message",
    [
        ("/nonexistent/x.csv", "--out '/nonexistent/x.csv': the folder '/nonexistent' does not exist"),
        ("", "--out '': not a file name"),
    ],
)
def test_an_out_file_that_cannot_be_written_is_one_line(small_lake, out, message):
    _one_line_error(cli("sql", "--lake", small_lake, "--format", "csv", "--out", out, "SELECT 1 AS x"), message)
    assert not Path("/nonexistent").exists()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_full_device_is_one_line(small_lake, fmt):
    r = cli("sql", "--lake", small_lake, "--format", fmt, "--out", "/dev/full", "SELECT 1 AS x")
    _one_line_error(r, "--out '/dev/full': cannot write it: No space left on device")


def test_a_write_that_fails_half_way_leaves_no_partial_file(small_lake, tmp_path):
    """A file-size limit stops the write after 64 KiB (EFBIG, as a full disk would): the old file stays whole."""
    out = tmp_path / "big.csv"
    out.write_text("old\n")
    old_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails instead of killing the process
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, old_limit[1]))
    try:
        r = cli("sql", "--lake", small_lake, "--format", "csv", "--out", out, "SELECT range AS n FROM range(100000)")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)
    _one_line_error(r, f"--out '{out}': cannot write {out}: File too large")
    assert out.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["big.csv"]
