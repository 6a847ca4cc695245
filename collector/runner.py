"""The collection loop: sources -> spool (fsynced) -> lake (flush), driven by apscheduler.

Scrape and flush are separate jobs: a slow flush never delays a scrape, and with coalesce plus
max_instances=1 a slow scrape never piles up runs.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Sequence

from apscheduler.schedulers.background import BackgroundScheduler

from collector.metrics import CollectorMetrics
from collector.source import Batch, Source
from gpuledger.errors import GpuledgerError, SourceError
from gpuledger.lake import LakeWriter
from gpuledger.spool import Spool

log = logging.getLogger(__name__)
MAX_BACKOFF_S = 300.0


class Collector:
    def __init__(
        self,
        sources: Sequence[Source],
        spool: Spool,
        writer: LakeWriter,
        cluster: str,
        node: str,
        clock: Callable[[], float] = time.time,
        on_ack: Callable[[Batch], None] | None = None,
        metrics: CollectorMetrics | None = None,
    ):
        self.sources = list(sources)
        self.spool = spool
        self.writer = writer
        self.cluster = cluster
        self.node = node
        self.clock = clock
        self.on_ack = on_ack
        self.interval_s = 10.0  # set by schedule(); the unit of the retry backoff
        self.scrapes = 0
        self.errors = 0
        self.metrics = metrics or CollectorMetrics(spool.dir)
        # A failing source is retried with exponential backoff (interval x 2^failures, at most MAX_BACKOFF_S),
        # so a dead endpoint is not hammered and does not flood health_events.
        self._failures: dict[str, int] = {}
        self._retry_at: dict[str, float] = {}

    def start(self) -> int:
        """Open the spool and replay what a previous run left in it. Returns the rows replayed."""
        self.writer.init()
        self.spool.open()
        rows = self.spool.replay(self.writer)
        self._report_corrupt()
        if rows:
            log.info("replayed %d spooled row(s) from a previous run", rows)
        return rows

    def _append(self, batch: Batch) -> None:
        self.spool.append(batch.table, batch.columns)
        self.metrics.rows.labels(batch.table).inc(batch.rows)
        if batch.table == "health_events":
            for kind in batch.columns.get("kind", []):
                if kind == "scrape_error":
                    self.metrics.errors.labels(batch.columns["source"][0], "scrape_error").inc()
        if self.on_ack:
            self.on_ack(batch)

    def scrape(self) -> None:
        now = self.clock()
        for src in self.sources:
            if now < self._retry_at.get(src.name, 0.0):
                continue
            t0 = time.perf_counter()
            try:
                for batch in src.collect(now):
                    if batch.rows:
                        self._append(batch)
                self._failures.pop(src.name, None)
            except SourceError as e:
                self.errors += 1
                n = self._failures[src.name] = self._failures.get(src.name, 0) + 1
                wait = min(self.interval_s * 2 ** (n - 1), MAX_BACKOFF_S) if n > 1 else 0.0
                self._retry_at[src.name] = now + wait
                log.warning("source %s: %s (failure %d; next try in %.0f s)", src.name, e, n, wait)
                self._append(self._event(now, "scrape_error", f"{src.name}: {e}", src.name))
            finally:
                self.metrics.scrape_seconds.labels(src.name).observe(time.perf_counter() - t0)
        self.scrapes += 1

    def scrape_logged(self) -> None:
        """The scheduled scrape: a spool that cannot be written (full disk) is reported in one line, and the
        next scrape tries again; the batch that failed was never acknowledged."""
        try:
            self.scrape()
        except GpuledgerError as e:
            self.errors += 1
            log.error("scrape not recorded: %s", e)

    def flush_logged(self) -> None:
        try:
            self.flush()
        except GpuledgerError as e:
            self.errors += 1
            log.error("flush failed, the spool keeps the data for the next one: %s", e)

    def _event(self, now: float, kind: str, detail: str, source: str) -> Batch:
        return Batch(
            "health_events",
            {
                "ts": [int(now * 1_000_000)],
                "cluster": [self.cluster],
                "node": [self.node],
                "gpu_uuid": [None],
                "kind": [kind],
                "code": [None],
                "detail": [detail],
                "source": [source],
            },
        )

    def _report_corrupt(self) -> None:
        while self.spool.corrupt_reports:
            self._append(self._event(self.clock(), "spool_corrupt", self.spool.corrupt_reports.pop(0), "spool"))

    def flush(self) -> int:
        rows = self.spool.flush(self.writer)
        self.metrics.flushes.inc()
        self._report_corrupt()
        for src in self.sources:
            checkpoint = getattr(src, "checkpoint", None)
            if checkpoint:
                checkpoint()
        return rows

    def close(self) -> None:
        """Flush everything and release the sources (called on Ctrl-C / SIGTERM)."""
        try:
            self.flush()
        finally:
            self.spool.close()
            for src in self.sources:
                src.close()

    def schedule(self, scheduler: BackgroundScheduler, interval_s: float, flush_interval_s: float) -> None:
        self.interval_s = interval_s
        opts = dict(coalesce=True, max_instances=1, misfire_grace_time=None)
        scheduler.add_job(self.scrape_logged, "interval", seconds=interval_s, id="scrape", next_run_time=_now(), **opts)
        scheduler.add_job(self.flush_logged, "interval", seconds=flush_interval_s, id="flush", **opts)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def run_until_stopped(jobs: Callable[[BackgroundScheduler], None], stop: threading.Event) -> None:
    """Run the scheduled jobs until `stop` is set (signal handler) or Ctrl-C; then shut the scheduler down."""
    scheduler = BackgroundScheduler(timezone="UTC")
    jobs(scheduler)
    scheduler.start()
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        scheduler.shutdown(wait=True)
