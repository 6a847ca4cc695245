"""The generic jobs file: one job per row, CSV or Parquet (by extension), imported into the `jobs` table.

The format is documented in docs/imports.md. The whole file is read and every row validated before anything
is written; good rows are then written in one `LakeWriter.write` under a name derived from the file's content
(and the cluster), so importing the same file twice rewrites the same lake files instead of adding rows.
"""

from __future__ import annotations

import datetime as dt
import io
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.analytics.imports import EPOCH, ImportFileError, ImportReport, content_key, csv_records, to_us
from gpuledger.config import Config
from gpuledger.errors import LakeError
from gpuledger.lake import LakeWriter, check_name, frame_from_rows
from gpuledger.schema import JOB_STATUSES, JOBS

# A jobs file holds the `jobs` table's columns (gpuledger/schema.py), in its order, less those the import sets itself
# (when the row was observed, the cluster, the source, gpu_sharing from gpus, the partition date) and those only a
# live cluster knows (the pod, its MIG profile, start, reason, GPUs bound, owner and workload class: an imported row's
# class is null until the import learns to take and check one).
NOT_IN_FILE = (
    "updated_at",
    "cluster",
    "source",
    "gpu_sharing",
    "date",
    "pod",
    "mig_profile",
    "started_at",
    "reason",
    "gpu_uuids",
    "owner_kind",
    "owner_name",
    "workload_class",
)
COLUMNS = tuple(c for c in JOBS.column_names if c not in NOT_IN_FILE)
REQUIRED = ("job_id", "gpus", "submitted_at", "status")
STATUSES = JOB_STATUSES
_TEXT = tuple(c for c in COLUMNS if JOBS.polars_schema[c] == pl.String and c != "status")
_UTC_OFFSET = dt.timedelta(0)


class _Bad(Exception):
    """One row's problem; becomes a rejection with the row's line."""


def import_jobs_file(path: str | Path, lake: str | Path, cfg: Config) -> ImportReport:
    """Validate every row of a jobs file (.csv or .parquet), then write the good ones to the `jobs` table.

    Returns an ImportReport (bad rows are rejected with file, line and reason, never written).
    Raises ImportFileError when the file cannot be imported at all: unreadable, not CSV/Parquet, unknown or
    missing required columns. Raises LakeError when the lake cannot be written.
    """
    started = time.perf_counter()
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ImportFileError(path, None, f"cannot read: {e.strerror or e}") from e
    suffix = path.suffix.lower()
    if suffix == ".csv":
        columns, records = csv_records(path, data)
    elif suffix in (".parquet", ".pq"):
        columns, records = _parquet_records(path, data)
    else:
        raise ImportFileError(path, None, f"unknown file type {suffix or '(none)'!r}: expected .csv or .parquet")
    header_line = 1 if suffix == ".csv" else None
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown:
        raise ImportFileError(
            path,
            header_line,
            f"unknown column(s) {', '.join(c or '(unnamed)' for c in unknown)} (allowed: {', '.join(COLUMNS)})",
        )
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise ImportFileError(path, header_line, f"missing required column(s) {', '.join(missing)}")

    report = ImportReport(source=str(path))
    tenant_of = cfg.tenant_of_namespace()
    first_line: dict[str, int] = {}
    rows: list[dict] = []
    for line, record in records:
        report.rows_read += 1
        try:
            if isinstance(record, str):
                raise _Bad(record)
            row = _row(record, tenant_of, cfg.cluster)
            if row["job_id"] in first_line:
                raise _Bad(f"duplicate job_id {row['job_id']!r} (first on line {first_line[row['job_id']]})")
        except _Bad as e:
            report.reject(path, line, str(e))
            job_id = record.get("job_id") if isinstance(record, dict) else None
            if job_id not in (None, "") and str(job_id).strip() not in first_line:
                # A bad first row still claims its job_id: a later row with the same id is ambiguous too.
                first_line[str(job_id).strip()] = line
            continue
        first_line[row["job_id"]] = line
        rows.append(row)

    if rows:
        name = "import-" + content_key(data, cfg.cluster)
        writer = LakeWriter(lake)
        writer.init()
        report.files = writer.write("jobs", frame_from_rows("jobs", rows), name)
    report.rows_imported = len(rows)
    report.seconds = time.perf_counter() - started
    return report


def _parquet_records(path: Path, data: bytes) -> tuple[list[str], Iterator[tuple[int, dict | str]]]:
    try:
        df = pl.read_parquet(io.BytesIO(data))
    except (pl.exceptions.PolarsError, OSError) as e:
        raise ImportFileError(path, None, f"not a readable Parquet file: {e}") from e
    return df.columns, ((i, r) for i, r in enumerate(df.iter_rows(named=True), start=1))


def _text(record: dict, name: str) -> str | None:
    v = record.get(name)
    if v is None:
        return None
    s = str(v).strip()
    return s or None


def _gpus(record: dict) -> float:
    v = record.get("gpus")
    if isinstance(v, str):
        v = v.strip()
    if v is None or v == "":
        raise _Bad("missing value for required column gpus")
    if isinstance(v, bool):
        raise _Bad(f"gpus {v!r} is not a number")
    try:
        g = float(v)
    except (TypeError, ValueError):
        raise _Bad(f"gpus {v!r} is not a number") from None
    if not math.isfinite(g):
        raise _Bad(f"gpus {v!r} is not a finite number")
    if g < 0:
        raise _Bad(f"gpus {v!r} is negative")
    return g


def _time(record: dict, name: str) -> int | None:
    """Microseconds since the epoch, UTC, or None when empty. Only explicit UTC is accepted."""
    v: Any = record.get(name)
    if isinstance(v, str):
        v = v.strip()
        if not v:
            return None
        try:
            t = dt.datetime.fromisoformat(v)
        except ValueError:
            raise _Bad(f"{name} {v!r} is not an ISO-8601 time") from None
    elif v is None:
        return None
    elif isinstance(v, dt.datetime):
        t = v
    else:
        raise _Bad(f"{name} {v!r} is not a time (expected an ISO-8601 string or a timestamp with a time zone)")
    if t.tzinfo is None or t.utcoffset() is None:
        # A naive time is ambiguous (local or UTC?); guessing would shift every job silently.
        raise _Bad(f"{name} {v!r} has no time zone: write UTC times with Z or +00:00")
    if t.utcoffset() != _UTC_OFFSET and isinstance(v, str):
        raise _Bad(f"{name} {v!r} is not UTC: write UTC times with Z or +00:00")
    return to_us(t)


def _iso(us: int) -> str:
    return (EPOCH + dt.timedelta(microseconds=us)).isoformat()


def _row(record: dict, tenant_of: dict[str, str], cluster: str) -> dict:
    """One validated `jobs` row from one record, or _Bad naming the first problem found."""
    text = {c: _text(record, c) for c in _TEXT}
    if text["job_id"] is None:
        raise _Bad("missing value for required column job_id")
    status = _text(record, "status")
    if status is None:
        raise _Bad("missing value for required column status")
    if status.lower() not in STATUSES:
        raise _Bad(f"unknown status {status!r} (allowed: {', '.join(STATUSES)})")
    gpus = _gpus(record)
    submitted = _time(record, "submitted_at")
    if submitted is None:
        raise _Bad("missing value for required column submitted_at")
    scheduled = _time(record, "scheduled_at")
    finished = _time(record, "finished_at")
    if scheduled is not None and scheduled < submitted:
        raise _Bad(f"scheduled_at {_iso(scheduled)} is before submitted_at {_iso(submitted)}")
    if finished is not None and scheduled is not None and finished < scheduled:
        raise _Bad(f"finished_at {_iso(finished)} is before scheduled_at {_iso(scheduled)}")
    if finished is not None and finished < submitted:
        raise _Bad(f"finished_at {_iso(finished)} is before submitted_at {_iso(submitted)}")
    if text["node"] is not None:
        try:
            check_name("node", text["node"])  # it becomes a lake path segment; refuse it here, not mid-write
        except LakeError as e:
            raise _Bad(str(e)) from None
    return {
        "updated_at": finished if finished is not None else scheduled if scheduled is not None else submitted,
        "cluster": cluster,
        "job_id": text["job_id"],
        "tenant": text["tenant"] or tenant_of.get(text["namespace"] or ""),
        "namespace": text["namespace"],
        "queue": text["queue"],
        "gpu_model": text["gpu_model"],
        "gpus": gpus,
        # A zero-GPU job shares nothing; "fraction" would count it among shared-GPU jobs.
        "gpu_sharing": "exclusive" if gpus >= 1 else "fraction" if gpus > 0 else None,
        "submitted_at": submitted,
        "scheduled_at": scheduled,
        "finished_at": finished,
        "status": status.lower(),
        "node": text["node"],
        "source": "import",
    }
