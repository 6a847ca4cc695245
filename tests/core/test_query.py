import datetime as dt
import json

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from gpuledger import schema
from gpuledger.errors import QueryError
from gpuledger.lake import scan
from gpuledger.query import Lake, sql_files

from builders import canonical, put_lake


def test_every_view_exists_on_an_empty_lake(tmp_path):
    with Lake(tmp_path) as lake:
        for name in schema.TABLES:
            assert lake.execute(f"SELECT count(*) FROM {name}").rows == [(0,)]


def test_views_pick_up_data_written_after_connecting(store, small_lake):
    """A long-lived Lake (the dashboards keep a pool) lists the lake again for each query, as a glob would."""
    with Lake(store) as lake:
        assert lake.execute("SELECT count(*) FROM gpu_samples").rows == [(0,)]
        put_lake(small_lake, store)
        assert lake.execute("SELECT count(*) FROM gpu_samples").rows == [(3 * 4 * 1440,)]


def _latest_jobs(store) -> pl.DataFrame:
    """The `jobs` view's rows read by polars: each job's newest state, a tie going to the later file and row."""
    rows = scan(store, "jobs").collect().sort("updated_at", maintain_order=True)
    return rows.unique(["cluster", "job_id"], keep="last", maintain_order=True)


def test_every_tables_view_gives_the_rows_of_its_files_and_the_other_views_run(analysed_store):
    """Each table's view (DuckDB over the store) gives the rows polars reads from the same files; every other view,
    SQL over those, runs on them."""
    nonempty = 0
    with Lake(analysed_store) as lake:
        for view in sql_files():
            got = lake.execute(f"SELECT * FROM {view}", timeout_s=None).frame
            nonempty += got.height > 0
            if view in schema.TABLES:
                want = _latest_jobs(analysed_store) if view == "jobs" else scan(analysed_store, view).collect()
                assert got.columns == want.columns, view
                assert_frame_equal(canonical(got), canonical(want), check_dtypes=False, rel_tol=1e-9, abs_tol=1e-9)
    assert nonempty >= 20  # the analysed lake fills most views: the comparison is of rows, not of empty frames


def test_a_filter_and_a_join_give_what_polars_computes_from_the_files(analysed_store):
    q = (
        "SELECT j.tenant, count(*) AS jobs, sum(s.gpu_hours) AS gpu_hours FROM jobs j "
        "JOIN job_stats s USING (cluster, job_id) WHERE j.date >= $d GROUP BY ALL ORDER BY ALL"
    )
    d = dt.date(2026, 11, 1)
    jobs = _latest_jobs(analysed_store).lazy().filter(pl.col("date") >= d).select("cluster", "job_id", "tenant")
    stats = scan(analysed_store, "job_stats").select("cluster", "job_id", "gpu_hours")
    want = (
        jobs.join(stats, on=["cluster", "job_id"])
        .group_by("tenant")
        .agg(pl.len().cast(pl.Int64).alias("jobs"), pl.col("gpu_hours").sum())
        .sort("tenant", "jobs", "gpu_hours")
        .collect()
    )
    assert want.height > 0
    with Lake(analysed_store) as lake:
        got = lake.execute(q, {"d": d}).frame
    assert_frame_equal(got, want, check_dtypes=False, rel_tol=1e-12)


def test_gpuledger_sql_reads_the_lake_it_is_given(cli, analysed_store):
    q = "SELECT cluster, count(*) AS n, sum(gpu_hours) AS h FROM job_stats GROUP BY ALL ORDER BY ALL"
    r = cli("sql", "--lake", str(analysed_store), "--format", "json", q)
    assert r.exit_code == 0, r.output
    stats = scan(analysed_store, "job_stats").group_by("cluster").agg(pl.len(), pl.col("gpu_hours").sum()).collect()
    want = sorted(stats.rows())
    got = [(row["cluster"], row["n"], row["h"]) for row in json.loads(r.output)]
    assert len(got) == len(want) >= 1 and [g[:2] for g in got] == [w[:2] for w in want]
    assert [g[2] for g in got] == pytest.approx([w[2] for w in want], rel=1e-12)


def test_parameters_are_passed_separately(small_lake):
    with Lake(small_lake) as lake:
        res = lake.execute("SELECT count(*) AS n FROM nodes WHERE node = $n", {"n": "gpu-h100-000"})
        assert res.columns == ["n"] and res.rows == [(1,)]
        # A value that would be SQL if pasted stays a value.
        res = lake.execute("SELECT count(*) FROM nodes WHERE node = ?", ["x' OR '1'='1"])
        assert res.rows == [(0,)]


def test_unknown_table_and_column_are_named(small_lake):
    with Lake(small_lake) as lake:
        with pytest.raises(QueryError, match="Table with name gpu_sample does not exist"):
            lake.execute("SELECT * FROM gpu_sample")
        with pytest.raises(QueryError, match='"utilization" not found'):
            lake.execute("SELECT utilization FROM gpu_samples")


def test_limit_marks_truncation(small_lake):
    with Lake(small_lake) as lake:
        res = lake.execute("SELECT * FROM gpu_samples", limit=5)
        assert res.frame.height == 5 and res.truncated
        res = lake.execute("SELECT * FROM nodes", limit=5)
        assert res.frame.height == 3 and not res.truncated


def test_time_limit_interrupts_a_long_query(tmp_path):
    with Lake(tmp_path) as lake, pytest.raises(QueryError, match="time limit"):
        lake.execute("SELECT count(*) FROM range(10000000000) a", timeout_s=0.2)


def test_timestamps_are_utc(small_lake, los_angeles):
    """On a host in Los Angeles a DuckDB session starts there: midnight UTC would read 2026-10-31 17:00:00-07."""
    with Lake(small_lake) as lake:
        (row,) = lake.execute("SELECT min(ts)::VARCHAR, min(ts)::DATE, hour(min(ts)) FROM gpu_samples").rows
        assert row == ("2026-11-01 00:00:00+00", dt.date(2026, 11, 1), 0)


def _defined(lake):
    return {v for (v,) in lake.con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}


def test_views_are_defined_as_queries_name_them(analysed_lake):
    # Defining a view over a glob reads every matching file's schema, so only the views a query needs are defined.
    with Lake(analysed_lake) as lake:
        assert _defined(lake) == set()
        assert lake.execute("SELECT count(*) AS jobs FROM cost_daily").rows[0][0] > 0  # 'jobs' is only an alias
        assert _defined(lake) == {"cost_daily"}
        lake.execute("SELECT count(*) FROM tenant_daily WHERE tenant <> 'gpu_samples'")  # a string is no view either
        assert _defined(lake) == {"cost_daily", "job_hourly", "tenant_daily"}
        # A query about the catalog sees every view.
        (n,) = lake.execute("SELECT count(*) FROM duckdb_views() WHERE NOT internal").rows[0]
        assert n == len(sql_files()) and _defined(lake) == set(sql_files())


def test_a_table_emptied_after_its_view_was_defined_reads_no_rows(analysed_store):
    """Every file of a table gone between two queries of one helper (set aside, a retention): the next query reads
    no rows, on both stores (a local view defined over a glob that now matches nothing failed every query)."""
    with Lake(analysed_store) as q:
        assert q.execute("SELECT count(*) FROM gpu_samples").rows[0][0] > 0
        analysed_store.delete(list(analysed_store.files("gpu_samples", "date=*/*.parquet")))
        assert q.execute("SELECT count(*), max(power_w) FROM gpu_samples").rows == [(0, None)]
