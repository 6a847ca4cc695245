"""The dashboards' one way to the lake: parameterised SQL over the analytics' views, one DuckDB session per thread.

Pages never read raw samples on a load: they read the derived tables (fleet_hourly, job_stats, cost_daily,
fragmentation, queue_depth, decisions, demand_forecast, ...) and the small raw tables of events (health_events,
admission_decisions). Every user value reaches DuckDB as a parameter, never formatted into the SQL.
"""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

import polars as pl

from gpuledger.lake import has_data
from gpuledger.query import Lake


class DashData:
    def __init__(self, lake: Path | str, variables: dict[str, str] | None = None):
        self.lake = Path(lake)
        self.variables = variables
        self._local = threading.local()
        self._lakes: list[Lake] = []
        self._lock = threading.Lock()

    def _session(self) -> Lake:
        lake = getattr(self._local, "lake", None)
        if lake is None:
            # Flask serves each request on a thread; a DuckDB connection is not for two threads at once.
            lake = Lake(self.lake, variables=self.variables)
            self._local.lake = lake
            with self._lock:
                self._lakes.append(lake)
        return lake

    def frame(self, sql: str, params: list | None = None) -> pl.DataFrame:
        return self._session().execute(sql, params or [], timeout_s=30).frame

    def has(self, table: str) -> bool:
        return has_data(self.lake, table)

    def bounds(self) -> tuple[dt.date, dt.date] | None:
        """First and last UTC day with fleet data (fleet_hourly), or None on a lake with no analytics yet."""
        if not self.has("fleet_hourly"):
            return None
        lo, hi = self.frame("SELECT min(date), max(date) FROM fleet_hourly").row(0)
        return (lo, hi) if lo is not None else None

    def models(self) -> list[str]:
        if not self.has("fleet_hourly"):
            return []
        return self.frame("SELECT DISTINCT gpu_model FROM fleet_hourly ORDER BY 1")["gpu_model"].to_list()

    def tenants(self) -> list[str]:
        if not self.has("cost_daily"):
            return []
        q = "SELECT DISTINCT tenant FROM cost_daily WHERE tenant IS NOT NULL ORDER BY 1"
        return self.frame(q)["tenant"].to_list()

    def close(self) -> None:
        with self._lock:
            for lake in self._lakes:
                lake.close()
            self._lakes.clear()
