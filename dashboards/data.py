"""The dashboards' one way to the lake: parameterised SQL over the analytics' tables, through the query helper.

Pages never read raw samples on a load: they read the derived tables (fleet_hourly, job_stats, cost_daily,
fragmentation, decisions, demand_forecast, ...) and small event tables. Every user value reaches DuckDB as a
parameter, never formatted into the SQL.

The read path: every query goes through gpuledger.query, so the dashboards read as `gpuledger sql` does (only
SELECT, a time limit, UTC, no file outside the lake). Most go to a `query.Snapshot`, the helper's in-memory mode:
the tables the pages read, copied out of the lake (by `query.Lake`) into one in-memory DuckDB database, and
rebuilt (in the background, the old one serving meanwhile) when the analytics have written since (their state
files changed). Each query on the lake's views pays 20-40 ms to list and bind a year of Parquet files; a page asks
five to ten questions, which made a page 0.3-1.1 s on a year of 1,000 GPUs. The same questions in memory take a
few ms. job_hourly is kept per cluster, tenant, model, workload class and day (job_daily), which is all the pages
ask of it. A few queries (one hour of gpu_hourly, admission decisions, a tenant's jobs) go to the lake itself
(`lake=True`), on a `query.Lake` taken from a pool (one per request running at once, kept for the next).

The swap: a request holds the snapshot it took (Snapshot.acquire) until its query is done; a rebuild replaces
the current one under a lock and retires the old, which closes when its last reader releases it. So no request
reads a closed or closing connection (tests/dashboards/test_snapshot_swap.py rebuilds back to back under 8
reading threads).
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
import time

import polars as pl

from gpuledger.lake import has_data
from gpuledger.query import Lake, Snapshot
from gpuledger.store import LakeRef, open_store

log = logging.getLogger(__name__)

JOB_STATS_COLUMNS = (
    "cluster, job_id, tenant, gpu_model, gpus, status, submitted_at, scheduled_at, queue_s, run_s, held_s, gpu_hours, "
    "size_bucket, expansion, allocated_gpu_hours, busy_gpu_hours, idle_gpu_hours, efficiency, cost_usd, "
    "workload_class, date"
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
    # Each GPU's day, as sums (means weighted by samples are sum / count at any grouping): the fleet pages' year
    # views (a node's GPUs by day, a cluster's nodes over the range) read these 365 rows per GPU, not 8,760 hours.
    "gpu_daily": (
        "gpu_hourly",
        "SELECT date, cluster, node, gpu_uuid, parent_gpu_uuid, any_value(model) AS model, sum(samples) AS samples, "
        "sum(allocated_ratio * samples) AS allocated_samples, "
        "sum(util_gpu_pct_mean * samples) AS util_sum, sum(samples) FILTER (util_gpu_pct_mean IS NOT NULL) AS util_n, "
        "sum(sm_active_ratio_mean * samples) AS sm_sum, "
        "sum(samples) FILTER (sm_active_ratio_mean IS NOT NULL) AS sm_n, sum(power_w_mean * samples) AS power_sum, "
        "sum(samples) FILTER (power_w_mean IS NOT NULL) AS power_n, max(mem_used_bytes_max) AS mem_used_bytes_max "
        "FROM gpu_hourly GROUP BY ALL",
    ),
    "job_daily": (
        "job_hourly",
        "SELECT date, cluster, tenant, gpu_model, workload_class, sum(allocated_gpu_hours) AS allocated_gpu_hours, "
        "sum(busy_gpu_hours) AS busy_gpu_hours, sum(idle_gpu_hours) AS idle_gpu_hours FROM job_hourly GROUP BY ALL",
    ),
}


QUERY_TIMEOUT_S = 30.0  # a page's question; the whole page waits on its slowest


class DashData:
    def __init__(
        self,
        lake: LakeRef,
        variables: dict[str, str] | None = None,
        check_every_s: float = 30.0,
    ):
        self.lake = open_store(lake)
        self.variables = variables
        self.check_every_s = check_every_s
        self._idle_lakes: queue.SimpleQueue[Lake] = queue.SimpleQueue()
        self._lakes: list[Lake] = []
        self._lock = threading.Lock()  # the current snapshot and what goes with it
        self._building = threading.Lock()  # one build at a time
        self._snap: Snapshot | None = None
        self._present: set[str] = set()
        self._key: tuple = ()
        self._checked = 0.0
        self._rebuilding = False
        self._bounds: tuple | None = None

    # -- the lake, for the few questions the snapshot does not hold ------------------------------------
    def _lake_frame(self, sql: str, params: list) -> pl.DataFrame:
        # A Lake is one DuckDB connection, not for two threads at once: each query takes an idle one (or opens
        # one) and puts it back, so there are as many as queries ran at once (one per request thread would, under
        # Flask's thread-per-request server, open one per request and close it only at exit).
        try:
            lake = self._idle_lakes.get_nowait()
        except queue.Empty:
            lake = Lake(self.lake, variables=self.variables)
            with self._lock:
                self._lakes.append(lake)
        try:
            return lake.execute(sql, params, timeout_s=QUERY_TIMEOUT_S).frame
        finally:
            with self._lock:
                kept = any(k is lake for k in self._lakes)  # not closed by close() meanwhile
            if kept:
                self._idle_lakes.put(lake)

    # -- the snapshot ------------------------------------------------------------------------------------
    def _state_key(self) -> tuple:
        """Changes whenever the analytics write: their watermarks and partition manifests."""
        return self.lake.state_version("analytics")

    def _tables(self, present: set[str]):
        """(name, frame) for each snapshot table, read from the lake one at a time (so only one is held twice)."""
        with Lake(self.lake, variables=self.variables) as lake:
            for name, (source, query) in SNAPSHOT.items():
                frame = lake.execute(query, timeout_s=None).frame  # off the request path: a year takes seconds
                if has_data(self.lake, source):
                    present.add(name)
                yield name, frame

    def _build(self, key: tuple) -> None:
        """Build a snapshot and make it the current one; the caller holds self._building."""
        t0 = time.perf_counter()
        present: set[str] = set()
        snap = Snapshot(self._tables(present))
        bounds = snap.execute("SELECT min(date), max(date) FROM fleet_hourly").rows[0]
        with self._lock:
            old, self._snap = self._snap, snap
            self._present, self._key = present, key
            self._bounds = bounds if bounds[0] is not None else None
            self._rebuilding = False
        log.info("dashboard snapshot of %s built in %.1f s", self.lake, time.perf_counter() - t0)
        if old is not None:
            old.retire()  # closes when the requests reading it are done

    def rebuild(self) -> None:
        """Build a new snapshot from the lake now and swap it in (requests reading the old one finish on it)."""
        with self._building:
            self._build(self._state_key())

    def _rebuild_in_background(self, key: tuple) -> None:
        try:
            with self._building:
                self._build(key)
        except Exception:  # the old snapshot keeps serving; say why this one failed
            log.exception("dashboard snapshot of %s failed; serving the previous one", self.lake)
            with self._lock:
                self._rebuilding = False

    def _fresh(self) -> None:
        """Build the first snapshot (the request waits for it), or start a rebuild when the analytics wrote."""
        if self._snap is None:
            with self._building:
                if self._snap is None:  # another request may have built it while this one waited
                    self._build(self._state_key())
            return
        now = time.monotonic()
        if now - self._checked > self.check_every_s:
            self._checked = now
            key = self._state_key()
            with self._lock:
                start = key != self._key and not self._rebuilding
                if start:
                    self._rebuilding = True
            if start:
                threading.Thread(target=self._rebuild_in_background, args=(key,), daemon=True).start()

    def _acquire(self) -> Snapshot:
        """The current snapshot, held for the caller until it calls release()."""
        while True:
            self._fresh()
            with self._lock:  # taken under the lock a swap holds: never one already retired
                snap = self._snap
                if snap is not None:
                    snap.acquire()
                    return snap
            # close() ran meanwhile: build again, as the first request did

    # -- what pages call -----------------------------------------------------------------------------------
    def frame(self, sql: str, params: list | None = None, lake: bool = False) -> pl.DataFrame:
        if lake:
            out = self._lake_frame(sql, params or [])
        else:
            snap = self._acquire()
            try:
                out = snap.execute(sql, params or [], timeout_s=QUERY_TIMEOUT_S).frame
            finally:
                snap.release()
        # DuckDB may name the zone Etc/UTC; the lake (and polars code comparing with it) says UTC.
        zoned = [c for c, t in out.schema.items() if isinstance(t, pl.Datetime) and t.time_zone not in (None, "UTC")]
        return out.with_columns(pl.col(zoned).dt.convert_time_zone("UTC")) if zoned else out

    def has(self, table: str) -> bool:
        if table in SNAPSHOT:
            self._fresh()
            return table in self._present
        return has_data(self.lake, table)

    def bounds(self) -> tuple[dt.date, dt.date] | None:
        """First and last UTC day with fleet data (fleet_hourly), or None on a lake with no analytics yet."""
        self._fresh()
        return self._bounds

    def freshness(self) -> tuple[dt.datetime | None, dt.datetime | None]:
        """(the end of the last hour the fleet's figures cover, when the analytics last ran), from the snapshot:
        fleet_hourly's last hour, and the run time every run stamps on the tenants table (None before any)."""
        if not self.has("fleet_hourly"):
            return None, None
        last = self.frame("SELECT max(hour) AS h FROM fleet_hourly")["h"][0]
        ran = self.frame("SELECT max(computed_at) AS t FROM tenants")["t"][0] if self.has("tenants") else None
        return (None if last is None else last + dt.timedelta(hours=1)), ran

    def analytics_run(self) -> dict | None:
        """The latest analytics run as it recorded itself in the lake (Store.last_run: started_at, finished_at
        (None while it runs), ok), or None where none ever started."""
        return self.lake.last_run("analytics")

    def models(self) -> list[str]:
        return self.frame("SELECT DISTINCT gpu_model FROM fleet_hourly ORDER BY 1")["gpu_model"].to_list()

    def clusters(self) -> list[str]:
        """The clusters of the lake (one lake may hold several, each analysed with its own config)."""
        return self.frame("SELECT DISTINCT cluster FROM fleet_hourly ORDER BY 1")["cluster"].to_list()

    def tenants(self) -> list[str]:
        q = "SELECT DISTINCT tenant FROM cost_daily WHERE tenant IS NOT NULL ORDER BY 1"
        return self.frame(q)["tenant"].to_list()

    def close(self, wait_s: float = 0.0) -> None:
        """Close the snapshot and the lake connections; `wait_s`: first wait that long for a rebuild under way (a
        server that stops: its process should not exit while a daemon thread is inside DuckDB)."""
        waited = self._building.acquire(timeout=wait_s) if wait_s > 0 else False
        try:
            self._close()
        finally:
            if waited:
                self._building.release()

    def _close(self) -> None:
        with self._lock:
            snap, self._snap = self._snap, None
            lakes, self._lakes = self._lakes, []
            self._idle_lakes = queue.SimpleQueue()
        for lake in lakes:
            lake.close()
        if snap is not None:
            snap.retire()
