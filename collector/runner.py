"""The collection loop: sources -> spool (fsynced) -> lake (flush), driven by apscheduler.

Scrape and flush are separate jobs: a slow flush never delays a scrape, and with coalesce plus
max_instances=1 a slow scrape never piles up runs: a tick that comes while the last run still goes is skipped,
counted (gpuledger_skipped_runs_total{job}) and said in one line a minute at most (`SkippedRuns`).

A batch the spool cannot take (a full disk) is kept in memory, in order, and tried again before anything newer;
it is acknowledged only once it is in the spool.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, JobSubmissionEvent
from apscheduler.schedulers.background import BackgroundScheduler

from gpuledger.collector.metrics import CollectorMetrics
from gpuledger.collector.source import Batch, Source
from gpuledger.errors import GpuledgerError, SourceError, SpoolError
from gpuledger.lake import LakeWriter
from gpuledger.spool import Spool
from gpuledger.store import StoreUnreachable

log = logging.getLogger(__name__)
MAX_BACKOFF_S = 300.0
# Rows kept in memory while the spool cannot take them: about 100 MB of Python lists, some 70 hours of an 8-GPU
# node at 10 s. Past it the oldest are dropped, counted and logged (growing without bound would end in an OOM
# kill that loses all of them).
MAX_PENDING_ROWS = 200_000
# How often a job whose runs outlast its interval is said again (with the ticks skipped since)
SKIPPED_REPORT_S = 60.0


@dataclass
class ScrapeReport:
    """What one scrape got: rows of data (scrape errors not counted) and why each failed source or target failed."""

    rows: int = 0
    failures: list[str] = field(default_factory=list)


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
        max_pending_rows: int = MAX_PENDING_ROWS,
    ):
        self.sources = list(sources)
        self.spool = spool
        self.writer = writer
        self.cluster = cluster
        self.node = node
        self.clock = clock
        self.on_ack = on_ack
        self.interval_s = 10.0  # set by schedule(); the unit of the retry backoff
        self.flush_interval_s = 30.0  # set by schedule(); the unit of a failing flush's backoff
        # A failing flush (an object store down or refusing) is retried with the same backoff as a source, in
        # units of the flush interval: the spool keeps every batch meanwhile, and the store is not hammered.
        self._flush_failures = 0
        self._flush_retry_at = 0.0
        self.scrapes = 0
        self.errors = 0
        self.metrics = metrics or CollectorMetrics(spool.dir, writer.store)
        # A failing source is retried with exponential backoff (interval x 2^failures, at most MAX_BACKOFF_S),
        # so a dead endpoint is not hammered and does not flood health_events.
        self._failures: dict[str, int] = {}
        self._retry_at: dict[str, float] = {}
        self.max_pending_rows = max_pending_rows
        self._pending: deque[Batch] = deque()  # scraped, not yet in the spool; oldest first
        self._pending_lock = threading.Lock()  # the scrape and the flush jobs (two threads) both drain it
        self._pending_rows = 0
        self._spool_error: SpoolError | None = None  # set while the spool refuses appends
        self._dropped_rows = 0  # dropped in this spell of refusals (logged once when it starts and when it ends)
        self._report = ScrapeReport()

    def start(self, wait_for_lake: bool = False) -> int:
        """Open the spool and replay what a previous run left in it. Returns the rows replayed.

        With `wait_for_lake` (a long-running collector), an object store that does not answer yet is logged, not
        raised: the spool takes the scrapes, and the flushes (which write whatever a previous run left too) retry
        with backoff until it answers. A node booting during a store outage keeps collecting. A misconfigured store
        (bad credentials, missing bucket, no permission to write) still stops the start: it will not pass by
        itself."""
        self.spool.lock()  # first: a spool another live process writes is left alone, and so is its lake
        try:
            self.writer.init()
        except StoreUnreachable as e:
            if not wait_for_lake:
                raise
            log.error("%s: collecting into the spool; flushes retry until the lake answers", e)
            self.spool.open()
            return 0
        self.spool.open()
        try:
            rows = self.spool.replay(self.writer)
        except StoreUnreachable as e:
            if not wait_for_lake:
                raise
            log.error("%s: the spool keeps what a previous run left; flushes retry until the lake answers", e)
            return 0
        self._report_corrupt()
        if rows:
            log.info("replayed %d spooled row(s) from a previous run", rows)
        return rows

    def _append(self, batch: Batch) -> None:
        """Spool the batch after any kept from earlier; if the spool cannot take it, keep it for the next try."""
        cols, failed = batch.columns, 0
        if batch.table == "health_events":
            for i, kind in enumerate(cols.get("kind", [])):
                if kind == "scrape_error":
                    failed += 1
                    self.metrics.errors.labels(cols["source"][i], "scrape_error").inc()
                    self._report.failures.append(cols["detail"][i])
        self._report.rows += batch.rows - failed
        with self._pending_lock:
            self._pending.append(batch)
            self._pending_rows += batch.rows
            self._drain_locked()

    def _drain(self) -> None:
        with self._pending_lock:
            self._drain_locked()

    def _drain_locked(self) -> None:
        """Move kept batches into the spool, oldest first, acknowledging each once it is there."""
        while self._pending:
            batch = self._pending[0]
            try:
                self.spool.append(batch.table, batch.columns)
            except SpoolError as e:
                if self._spool_error is None:
                    log.error("%s: keeping scraped batches in memory and trying again at every scrape", e)
                self._spool_error = e
                self._drop_oldest()
                break
            self._pending.popleft()
            self._pending_rows -= batch.rows
            self.metrics.rows.labels(batch.table).inc(batch.rows)
            if self.on_ack:
                self.on_ack(batch)
        else:
            if self._spool_error is not None:
                dropped = f" ({self._dropped_rows} row(s) were dropped)" if self._dropped_rows else ""
                log.warning("the spool takes appends again; every batch kept in memory is in it%s", dropped)
                self._spool_error, self._dropped_rows = None, 0
        self.metrics.pending_rows.set(self._pending_rows)

    def _drop_oldest(self) -> None:
        while self._pending_rows > self.max_pending_rows:
            batch = self._pending.popleft()
            self._pending_rows -= batch.rows
            self.metrics.dropped_rows.labels(batch.table).inc(batch.rows)
            if not self._dropped_rows:
                log.error(
                    "more than %d scraped rows wait for the spool: dropping the oldest, never acknowledged "
                    "(counted in gpuledger_rows_dropped_total)",
                    self.max_pending_rows,
                )
            self._dropped_rows += batch.rows

    def scrape(self) -> ScrapeReport:
        """Collect from every due source; returns what this scrape got and which sources or targets failed."""
        self._report = ScrapeReport()
        self._drain()
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
        return self._report

    def scrape_logged(self) -> None:
        """The scheduled scrape: an error is reported in one line, and the next scrape tries again (a batch the
        spool could not take is kept in memory for it, never acknowledged before)."""
        try:
            self.scrape()
        except GpuledgerError as e:
            self.errors += 1
            log.error("scrape not recorded: %s", e)

    def flush_logged(self) -> None:
        now = self.clock()
        if now < self._flush_retry_at:
            return
        try:
            self.flush()
        except GpuledgerError as e:
            self.errors += 1
            n = self._flush_failures = self._flush_failures + 1
            wait = min(self.flush_interval_s * 2 ** (n - 1), MAX_BACKOFF_S) if n > 1 else 0.0
            self._flush_retry_at = now + wait
            log.error("flush failed (failure %d; next try in %.0f s), the spool keeps the data: %s", n, wait, e)
            return
        if self._flush_failures:
            log.warning("flush works again after %d failure(s)", self._flush_failures)
        self._flush_failures, self._flush_retry_at = 0, 0.0

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
        self._drain()
        rows = self.spool.flush(self.writer)
        self.metrics.flushes.inc()
        self._report_corrupt()
        if self._pending:
            return rows  # a source's checkpoint would record as written what is still only in memory
        for src in self.sources:
            checkpoint = getattr(src, "checkpoint", None)
            if checkpoint:
                checkpoint()
        return rows

    def close(self) -> None:
        """Flush everything and release the sources (called on Ctrl-C / SIGTERM). Returns only when every
        acknowledged row is in the lake (the spool checked, `Spool.check_flushed`); raises GpuledgerError otherwise."""
        try:
            self.flush()
            if self._pending:
                # the flush turned the spool into Parquet and deleted it, which frees space on the spool's disk
                self.flush()
            if self._pending:
                raise SpoolError(
                    f"{self._pending_rows} scraped row(s) never reached the spool and are lost: {self._spool_error}"
                )
            self.spool.check_flushed()
        finally:
            self.spool.close()
            for src in self.sources:
                src.close()

    def schedule(self, scheduler: BackgroundScheduler, interval_s: float, flush_interval_s: float) -> None:
        self.interval_s, self.flush_interval_s = interval_s, flush_interval_s
        opts = dict(coalesce=True, max_instances=1, misfire_grace_time=None)
        scheduler.add_job(self.scrape_logged, "interval", seconds=interval_s, id="scrape", next_run_time=_now(), **opts)
        scheduler.add_job(self.flush_logged, "interval", seconds=flush_interval_s, id="flush", **opts)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class _NoSkipWarnings(logging.Filter):
    """Drops apscheduler's line for each skipped tick (`SkippedRuns` says it instead)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "maximum number of running instances reached" not in str(record.msg)


# The scheduler's own logger: under `apscheduler`, so the level the CLI gives apscheduler's lines holds for it, and
# its own, so the filter touches no other scheduler in the process.
_SCHEDULER_LOG = logging.getLogger("apscheduler.scheduler.gpuledger")
_SCHEDULER_LOG.addFilter(_NoSkipWarnings())


class SkippedRuns:
    """A job's tick that came while its last run still went, and was skipped: max_instances=1 asks for that (runs
    never pile up). apscheduler warns at every such tick, naming its repr of the job: a scrape slower than its
    interval would write a line a tick for as long as it is slow (5 a second at a 0.2 s interval). Here each skip is
    counted (gpuledger_skipped_runs_total{job}) and a job is said in one line at most every `every_s`: the first
    skip at once, then the ticks skipped since."""

    def __init__(
        self, metrics: CollectorMetrics | None = None, every_s: float = SKIPPED_REPORT_S, clock=time.monotonic
    ):
        self.metrics, self.every_s, self.clock = metrics, every_s, clock
        self.since: Counter[str] = Counter()
        self.said_at: dict[str, float] = {}

    def __call__(self, event: JobSubmissionEvent) -> None:
        # Called on the scheduler's one thread: no lock
        job, now = event.job_id, self.clock()
        if self.metrics is not None:
            self.metrics.skipped_runs.labels(job).inc()
        self.since[job] += 1
        last = self.said_at.get(job)
        if last is not None and now - last < self.every_s:
            return
        skipped = self.since.pop(job)
        self.said_at[job] = now
        if last is None:
            log.warning(
                "%s: a run outlasted its interval, so the next tick is skipped (and every tick a run outlasts); "
                "said again at most every %g s, with the count",
                job,
                self.every_s,
            )
        else:
            log.warning(
                "%s: %d tick(s) skipped in the last %.0f s: its runs outlast its interval", job, skipped, now - last
            )


def _stops_on_ctrl_c(func: Callable[..., object], job: str) -> Callable[..., object]:
    """`func`, ending in one line when Ctrl-C reaches it. polars turns a SIGINT into a KeyboardInterrupt in
    whichever thread is running a query (its own signal hook, pola-rs/polars#20961), so a job mid-run gets one
    too (an analytics run, a flush), and apscheduler would log it as the job's failure, with a traceback. The main
    thread gets Ctrl-C as well and stops the scheduler; what the job left undone is done at the next start (the
    spool keeps unflushed rows, an analytics run picks up where the lake is)."""

    @functools.wraps(func)
    def run(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except KeyboardInterrupt:
            log.info("%s: stopped by Ctrl-C mid-run", job)
            return None

    return run


def run_until_stopped(
    jobs: Callable[[BackgroundScheduler], None], stop: threading.Event, metrics: CollectorMetrics | None = None
) -> None:
    """Run the scheduled jobs until `stop` is set (signal handler) or Ctrl-C; then shut the scheduler down. A
    skipped tick is counted in `metrics` and said by `SkippedRuns`; a job that Ctrl-C reaches mid-run ends in one
    line (`_stops_on_ctrl_c`)."""
    # Every job: a run that comes late (a loaded machine woke the scheduler late) still runs, once (coalesce), never
    # two at once. apscheduler's default drops a run more than 1 s late, with a warning: an analytics or compaction
    # run would then wait a whole interval for the next.
    defaults = {"coalesce": True, "max_instances": 1, "misfire_grace_time": None}
    scheduler = BackgroundScheduler(timezone="UTC", logger=_SCHEDULER_LOG, job_defaults=defaults)
    scheduler.add_listener(SkippedRuns(metrics), EVENT_JOB_MAX_INSTANCES)
    jobs(scheduler)
    for job in scheduler.get_jobs():
        job.modify(func=_stops_on_ctrl_c(job.func, job.id))
    scheduler.start()
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        scheduler.shutdown(wait=True)
