"""The dashboards' one way to the lake: parameterised SQL over the analytics' tables.

Pages never read raw samples on a load: they read the derived tables (fleet_hourly, job_stats, cost_daily,
fragmentation, decisions, demand_forecast, ...) and small event tables. Every user value reaches DuckDB as a
parameter, never formatted into the SQL.

The snapshot: the tables the pages read are copied into one in-memory DuckDB database, and rebuilt (in the
background, the old one serving meanwhile) when the analytics have written since (their state files changed).
Each query on the lake's views pays 20-40 ms to list and bind a year of Parquet files; a page asks five to ten
questions, which made a page 0.3-1.1 s on a year of 1,000 GPUs. The same questions in memory take a few ms.
job_hourly is kept per tenant, model and day (job_daily), which is all the pages ask of it. A few queries
(one hour of gpu_hourly, admission decisions, a tenant's jobs) go to the lake itself (`lake=True`).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from pathlib import Path

import duckdb
import polars as pl

from gpuledger.lake import has_data
from gpuledger.query import Lake

log = logging.getLogger(__name__)

JOB_STATS_COLUMNS = (
    "job_id, tenant, gpu_model, gpus, status, submitted_at, scheduled_at, queue_s, run_s, held_s, gpu_hours, "
    "size_bucket, expansion, allocated_gpu_hours, busy_gpu_hours, idle_gpu_hours, efficiency, cost_usd, date"
)
# snapshot table -> (the lake table it comes from, the query that fills it)
SNAPSHOT = {
    "fleet_hourly": ("fleet_hourly", "SELECT * FROM fleet_hourly"),
    "demand_forecast": ("demand_forecast", "SELECT * FROM demand_forecast"),
    "cost_daily": ("cost_daily", "SELECT * FROM cost_daily"),
    "fragmentation": ("fragmentation", "SELECT * FROM fragmentation"),
    "decisions": ("decisions", "SELECT * FROM decisions"),
    "idle_holds": ("idle_holds", "SELECT * FROM idle_holds"),
    "tenants": ("tenants", "SELECT * FROM tenants"),
    "nodes": ("nodes", "SELECT * FROM nodes"),
    "health_events": ("health_events", "SELECT * FROM health_events"),
    "job_stats": ("job_stats", f"SELECT {JOB_STATS_COLUMNS} FROM job_stats"),
    "job_daily": (
        "job_hourly",
        "SELECT date, tenant, gpu_model, sum(allocated_gpu_hours) AS allocated_gpu_hours, "
        "sum(busy_gpu_hours) AS busy_gpu_hours, sum(idle_gpu_hours) AS idle_gpu_hours FROM job_hourly GROUP BY ALL",
    ),
}


class DashData:
    def __init__(self, lake: Path | str, variables: dict[str, str] | None = None, check_every_s: float = 30.0):
        self.lake = Path(lake)
        self.variables = variables
        self.check_every_s = check_every_s
        self._local = threading.local()
        self._lakes: list[Lake] = []
        self._lock = threading.Lock()
        self._snap: duckdb.DuckDBPyConnection | None = None
        self._present: set[str] = set()
        self._key: tuple = ()
        self._checked = 0.0
        self._rebuilding = False
        self._bounds: tuple | None = None

    # -- the lake, for the few questions the snapshot does not hold ------------------------------------
    def _session(self) -> Lake:
        lake = getattr(self._local, "lake", None)
        if lake is None:
            # Flask serves each request on a thread; a DuckDB connection is not for two threads at once.
            lake = Lake(self.lake, variables=self.variables)
            self._local.lake = lake
            with self._lock:
                self._lakes.append(lake)
        return lake

    # -- the snapshot ------------------------------------------------------------------------------------
    def _state_key(self) -> tuple:
        """Changes whenever the analytics write: their watermarks and partition manifests."""
        state = self.lake / "_state" / "analytics"
        try:
            return tuple(sorted((p.name, p.stat().st_mtime_ns) for p in state.iterdir()))
        except FileNotFoundError:
            return ()

    def _build(self, key: tuple) -> None:
        t0 = time.perf_counter()
        con = duckdb.connect(":memory:")
        con.execute("SET TimeZone = 'UTC'")
        present = set()
        with Lake(self.lake, variables=self.variables) as lake:
            for name, (source, query) in SNAPSHOT.items():
                frame = lake.execute(query, timeout_s=None).frame
                con.register("_load", frame)
                con.execute(f"CREATE TABLE {name} AS SELECT * FROM _load")
                con.unregister("_load")
                if has_data(self.lake, source):
                    present.add(name)
        bounds = con.execute("SELECT min(date), max(date) FROM fleet_hourly").fetchone()
        with self._lock:
            old, self._snap = self._snap, con
            self._present, self._key = present, key
            self._bounds = bounds if bounds and bounds[0] is not None else None
            self._rebuilding = False
        log.info("dashboard snapshot of %s built in %.1f s", self.lake, time.perf_counter() - t0)
        if old is not None:
            old.close()

    def _rebuild_in_background(self, key: tuple) -> None:
        try:
            self._build(key)
        except Exception:  # the old snapshot keeps serving; say why this one failed
            log.exception("dashboard snapshot of %s failed; serving the previous one", self.lake)
            with self._lock:
                self._rebuilding = False

    def snapshot(self) -> duckdb.DuckDBPyConnection:
        now = time.monotonic()
        if self._snap is None:
            with self._lock:
                first = self._snap is None
            if first:
                self._build(self._state_key())
            return self._snap
        if now - self._checked > self.check_every_s:
            self._checked = now
            key = self._state_key()
            with self._lock:
                start = key != self._key and not self._rebuilding
                if start:
                    self._rebuilding = True
            if start:
                threading.Thread(target=self._rebuild_in_background, args=(key,), daemon=True).start()
        return self._snap

    # -- what pages call -----------------------------------------------------------------------------------
    def frame(self, sql: str, params: list | None = None, lake: bool = False) -> pl.DataFrame:
        if lake:
            return self._session().execute(sql, params or [], timeout_s=30).frame
        cur = self.snapshot().cursor()  # a cursor per call: connections are shared across request threads
        try:
            out = cur.sql(sql, params=params or None).pl()
        finally:
            cur.close()
        # DuckDB names the zone Etc/UTC; the lake (and polars code comparing with it) says UTC.
        zoned = [c for c, t in out.schema.items() if isinstance(t, pl.Datetime) and t.time_zone]
        return out.with_columns(pl.col(zoned).dt.convert_time_zone("UTC")) if zoned else out

    def has(self, table: str) -> bool:
        if table in SNAPSHOT:
            self.snapshot()
            return table in self._present
        return has_data(self.lake, table)

    def bounds(self) -> tuple[dt.date, dt.date] | None:
        """First and last UTC day with fleet data (fleet_hourly), or None on a lake with no analytics yet."""
        self.snapshot()
        return self._bounds

    def models(self) -> list[str]:
        return self.frame("SELECT DISTINCT gpu_model FROM fleet_hourly ORDER BY 1")["gpu_model"].to_list()

    def tenants(self) -> list[str]:
        q = "SELECT DISTINCT tenant FROM cost_daily WHERE tenant IS NOT NULL ORDER BY 1"
        return self.frame(q)["tenant"].to_list()

    def close(self) -> None:
        with self._lock:
            for lake in self._lakes:
                lake.close()
            self._lakes.clear()
            if self._snap is not None:
                self._snap.close()
                self._snap = None
