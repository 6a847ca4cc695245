"""The query helper's in-memory mode (query.Snapshot): the same guard, time limit and time zone as Lake, and a
snapshot retired under a reader stays open until that reader is done (issue 14, item 4)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import threading

import polars as pl
import pytest

from gpuledger.errors import QueryError
from gpuledger.query import Snapshot

UTC = dt.timezone.utc


def snap() -> Snapshot:
    t = pl.DataFrame(
        {
            "tenant": ["a", "a", "b"],
            "gpu_hours": [1.5, 2.5, 4.0],
            "ts": [dt.datetime(2026, 1, 1, 23, 30, tzinfo=UTC)] * 3,
        }
    )
    return Snapshot([("usage", t)])


def test_reads_its_tables_with_parameters():
    s = snap()
    r = s.execute("SELECT tenant, sum(gpu_hours) AS h FROM usage WHERE tenant <> ? GROUP BY 1 ORDER BY 1", ["x"])
    assert r.columns == ["tenant", "h"] and r.rows == [("a", 4.0), ("b", 4.0)]  # 1.5 + 2.5, 4.0
    s.retire()
    assert s.closed


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TABLE x AS SELECT 1",
        "DROP TABLE usage",
        "INSERT INTO usage VALUES ('c', 1, NULL)",
        "SELECT 1; DELETE FROM usage",
        "EXPLAIN ANALYZE DELETE FROM usage",
        "SET TimeZone = 'Europe/Paris'",
        "ATTACH ':memory:' AS other",
    ],
)
def test_only_select_runs(sql):
    s = snap()
    with pytest.raises(QueryError, match="only read-only queries are allowed"):
        s.execute(sql)
    assert s.execute("SELECT count(*) FROM usage").rows == [(3,)]  # nothing changed


def test_no_file_is_read(tmp_path):
    (tmp_path / "secret.csv").write_text("a\n1\n")
    with pytest.raises(QueryError, match="refused"):
        snap().execute(f"SELECT * FROM read_csv('{tmp_path / 'secret.csv'}')")


def test_a_query_past_the_time_limit_is_stopped():
    with pytest.raises(QueryError, match="time limit"):
        snap().execute("SELECT count(*) FROM range(10000000000) a, range(10) b", timeout_s=0.2)


def test_the_time_limit_stops_only_its_own_query():
    """One thread keeps every limit; interrupting a query's cursor leaves the queries on other cursors running."""
    s = snap()
    stopped = []

    def long() -> None:
        with pytest.raises(QueryError, match="time limit") as e:
            s.execute("SELECT count(*) FROM range(10000000000) a, range(10) b", timeout_s=0.3)
        stopped.append(str(e.value))

    t = threading.Thread(target=long)
    t.start()
    counts = [s.execute("SELECT count(*) FROM usage", timeout_s=60).rows for _ in range(50)]
    t.join()
    assert len(stopped) == 1 and counts == [[(3,)]] * 50


def test_every_query_runs_in_utc_whatever_the_hosts_zone():
    """A cursor is a DuckDB session of its own: it took the host's zone, not the connection's SET TimeZone.
    Run under New York, where 2026-01-01 23:30 UTC is still 1 January but 18:30."""
    code = (
        "import datetime as dt, polars as pl\n"
        "from gpuledger.query import Snapshot\n"
        "t = pl.DataFrame({'ts': [dt.datetime(2026, 1, 1, 23, 30, tzinfo=dt.timezone.utc)]})\n"
        "r = Snapshot([('usage', t)]).execute(\n"
        "    \"SELECT current_setting('TimeZone'), hour(ts), CAST(date_trunc('day', ts) AS VARCHAR) FROM usage\")\n"
        "print(*r.rows[0])\n"
    )
    env = {**os.environ, "TZ": "America/New_York"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["UTC", "23", "2026-01-01", "00:00:00+00"]


def test_retired_under_a_reader_it_closes_when_the_reader_is_done():
    s = snap()
    s.acquire()
    s.retire()
    assert not s.closed and s.execute("SELECT count(*) FROM usage").rows == [(3,)]
    with pytest.raises(QueryError, match="replaced"):
        s.acquire()  # no new reader after retire
    s.release()
    assert s.closed
    with pytest.raises(QueryError, match="closed"):
        s.execute("SELECT 1")
