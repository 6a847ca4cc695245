"""The enforcer's two ties to the lake, both off the request path: loading the decision table, writing the audit."""

from __future__ import annotations

import logging
import queue
import threading
import time
from pathlib import Path

import polars as pl

from enforcer.decide import Table
from enforcer.policies import IdleHold, TenantRow
from gpuledger.lake import LakeWriter, frame_from_rows, has_data, scan

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
            idle_gpus_now=r["idle_gpus_now"] or 0.0,
            fairshare=r["fairshare"],
        )
    at = latest["computed_at"][0]
    idle: dict[str, list[IdleHold]] = {}
    if has_data(lake, "idle_holds"):
        # The same run's rows only: an idle_holds left by an older run would name jobs that since woke up.
        holds = scan(lake, "idle_holds").filter(pl.col("computed_at") == at).collect()
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
    """Appends decisions to admission_decisions from a queue, every `every_s`, on its own thread."""

    def __init__(self, lake: Path, replica: str, cluster: str, every_s: float = 1.0):
        self.writer = LakeWriter(lake)
        self.replica, self.cluster, self.every_s = replica, cluster, every_s
        self.q: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._seq = 0
        self._thread = threading.Thread(target=self._run, daemon=True, name="audit")

    def start(self) -> None:
        self._thread.start()

    def put(self, row: dict) -> None:
        self.q.put(row)

    def flush(self) -> int:
        rows = []
        while True:
            try:
                rows.append(self.q.get_nowait())
            except queue.Empty:
                break
        if rows:
            self._seq += 1
            name = f"webhook-{self.replica}-{time.time_ns()}-{self._seq}"
            self.writer.write("admission_decisions", frame_from_rows("admission_decisions", rows), name)
        return len(rows)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.flush()
            except Exception:  # keep serving; the rows stay lost only if the lake stays unwritable
                log.exception("audit: could not append decisions to the lake")

    def close(self) -> None:
        self._stop.set()
        self.flush()
