"""The enforcer's two ties to the lake, both off the request path: loading the decision table, writing the audit."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from pathlib import Path

from gpuledger.enforcer.decide import Table
from gpuledger.enforcer.policies import IdleHold, TenantRow
from gpuledger.errors import SpoolError
from gpuledger.lake import LakeWriter, frame_from_rows, has_data
from gpuledger.query import Lake
from gpuledger.spool import Spool, default_dir, legacy_dir
from gpuledger.store import LakeRef, StoreUnreachable, open_store

log = logging.getLogger(__name__)


def load_table(lake: LakeRef, cluster: str) -> Table | None:
    """The latest analysis's rows of `cluster` in the lake's `decisions` table (None when the analytics have not run
    for it).

    One lake may hold several clusters, each with its own webhook: a webhook reads its own cluster's rows only (the
    config's `cluster`), and its latest run is its own, not whichever cluster was analysed last. Read through the
    query helper (gpuledger.query.Lake), as every reader of the lake is: SELECT only, a time limit, UTC."""
    if not has_data(lake, "decisions"):
        return None
    latest_sql = (
        "SELECT * FROM {t} WHERE cluster = $cluster "
        "AND computed_at = (SELECT max(computed_at) FROM {t} WHERE cluster = $cluster)"
    )
    mine = {"cluster": cluster}
    holds = None
    # Both under one read (Lake holds one per query; it is re-entrant): the analytics replace these files only
    # between reads, so never between the two either.
    lake = open_store(lake)
    with lake.reading(), Lake(lake) as q:
        latest = q.execute(latest_sql.format(t="decisions"), mine).frame
        if has_data(lake, "idle_holds"):
            holds = q.execute(latest_sql.format(t="idle_holds"), mine).frame
    if latest.is_empty():
        return None
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
    if holds is not None:
        # The latest run's rows, provided that run is not older than the decisions': the analytics write
        # idle_holds just before decisions, so a reload between the two reads the next run's holds (newer, right),
        # and holds older than the decisions would name jobs that have since woken up.
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
                    h.get("workload_class"),  # null in rows from before the column (the gate's idle_min_h then)
                )
            )
    return Table(rows, at, {t: tuple(v) for t, v in idle.items()})


class AuditWriter:
    """The audit of every decision, crash-safe without slowing the answer.

    On the request path a decision is one record appended to this replica's write-ahead spool
    (`spool.default_dir`'s folder, outside the lake, the collector's WAL format; for an `s3://` lake each flush is
    then a new object written with If-None-Match): one
    write(2), about 60 us with its JSON, after which it survives kill -9 of the webhook. A background thread fdatasyncs
    the spool every `sync_s` (so a power loss costs at most that much) and turns it into admission_decisions Parquet
    every `flush_s` (a file per flush: at every second a busy day would be 86,400 files before `compact` merges them).
    On start, the replica replays what its own spool holds, and adopts the spools of replicas that are gone (a
    Deployment's pods get new names when they restart): each live replica holds a lock on its spool, so only orphans are
    taken.

    A decision the spool cannot take (a full or read-only lake) raises, so the server counts it and still answers;
    the writer counts them too and, at the first flush that can write, records how many and when in health_events
    (kind `audit_unspooled`), so the gap in admission_decisions is in the lake, not only in a log.
    """

    def __init__(self, lake: LakeRef, replica: str, cluster: str, flush_s: float = 30.0, sync_s: float = 1.0):
        self.lake = open_store(lake)
        self.writer = LakeWriter(self.lake)  # on S3 a flush is one new key per table and segment (If-None-Match)
        self.replica, self.cluster, self.flush_s, self.sync_s = replica, cluster, flush_s, sync_s
        # The spool lives outside the lake, in the state folder, where a collector's does (spool.default_dir).
        root = default_dir(self.lake, f"webhook-{replica}").parent
        self.spool = Spool(root / f"webhook-{replica}", f"webhook-{replica}", fsync=False)
        self.spool.lock()  # raises naming the live replica (pid, host) that holds it
        self._open = True
        self.unspooled = 0  # decisions the spool could not take, since the start
        self._lost: tuple[int, int, int, str] | None = None  # not yet in health_events: count, first/last ts, why
        self._lost_lock = threading.Lock()
        # and those a release that kept spools in the lake left there (<lake>/_spool/webhook-*)
        legacy = legacy_dir(self.lake, f"webhook-{replica}")
        roots = [root] + ([legacy.parent] if legacy is not None else [])
        self.recovered = self.spool.replay(self.writer) + sum(self._adopt_orphans(r) for r in roots)
        self.spool.open()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="audit")

    def _adopt_orphans(self, root: Path) -> int:
        rows = 0
        for d in sorted(root.glob("webhook-*")):
            if d == self.spool.dir or not d.is_dir():
                continue
            orphan = Spool(d, d.name, fsync=False)
            try:
                orphan.lock()
            except SpoolError:
                continue  # a live replica's
            try:
                n = orphan.replay(self.writer)
                rows += n
                log.info("audit: replayed %d decision(s) left in %s by a replica that is gone", n, d)
                if not any(d.glob("seg-*.wal")):  # all in the lake (a corrupt segment would be kept aside)
                    # LOCK is never removed: a replica that opened it before an unlink would flock a file no
                    # longer at that path, and a third could then take a new LOCK and "adopt" a live spool
                    (d / "HIGHWATER").unlink(missing_ok=True)
            finally:
                orphan.close()
        return rows

    def start(self) -> None:
        self._thread.start()

    def put(self, row: dict) -> None:
        """Spool one decision, or raise SpoolError (counted, and recorded in the lake at the next flush)."""
        # keep=row: the spool hands the rows back with the segment that holds them (one lock for both).
        try:
            self.spool.append("admission_decisions", {k: [v] for k, v in row.items()}, keep=row)
        except SpoolError as e:
            with self._lost_lock:
                self.unspooled += 1
                n, first = (self._lost[0], self._lost[1]) if self._lost else (0, row["ts"])
                self._lost = (n + 1, first, row["ts"], str(e))
            raise

    def flush(self) -> int:
        """Everything appended so far into the lake; returns the rows written.

        From the copy in memory, under the name a replay of the segment would use: reading the segment back
        (JSON record by record) took 0.66 s for 20,000 decisions, holding the GIL the request path needs;
        building the frame from memory takes 0.05 s."""
        # A segment whose write failed earlier (a full or unwritable lake) is still on disk: replayed first.
        done = self.spool.replay(self.writer)
        rotated = self.spool.rotate()
        if rotated is not None:
            seg, rows = rotated
            name = self.spool.name_of(seg)
            self.writer.write("admission_decisions", frame_from_rows("admission_decisions", rows), name)
            self.spool.discard(seg)
            done += len(rows)
        self._record_unspooled()
        return done

    def _record_unspooled(self) -> None:
        """One health_events row for the decisions the spool could not take since the last one recorded."""
        with self._lost_lock:
            lost, self._lost = self._lost, None
        if lost is None:
            return
        n, first, last, why = lost
        span = [
            dt.datetime.fromtimestamp(t / 1e6, dt.timezone.utc).isoformat(timespec="seconds") for t in (first, last)
        ]
        detail = f"{n} admission decision(s) from {span[0]} to {span[1]} could not be spooled, not in the audit: {why}"
        event = {
            "ts": last,
            "cluster": self.cluster,
            "node": self.replica,
            "gpu_uuid": None,
            "kind": "audit_unspooled",
            "code": n,
            "detail": detail,
            "source": "enforcer",
        }
        try:
            # Named after the last lost decision's time, so the name is new for each report.
            self.writer.write(
                "health_events", frame_from_rows("health_events", [event]), f"{self.spool.writer}-lost-{last}"
            )
        except BaseException:
            with self._lost_lock:  # the lake cannot take it either: merged into the next report
                later = self._lost
                self._lost = lost if later is None else (n + later[0], first, later[2], later[3])
            raise
        log.error("audit: %s", detail)

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
        if not self._open:
            return
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        try:
            self._last_flush()
        finally:
            self.spool.close()
            self._open = False

    def _last_flush(self, waits_s: tuple[float, ...] = (1.0, 2.0, 4.0)) -> None:
        """The flush on the way out. An object store that does not answer (restarting, a partition) gets a few
        more tries within a pod's termination grace period; after them the decisions stay in the local spool, which
        the next start (or a replica that adopts it) writes: one line, not a failed shutdown."""
        for wait_s in (*waits_s, None):
            try:
                self.flush()
                return
            except StoreUnreachable as e:
                if wait_s is None:
                    log.error("audit: %s; the decisions stay in %s until a start writes them", e, self.spool.dir)
                    return
                time.sleep(wait_s)
