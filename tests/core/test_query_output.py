"""`gpuledger sql` streams its result (issue 22, item 1): every column type in every format (list columns as JSON text
in csv), memory bounded by a batch rather than by the result, a failure mid-stream in one line, a closed pipe quiet.

The memory and pipe tests run the installed command in a subprocess: RSS and SIGPIPE are a process's own."""

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from gpuledger.cli import main

from builders import at, job_state, write_rows

GPULEDGER = Path(sys.executable).parent / "gpuledger"


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _fails_in_one_line(r, text):
    """Exit 1, its last line `text`, no traceback (rows written before the failure may come first)."""
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    lines = r.output.splitlines()
    assert lines[-1] == text and sum(line.startswith("Error:") for line in lines) == 1, r.output[-500:]


@pytest.fixture
def lake(tmp_path):
    """An empty lake (a folder nothing has been written to yet), beside the test's output files."""
    (tmp_path / "lake").mkdir()
    return tmp_path / "lake"


def test_list_columns_in_csv_are_json_text(tmp_path):
    write_rows(tmp_path, "jobs", [job_state("j1", "running", at(2, 10), gpu_uuids=["GPU-a", "GPU-b"], gpus=2.0)])
    r = cli("sql", "--lake", tmp_path, "--format", "csv", "SELECT job_id, gpu_uuids, gpus, updated_at FROM jobs")
    assert r.exit_code == 0, r.output
    assert r.output.splitlines() == [
        "job_id,gpu_uuids,gpus,updated_at",
        'j1,"[""GPU-a"",""GPU-b""]",2.0,2026-11-02T10:00:00.000000+0000',
    ]
    # The issue's own command: every column of the view, the list among them.
    r = cli("sql", "--lake", tmp_path, "--format", "csv", "SELECT * FROM jobs")
    assert r.exit_code == 0, r.output
    (row,) = csv.DictReader(io.StringIO(r.output))
    assert json.loads(row["gpu_uuids"]) == ["GPU-a", "GPU-b"] and row["status"] == "running"


# Types that polars cannot write as csv or convert from Arrow (INTERVAL, BLOB, HUGEINT, TIMETZ), nested ones, and a
# repeated column name.
EVERY_KIND = (
    "SELECT 7 AS i, INTERVAL 3 DAY AS iv, '\\xAA'::BLOB AS b, 170141183460469231731687303715884105727::HUGEINT AS h, "
    "MAP {'k': 1} AS m, {'k': 'v', 'n': [1, 2]} AS s, NULL::VARCHAR[] AS e, [1.5] AS d, '12:00:00+02'::TIMETZ AS tz, "
    "'a'::ENUM('a', 'b') AS en, 2 AS i"
)


def test_every_format_writes_every_kind_of_column(lake, tmp_path):
    r = cli("sql", "--lake", lake, "--format", "csv", EVERY_KIND)
    assert r.exit_code == 0, r.output
    assert r.output.splitlines() == [
        "i,iv,b,h,m,s,e,d,tz,en,i",
        '7,3 days,\\xAA,170141183460469231731687303715884105727,"{""k"":1}","{""k"":""v"",""n"":[1,2]}",,[1.5],'
        "12:00:00+02,a,2",
    ]
    r = cli("sql", "--lake", lake, "--format", "json", EVERY_KIND)
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == [
        {
            "i": 7,
            "iv": "3 days",
            "b": "\\xAA",
            "h": 170141183460469231731687303715884105727,
            "m": {"k": 1},
            "s": {"k": "v", "n": [1, 2]},
            "e": None,
            "d": [1.5],
            "tz": "12:00:00+02",
            "en": "a",
            "i_1": 2,  # a JSON object's keys are unique: DuckDB's own suffix
        }
    ]
    out = tmp_path / "every.parquet"
    r = cli("sql", "--lake", lake, "--format", "parquet", "--out", out, EVERY_KIND)
    assert r.exit_code == 0, r.output
    row = pl.read_parquet(out).select("i", "iv", "s", "d", "i_1").row(0)
    assert row == (7, "3 days", {"k": "v", "n": [1, 2]}, [1.5], 2)
    r = cli("sql", "--lake", lake, EVERY_KIND)
    assert r.exit_code == 0, r.output
    assert '{"k":"v","n":[1,2]}' in r.output and "3 days" in r.output and "i_1" in r.output


def test_an_empty_result_is_its_columns_alone(lake, tmp_path):
    query = "SELECT 1 AS a, 'x' AS b WHERE false"
    assert cli("sql", "--lake", lake, "--format", "csv", query).output == "a,b\n"
    assert cli("sql", "--lake", lake, "--format", "json", query).output == "[]\n"
    out = tmp_path / "empty.parquet"
    assert cli("sql", "--lake", lake, "--format", "parquet", "--out", out, query).exit_code == 0
    assert pl.read_parquet(out).columns == ["a", "b"] and pl.read_parquet(out).height == 0


def test_a_table_prints_block_by_block(lake):
    """--limit 2,500 in blocks of 1,000 rows: three tables, then the note that more rows exist."""
    r = cli("sql", "--lake", lake, "--limit", 2500, "SELECT range AS n FROM range(3000)")
    assert r.exit_code == 0, r.output
    assert r.output.count("┌") == 3 and "│ 2499 │" in r.output and "│ 2500 │" not in r.output
    assert r.output.splitlines()[-1] == "(first 2500 rows; use --limit or --format csv for more)"
    r = cli("sql", "--lake", lake, "--format", "csv", "--limit", 3, "SELECT range AS n FROM range(10)")
    assert r.output.splitlines() == ["n", "0", "1", "2"]


# 8M rows of 200 bytes and more: 1.6 GB in Arrow, 1.7 GB as csv. Streamed, the command peaks near its imports plus a
# few batches (230 MB for 6M rows on the 2-core development host; the whole result held peaked at 2.7 GB for 50M
# narrow rows, benchmarks/RESULTS.md).
ROWS = 8_000_000
WIDE = f"SELECT range AS n, repeat('x', 200) AS pad FROM range({ROWS})"
BOUND_KIB = 500 * 1024
# The wrapper's only child is the command, so RUSAGE_CHILDREN is that command's peak alone (not earlier tests' ones).
PEAK = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_memory_is_bounded_by_a_batch_not_the_result(lake, fmt):
    args = [GPULEDGER, "sql", "--lake", lake, "--format", fmt] + (["--out", "/dev/null"] if fmt == "parquet" else [])
    run = subprocess.run(
        [sys.executable, "-c", PEAK, *map(str, args), WIDE], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr
    peak_kib = int(run.stdout)
    assert peak_kib < BOUND_KIB < ROWS * 200 / 1024 / 3, f"{fmt}: peak {peak_kib / 1024:.0f} MiB"


@pytest.mark.parametrize("fmt, first", [("csv", b"n\n"), ("json", b"[\n"), ("table", "┌".encode())])
def test_head_closes_the_pipe_quietly(lake, fmt, first):
    """`| head -1` on a result that never ends: the command stops at the closed pipe, with no word on stderr and the
    status of a process SIGPIPE ended (141), long before its time limit."""
    query = "SELECT range AS n FROM range(1000000000000)"
    args = [GPULEDGER, "sql", "--lake", lake, "--format", fmt, "--limit", 10**12, "--timeout-s", 300, query]
    sql = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = subprocess.Popen(["head", "-1"], stdin=sql.stdout, stdout=subprocess.PIPE)
    sql.stdout.close()  # head alone holds the pipe's read end
    line, _ = head.communicate(timeout=120)
    _, err = sql.communicate(timeout=120)
    assert line.startswith(first) and err == b"" and sql.returncode == 141


def test_a_cast_that_fails_mid_stream_is_one_line(lake, tmp_path):
    """The row 50,000 fails its cast after two batches went out: one line, exit 1; to a file, no file left."""
    query = "SELECT CAST(CASE WHEN range < 50000 THEN '1' ELSE 'x' END AS INTEGER) AS v FROM range(60000)"
    want = "Error: query error: Conversion Error: Could not convert string 'x' to INT32"
    _fails_in_one_line(cli("sql", "--lake", lake, "--format", "csv", query), want)
    for fmt in ("csv", "json", "parquet"):
        out = tmp_path / f"v.{fmt}"
        out.write_text("old\n")
        r = cli("sql", "--lake", lake, "--format", fmt, "--out", out, query)
        assert r.exit_code == 1 and r.output == want + "\n", r.output
        assert out.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lake", "v.csv", "v.json", "v.parquet"]


def test_the_time_limit_mid_stream_is_one_line(lake):
    query = "SELECT range AS n FROM range(1000000000000)"
    r = cli("sql", "--lake", lake, "--format", "csv", "--timeout-s", 1, "--out", "/dev/null", query)
    _fails_in_one_line(r, "Error: query error: query stopped after the 1 s time limit")
