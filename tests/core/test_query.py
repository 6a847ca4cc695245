import datetime as dt
import shutil

import pytest

from gpuledger import schema
from gpuledger.errors import QueryError
from gpuledger.query import Lake, sql_files


def test_every_view_exists_on_an_empty_lake(tmp_path):
    with Lake(tmp_path) as lake:
        for name in schema.TABLES:
            assert lake.execute(f"SELECT count(*) FROM {name}").rows == [(0,)]


def test_views_pick_up_data_written_after_connecting(tmp_path, small_lake):
    root = tmp_path / "lake"
    with Lake(root) as lake:
        assert lake.execute("SELECT count(*) FROM gpu_samples").rows == [(0,)]
        shutil.copytree(small_lake, root, dirs_exist_ok=True)
        assert lake.execute("SELECT count(*) FROM gpu_samples").rows == [(3 * 4 * 1440,)]


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
