"""`Exporter`: a prometheus_client custom collector (`collect()` only) that serves the latest snapshot of the figures.

A scrape never reads the lake: `collect()` yields the families of the current `figures.Snapshot`, plus the
exporter's own up, snapshot age and rebuild errors, and each cluster's run age computed at the scrape's time. A
background thread asks the store every `check_every_s` whether the analytics committed since (its
`state_version("analytics")`, a stat of the state folder or a HEAD of the manifest on S3, as dashboards/data.py
does) and, when they did, reads the lake and builds a new snapshot, swapped in by one reference assignment: a scrape
sees the old snapshot or the new one, never a mix. A failed rebuild keeps the old one serving, is logged and counted
(gpuledger_exporter_snapshot_errors_total), and is tried again at the next check.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from gpuledger.analytics.exporter.figures import Snapshot, build
from gpuledger.analytics.exporter.tables import Tables, read
from gpuledger.store import LakeRef, open_store

log = logging.getLogger(__name__)


class Exporter:
    """The figures of `lake` for Prometheus. `idle_min_h`: [enforcer] idle_min_h, the bound of the idle-held gauge.
    `clock`: Unix time, for the age gauges (injected in tests)."""

    def __init__(
        self,
        lake: LakeRef,
        idle_min_h: float,
        check_every_s: float = 30.0,
        clock: Callable[[], float] = time.time,
        reader: Callable[[LakeRef], Tables] = read,
    ):
        self.lake = open_store(lake)
        self.idle_min_s = idle_min_h * 3600.0
        self.check_every_s, self.clock, self.reader = check_every_s, clock, reader
        self.snapshot: Snapshot | None = None  # None until the first build
        self.built_at: float | None = None
        self.build_s = 0.0
        self.errors = 0
        self._key: tuple | None = None
        self._building = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the snapshot --------------------------------------------------------------------------------------------------
    def refresh(self) -> bool:
        """Rebuild the snapshot if the analytics committed since the last build (or none was built). True when it
        rebuilt. Raises what the read raised (the background loop counts and logs it)."""
        with self._building:
            key = self.lake.state_version("analytics")
            if self.snapshot is not None and key == self._key:
                return False
            t0 = time.perf_counter()
            snap = build(self.reader(self.lake), self.idle_min_s, self.snapshot)
            self.snapshot, self._key = snap, key  # one assignment: a scrape sees the old or the new
            self.built_at, self.build_s = self.clock(), time.perf_counter() - t0
            n = len(snap.families)
            log.info("exporter: snapshot of %s built in %.2f s (%d families)", self.lake, self.build_s, n)
            return True

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.refresh()
            except Exception:  # the previous snapshot keeps serving; say why this one failed, and count it
                self.errors += 1
                log.exception("exporter: reading %s failed; serving the previous snapshot", self.lake)
            self._stop.wait(self.check_every_s)

    def start(self) -> Exporter:
        """Build the first snapshot and keep it fresh, in a daemon thread (scrapes meanwhile get the own metrics)."""
        self._thread = threading.Thread(target=self._loop, daemon=True, name="exporter-snapshot")
        self._thread.start()
        return self

    def stop(self, wait_s: float = 60.0) -> None:
        """Stop checking for new analytics, and wait (up to `wait_s`) for a rebuild under way to finish: a process
        that exits while a daemon thread is inside DuckDB or polars can abort in the interpreter's finalization."""
        self._stop.set()
        thread = getattr(self, "_thread", None)
        if thread is not None and thread is not threading.current_thread():
            thread.join(wait_s)

    # -- prometheus_client's Collector protocol -----------------------------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        now = self.clock()
        snap = self.snapshot  # taken once: the whole scrape is one snapshot
        yield GaugeMetricFamily("gpuledger_exporter_up", "1 while the exporter serves (unitless)", value=1)
        age = GaugeMetricFamily(
            "gpuledger_exporter_snapshot_age_seconds",
            "Seconds since the exporter last read the lake's analytics (seconds; absent before the first read)",
        )
        build_s = GaugeMetricFamily(
            "gpuledger_exporter_snapshot_build_seconds", "Time the last snapshot took to read and build (seconds)"
        )
        if self.built_at is not None:
            age.add_metric([], max(0.0, now - self.built_at))
            build_s.add_metric([], self.build_s)
        yield age
        yield build_s
        yield CounterMetricFamily(
            "gpuledger_exporter_snapshot_errors",
            "Snapshot rebuilds that failed (the previous one served)",
            value=self.errors,
        )
        if snap is not None:
            yield from snap.scrape(now)


def registry(exporter: Exporter) -> CollectorRegistry:
    """A registry of its own holding only the exporter (no process or platform collectors)."""
    r = CollectorRegistry(auto_describe=False)
    r.register(exporter)
    return r


def serve(exporter: Exporter, host: str, port: int):
    """Serve /metrics on host:port from a daemon thread (prometheus_client's WSGI server); returns (server, thread).
    OSError when the port cannot be bound."""
    from prometheus_client import start_http_server

    return start_http_server(port, addr=host, registry=registry(exporter))
