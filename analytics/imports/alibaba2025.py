"""The Alibaba GPU-disaggregated DLRM serving trace (alibaba/clusterdata cluster-trace-gpu-v2025, NSDI '25).

One file, `disaggregated_DLRM_trace.csv`: one row per serving instance of one of 156 apps, on a GPU node
(role HN, one GPU) or a CPU node (role CN, no GPU). Times are seconds (with a fractional part) from the start
of a 31-day window; an empty time lies outside the window (created before it began, or still alive when it
ended). The trace names no node and has no node list, so jobs keep node null: nothing to place them on.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import time
from pathlib import Path

from gpuledger.analytics.imports import UTC, ImportFileError, ImportReport, content_key, csv_records, to_us
from gpuledger.config import Config
from gpuledger.errors import UsageError
from gpuledger.lake import LakeWriter, frame_from_rows

TRACE_FILE = "disaggregated_DLRM_trace.csv"
# Second 0 of the window in UTC. Unknown upstream; the start of the trace's publication year, as for openb.
DEFAULT_ORIGIN = dt.datetime(2025, 1, 1, tzinfo=UTC)
COLUMNS = ("instance_sn", "role", "app_name", "gpu_request", "creation_time", "scheduled_time", "deletion_time")
CPU_ONLY = "CPU-node instance (gpu_request 0): not a GPU job"
JOB_ID_PREFIX = "alibaba-2025"
TRACE_ENDED = "TraceEnded"  # reason of an instance still alive at the window's last event


class _Bad(Exception):
    """One row's problem; becomes a rejection with the row's line."""


def import_alibaba_2025(
    directory: str | Path, lake: str | Path, cfg: Config, origin: dt.datetime = DEFAULT_ORIGIN
) -> ImportReport:
    """Import every GPU instance of the DLRM trace in `directory` into the `jobs` table.

    CPU-node instances are skipped and counted; bad rows are rejected with file, line and reason. `app_name`
    becomes the namespace, so `[[tenants]] namespaces` in the config can map apps to tenants.
    Raises UsageError for a naive origin, ImportFileError for a missing file or column, LakeError when the lake
    cannot be written.
    """
    started = time.perf_counter()
    if origin.tzinfo is None or origin.utcoffset() is None:
        raise UsageError(f"origin {origin.isoformat()} has no time zone: give it in UTC, e.g. 2025-01-01T00:00:00Z")
    path = Path(directory) / TRACE_FILE
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ImportFileError(path, None, f"cannot read: {e.strerror or e}") from e
    columns, records = csv_records(path, data)
    missing = [c for c in COLUMNS if c not in columns]
    if missing:
        raise ImportFileError(path, 1, f"missing column(s) {', '.join(missing)}")

    report = ImportReport(source=str(path))
    tenant_of = cfg.tenant_of_namespace()
    origin_us = to_us(origin)
    seen: dict[str, int] = {}
    rows: list[dict] = []
    end_us = 0  # the window's last event (after second 0), over every valid row
    for line, record in records:
        report.rows_read += 1
        try:
            if isinstance(record, str):
                raise _Bad(record)
            row, last_us = _row(record, cfg.cluster, tenant_of, origin_us)
            name = record["instance_sn"].strip()
            if name in seen:
                raise _Bad(f"instance {name!r} listed twice (first on line {seen[name]})")
        except _Bad as e:
            report.reject(path, line, str(e))
            continue
        seen[name] = line
        end_us = max(end_us, last_us)
        if row is None:
            report.skip(CPU_ONLY)
        else:
            rows.append(row)

    for row in rows:
        if row["finished_at"] is None:
            # Alive when the window ended. A trace is history: left open, the instance would hold its GPU up to
            # the analysis time (docs/imports.md). Close it at the window's last event, saying it was still alive.
            row["finished_at"] = row["updated_at"] = origin_us + end_us
            row["reason"] = TRACE_ENDED
    if rows:
        writer = LakeWriter(lake)
        writer.init()
        file_name = f"alibaba2025-{content_key(data, cfg.cluster, origin.isoformat())}"
        report.files = writer.write("jobs", frame_from_rows("jobs", rows), file_name)
    report.rows_imported = len(rows)
    report.seconds = time.perf_counter() - started
    return report


def _seconds(record: dict, name: str) -> int | None:
    """Microseconds after second 0, or None when empty (outside the window)."""
    v = record[name].strip()
    if not v:
        return None
    try:
        s = float(v)
    except ValueError:
        raise _Bad(f"{name} {v!r} is not a number of seconds") from None
    if not math.isfinite(s) or s < 0:
        raise _Bad(f"{name} {v!r} is not a time in the trace window (seconds >= 0)")
    return round(s * 1_000_000)  # the trace writes 1000594.0000000001 for 1000594: keep whole microseconds


def _row(record: dict, cluster: str, tenant_of: dict[str, str], origin_us: int) -> tuple[dict | None, int]:
    """One `jobs` row for a GPU instance (None for a CPU-node instance) and the row's latest time in microseconds
    after second 0 (0 when it has none), or _Bad naming the problem."""
    name = record["instance_sn"].strip()
    if not name:
        raise _Bad("missing value for instance_sn")
    v = record["gpu_request"].strip()
    try:
        gpus = float(v)
    except ValueError:
        raise _Bad(f"gpu_request {v!r} is not a number") from None
    if not math.isfinite(gpus) or gpus < 0:
        raise _Bad(f"gpu_request {v!r} is not a number of GPUs >= 0")
    times = {c: _seconds(record, c) for c in ("creation_time", "scheduled_time", "deletion_time")}
    known = [(c, t) for c, t in times.items() if t is not None]
    for (a, ta), (b, tb) in itertools.pairwise(known):
        if tb < ta:
            raise _Bad(f"{b} {record[b].strip()} is before {a} {record[a].strip()}")
    created, scheduled, deleted = times.values()
    last = max((t for _, t in known), default=0)
    if gpus == 0:
        return None, last
    if deleted is not None:
        # Deleted inside the window: what the k8s source records for a pod deleted before it finished.
        status, reason = "cancelled", "Deleted"
    elif scheduled is not None or created is None:
        status, reason = "running", None  # scheduled in the window, or already running when it began
    else:
        status, reason = "pending", None
    if created is None:
        # Already there when the window began (the trace writes no time from before it): it holds its GPU from
        # second 0 on, the earliest the trace vouches for. Left null, it would hold nothing and have no time to
        # be analysed at. (In the published trace no instance is created at second 0, so 0 tells these apart.)
        created = 0
        scheduled = 0 if scheduled is None else scheduled
    # The latest transition the trace saw; an instance with none was running from second 0 on.
    updated = next((t for t in (deleted, scheduled, created) if t is not None), 0)
    app = record["app_name"].strip() or None

    def us(t: int | None) -> int | None:
        return None if t is None else origin_us + t

    return {
        "updated_at": us(updated),
        "cluster": cluster,
        "job_id": f"{JOB_ID_PREFIX}/{name}",
        "tenant": tenant_of.get(app or ""),
        "namespace": app,
        "pod": name,
        "gpus": gpus,
        "gpu_sharing": "exclusive" if gpus >= 1 else "fraction",
        "submitted_at": us(created),
        "scheduled_at": us(scheduled),
        "finished_at": us(deleted),
        "status": status,
        "reason": reason,
        "node": None,
        "source": "import",
    }, last
