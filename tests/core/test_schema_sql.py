"""The schema is defined once in code (gpuledger/schema.py); sql/ is generated from it (gpuledger/schema_sql.py),
the three views that keep less than every row (schema_sql.SHAPES) too. These tests prove they agree."""

import datetime as dt
import re

import polars as pl
import pytest

from gpuledger import schema, schema_sql
from gpuledger.lake import LakeWriter
from gpuledger.query import Lake, sql_files
from gpuledger.schema_sql import duckdb_type

from builders import at, job_state, write_rows

DUMMY = {pl.String: "x", pl.Int64: 1, pl.Int32: 1, pl.Float64: 1.0, pl.Float32: 1.0, pl.Boolean: True}


def one_row(name):
    """A row with every required column set (the time column to a fixed UTC instant)."""
    t = schema.table(name)
    row = {}
    for c in t.columns:
        if c.name == "date" or c.nullable and c.name != "node":
            continue
        row[c.name] = [at(2) if c.dtype == schema.UTC_US else DUMMY[c.dtype.base_type()]]
    return pl.DataFrame(row)


def _describe(lake, name):
    return [(r[0], r[1]) for r in lake.execute(f"DESCRIBE {name}").rows]


@pytest.mark.parametrize("name", list(schema.TABLES))
def test_view_columns_and_types_match_the_schema(name, tmp_path):
    expected = [(c.name, duckdb_type(c.dtype)) for c in schema.table(name).columns]
    with Lake(tmp_path) as empty:  # the typed empty view
        assert _describe(empty, name) == expected
    LakeWriter(tmp_path).write(name, one_row(name), "t")
    with Lake(tmp_path) as lake:  # the view in sql/<name>.sql over real Parquet
        assert lake.execute(f"SELECT count(*) FROM {name}").rows == [(1,)]
        assert _describe(lake, name) == expected


@pytest.mark.parametrize("name", list(schema.TABLES))
def test_sql_file_documents_every_column(name):
    text = sql_files()[name]
    for c in schema.table(name).columns:
        assert re.search(rf"--\s*{re.escape(duckdb_type(c.dtype))}: {re.escape(c.doc)}", text), c.name


@pytest.mark.parametrize("name", schema_sql.generated())
def test_sql_file_is_generated_from_the_schema(name):
    committed = (schema_sql.SQL_DIR / f"{name}.sql").read_text()
    assert committed == schema_sql.render(name), f"sql/{name}.sql is stale: run `{schema_sql.COMMAND}`"


def test_every_table_is_generated_and_every_shape_names_a_table():
    assert set(schema_sql.generated()) == set(schema.TABLES)
    assert set(schema_sql.SHAPES) <= set(schema.TABLES)
    assert set(schema.TABLES) <= {p.stem for p in schema_sql.SQL_DIR.glob("*.sql")}  # and the analysts' own views


def test_render_quotes_reserved_words_and_documents_each_column():
    text = schema_sql.render("gpu_allocations")
    assert '    CAST("end" AS TIMESTAMP WITH TIME ZONE) AS "end",' in text
    assert "    CAST(start AS TIMESTAMP WITH TIME ZONE) AS start," in text
    assert "    date " in text  # the partition column, typed by hive_types, is not cast
    assert "-- BOOLEAN: still held at the analysis time" in text
    # a late column (workload_class) is added as null for files from before it: the read ends in its empty SELECT
    assert text.endswith(
        "hive_types = {'date': DATE})\n    UNION ALL BY NAME SELECT NULL::VARCHAR AS workload_class WHERE false);\n"
    )


def test_every_table_has_cluster_and_a_utc_time_column():
    for t in schema.TABLES.values():
        assert "cluster" in t.column_names
        assert t.polars_schema[t.time_column] == schema.UTC_US
        assert t.column_names[-1] == "date"


def test_jobs_view_keeps_exactly_the_latest_state_of_each_job(tmp_path):
    write_rows(tmp_path, "jobs", [job_state("a", "pending", at(2, 5)), job_state("b", "pending", at(2, 5))], "w1")
    # Written later, by another writer: a's later state, and b's state twice at the same instant (a tie).
    write_rows(tmp_path, "jobs", [job_state("a", "running", at(2, 5, 5)), job_state("b", "running", at(2, 5, 3))], "w2")
    write_rows(tmp_path, "jobs", [job_state("b", "failed", at(2, 5, 3)), job_state("a", "succeeded", at(3, 5))], "w3")
    with Lake(tmp_path) as lake:
        rows = lake.execute("SELECT job_id, status, date FROM jobs ORDER BY job_id").rows
        # The tie goes to the later file (w3), and a's latest state is on the next day.
        assert rows == [("a", "succeeded", dt.date(2026, 11, 3)), ("b", "failed", dt.date(2026, 11, 2))]
        # A filter on the partition column applies to the latest state, not to the states of that day.
        assert lake.execute("SELECT job_id FROM jobs WHERE date = DATE '2026-11-02'").rows == [("b",)]


def test_a_lake_from_before_a_late_column_still_reads(tmp_path):
    """jobs files written before `workload_class` existed lack it: the view and the polars reader make it null, and
    a newer file beside them gives its value."""
    from gpuledger.lake import scan

    assert [c.name for c in schema.JOBS.columns if c.late] == ["workload_class"]
    (key,) = write_rows(tmp_path, "jobs", [job_state("a", "running", at(2, 5))], "w1")
    part = tmp_path / key
    # As an earlier version wrote it: the same file less the late column.
    pl.read_parquet(part).drop("workload_class").write_parquet(part)
    assert "workload_class" not in pl.read_parquet_schema(part)
    with Lake(tmp_path) as lake:  # every file lacks it
        assert lake.execute("SELECT job_id, workload_class FROM jobs").rows == [("a", None)]
    write_rows(tmp_path, "jobs", [job_state("b", "running", at(2, 6), workload_class="inference")], "w2")
    with Lake(tmp_path) as lake:
        rows = lake.execute("SELECT job_id, workload_class FROM jobs ORDER BY job_id").rows
        assert rows == [("a", None), ("b", "inference")]
        assert lake.execute(
            "SELECT job_id FROM jobs WHERE date = DATE '2026-11-02' AND workload_class IS NULL"
        ).rows == [("a",)]
    got = scan(tmp_path, "jobs").select("job_id", "workload_class").sort("job_id").collect()
    assert got.rows() == [("a", None), ("b", "inference")]
