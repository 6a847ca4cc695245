"""The enforcer's two ties to the lake, both off the request path: loading the decision table, writing the audit."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import time
from pathlib import Path

import polars as pl

from enforcer.decide import Table
from enforcer.policies import IdleHold, TenantRow
from gpuledger.atomic import ensure_dir
from gpuledger.errors import SpoolError
from gpuledger.lake import LakeWriter, frame_from_rows, has_data, scan
from gpuledger.spool import Spool

log = logging.getLogger(__name__)


def load_table(lake: Path) -> Table | None:
    """The latest analysis's rows of the lake's `decisions` table (None when the analytics have not run)."""
    if not has_data(lake, "decisions"):
        return None
    d = scan(lake, "decisions").collect()
    if d.is_empty():
        return None
    latest = d.filter(pl.col("computed_at") == pl.col("computed_at").max())
    rows = {}
    for r in latest.iter_rows(named=True):
        rows[(r["tenant"], r["gpu_model"])] = TenantRow(
            tenant=r["tenant"],
            gpu_model=r["gpu_model"],
            allocated_gpus=r["allocated_gpus"] or 0.0,
            quota_gpus=r["quota_gpus"],
            budget_usd=r["budget_usd"],
            spent_usd=r["spent_usd"] or 0.0,
            fairshare=r["fairshare"],
            budget_gpu_h=r["budget_gpu_h"],
            spent_gpu_h=r["spent_gpu_h"] or 0.0,
        )
    at = latest["computed_at"][0]
    idle: dict[str, list[IdleHold]] = {}
    if has_data(lake, "idle_holds"):
        # The latest run's rows, provided that run is not older than the decisions': the analytics write
        # idle_holds just before decisions, so a reload between the two reads the next run's holds (newer, right),
        # and holds older than the decisions would name jobs that have since woken up.
        holds = scan(lake, "idle_holds")
        holds = holds.filter(pl.col("computed_at") == pl.col("computed_at").max()).collect()
        if holds.height and holds["computed_at"][0] < at:
            holds = holds.clear()
        for h in holds.iter_rows(named=True):
            idle.setdefault(h["tenant"], []).append(
                IdleHold(
                    h["namespace"] or "",
                    h["pod"] or h["job_id"],
                    h["gpu_model"],
                    h["share"] or 0.0,
                    h["idle_since"].timestamp(),
                )
            )
    return Table(rows, at, {t: tuple(v) for t, v in idle.items()})


class AuditWriter:
    """The audit of every decision, crash-safe without slowing the answer.

    On the request path a decision is one record appended to this replica's write-ahead spool
    (`<lake>/_spool/webhook-<replica>/`, the collector's WAL format): one write(2), about 60 us with its JSON,
    after which it survives kill -9 of the webhook. A background thread fdatasyncs the spool every `sync_s` (so a
    power loss costs at most that much) and turns it into admission_decisions Parquet every `flush_s` (a file per
    flush: at every second a busy day would be 86,400 files before `compact` merges them). On start, the replica
    replays what its own spool holds, and adopts the spools of replicas that are gone (a Deployment's pods get
    new names when they restart): each live replica holds a lock on its spool, so only orphans are taken.
    """

    def __init__(self, lake: Path, replica: str, cluster: str, flush_s: float = 30.0, sync_s: float = 1.0):
        self.lake = Path(lake)
        self.writer = LakeWriter(lake)
        self.replica, self.cluster, self.flush_s, self.sync_s = replica, cluster, flush_s, sync_s
        root = self.lake / "_spool"
        self.spool = Spool(root / f"webhook-{replica}", f"webhook-{replica}", fsync=False)
        self._lock_fd = _lock(self.spool.dir, blocking=False)
        if self._lock_fd is None:
            raise SpoolError(f"audit spool {self.spool.dir} is held by another running replica named {replica!r}")
        self.recovered = self.spool.replay(self.writer) + self._adopt_orphans(root)
        self.spool.open()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="audit")

    def _adopt_orphans(self, root: Path) -> int:
        rows = 0
        for d in sorted(root.glob("webhook-*")):
            if d == self.spool.dir or not d.is_dir():
                continue
            fd = _lock(d, blocking=False)
            if fd is None:
                continue  # a live replica's
            try:
                n = Spool(d, d.name, fsync=False).replay(self.writer)
                rows += n
                log.info("audit: replayed %d decision(s) left in %s by a replica that is gone", n, d)
                if not any(d.glob("seg-*.wal")):  # all in the lake (a corrupt segment would be kept aside)
                    for f in ("HIGHWATER", "LOCK"):
                        (d / f).unlink(missing_ok=True)
                    with contextlib.suppress(OSError):
                        d.rmdir()  # not empty (corrupt/): kept for inspection
            finally:
                os.close(fd)
        return rows

    def start(self) -> None:
        self._thread.start()

    def put(self, row: dict) -> None:
        # keep=row: the spool hands the rows back with the segment that holds them (one lock for both).
        self.spool.append("admission_decisions", {k: [v] for k, v in row.items()}, keep=row)

    def flush(self) -> int:
        """Everything appended so far into the lake; returns the rows written.

        From the copy in memory, under the name a replay of the segment would use: reading the segment back
        (JSON record by record) took 0.66 s for 20,000 decisions, holding the GIL the request path needs;
        building the frame from memory takes 0.05 s."""
        # A segment whose write failed earlier (a full or unwritable lake) is still on disk: replayed first.
        done = self.spool.replay(self.writer)
        rotated = self.spool.rotate()
        if rotated is None:
            return done
        seg, rows = rotated
        self.writer.write("admission_decisions", frame_from_rows("admission_decisions", rows), self.spool.name_of(seg))
        self.spool.discard(seg)
        return done + len(rows)

    def _run(self) -> None:
        next_flush = time.monotonic() + self.flush_s
        while not self._stop.wait(self.sync_s):
            try:
                self.spool.sync()
                if time.monotonic() >= next_flush:
                    next_flush = time.monotonic() + self.flush_s
                    self.flush()
            except Exception:  # keep serving: the decisions stay in the spool until the lake takes them
                log.exception("audit: could not sync the spool or move its decisions to the lake")

    def close(self) -> None:
        """Flush everything to the lake and let go of the spool; a second call does nothing."""
        if self._lock_fd is None:
            return
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        self.flush()
        self.spool.close()
        os.close(self._lock_fd)
        self._lock_fd = None


def _lock(directory: Path, blocking: bool) -> int | None:
    """An exclusive flock on `directory`/LOCK (created), held while the fd stays open; None if taken."""
    ensure_dir(directory)
    fd = os.open(directory / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(fd)
        return None
    return fd
