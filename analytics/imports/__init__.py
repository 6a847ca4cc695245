"""imports: job data from outside gpuledger (a jobs file, public cluster traces) written into the lake.

One entry function per format, each `import_<format>(path, lake, cfg, ...) -> ImportReport`:
`jobs_file.import_jobs_file` (the documented generic CSV/Parquet format), `alibaba2023.import_alibaba_2023`
(the Alibaba "openb" GPU trace, placed onto its nodes) and `alibaba2025.import_alibaba_2025` (the Alibaba DLRM
serving trace). docs/imports.md documents each.

Every import validates its whole input before it writes anything, rejects bad rows with file, line and reason,
and names its lake files after the content it read, so importing the same input twice writes the same files.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from gpuledger.errors import GpuledgerError

MAX_REJECTIONS = 20  # kept in the report with their line; the rest are only counted
UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


class ImportFileError(GpuledgerError):
    """An input cannot be imported at all (unreadable, unknown or missing columns); names file, line, reason."""

    title = "import error"

    def __init__(self, file: str | Path, line: int | None, reason: str):
        self.file = str(file)
        self.line = line
        self.reason = reason
        where = f"{self.file}:{line}" if line is not None else self.file
        super().__init__(f"{where}: {reason}")


@dataclass(frozen=True)
class Rejection:
    """One input row that was not imported. `line` is 1-based (a CSV header is line 1; a Parquet row number)."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass
class ImportReport:
    """What one import read, wrote and refused."""

    source: str  # the file or directory imported
    rows_read: int = 0  # data rows in the input (headers and blank lines excluded)
    rows_imported: int = 0  # rows written to the jobs table
    rows_rejected: int = 0  # rows refused as invalid
    rejections: list[Rejection] = field(default_factory=list)  # the first MAX_REJECTIONS of them
    rows_skipped: int = 0  # valid rows deliberately not imported (e.g. CPU-only pods of a GPU trace)
    skipped: dict[str, int] = field(default_factory=dict)  # why -> how many
    nodes_imported: int = 0  # rows written to the nodes table
    unplaced: int = 0  # scheduled jobs a placement replay could not put on any node (node left null)
    files: list[Path] = field(default_factory=list)  # lake files written
    seconds: float = 0.0

    def reject(self, file: str | Path, line: int, reason: str) -> None:
        self.rows_rejected += 1
        if len(self.rejections) < MAX_REJECTIONS:
            self.rejections.append(Rejection(str(file), line, reason))

    def skip(self, why: str) -> None:
        self.rows_skipped += 1
        self.skipped[why] = self.skipped.get(why, 0) + 1

    def summary(self) -> list[str]:
        """Human-readable lines for the CLI: the counts, then each kept rejection."""
        lines = [
            f"{self.source}: read {self.rows_read} rows, imported {self.rows_imported}, "
            f"rejected {self.rows_rejected}, skipped {self.rows_skipped} ({self.seconds:.2f} s)"
        ]
        lines += [f"  skipped {n}: {why}" for why, n in self.skipped.items()]
        if self.nodes_imported:
            lines.append(f"  nodes imported: {self.nodes_imported}")
        if self.unplaced:
            lines.append(f"  scheduled jobs no node could hold (node left empty): {self.unplaced}")
        lines += [f"  {r}" for r in self.rejections]
        if self.rows_rejected > len(self.rejections):
            lines.append(f"  ... and {self.rows_rejected - len(self.rejections)} more rejected rows")
        return lines


def content_key(*parts: bytes | str) -> str:
    """16 hex digits naming everything an import's output depends on, so a re-import rewrites the same files."""
    h = hashlib.sha256()
    for p in parts:
        b = p.encode() if isinstance(p, str) else p
        h.update(len(b).to_bytes(8, "big"))  # length-prefixed so ("ab", "c") and ("a", "bc") differ
        h.update(b)
    return h.hexdigest()[:16]


def to_us(t: dt.datetime) -> int:
    """Microseconds since the epoch of an aware datetime, exactly (no float rounding)."""
    return (t - EPOCH) // dt.timedelta(microseconds=1)


def csv_records(path: Path, data: bytes) -> tuple[list[str], Iterator[tuple[int, dict | str]]]:
    """The header's column names, and (line, {column: text}) per row, or (line, reason) for a malformed row.

    Lines are 1-based with the header on line 1; a row is reported at the line it starts on. Raises
    ImportFileError for a file that is not UTF-8 CSV with a header.
    """
    try:
        text = data.decode("utf-8-sig")  # a BOM from spreadsheet exports would otherwise glue onto "job_id"
    except UnicodeDecodeError as e:
        raise ImportFileError(path, None, f"not UTF-8 text ({e.reason} at byte {e.start})") from e
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
    except csv.Error as e:
        raise ImportFileError(path, 1, f"not valid CSV: {e}") from e
    if not header or not any(h.strip() for h in header):
        raise ImportFileError(path, 1, "empty header: the first line must name the columns")
    columns = [h.strip() for h in header]
    twice = sorted({c for c in columns if columns.count(c) > 1})
    if twice:
        raise ImportFileError(path, 1, f"column(s) named twice: {', '.join(twice)}")

    def records() -> Iterator[tuple[int, dict | str]]:
        end = reader.line_num
        while True:
            start = end + 1  # a quoted field may span lines: a row is reported at the line it starts on
            try:
                values = next(reader, None)
            except csv.Error as e:
                raise ImportFileError(path, start, f"not valid CSV: {e}") from e
            end = reader.line_num
            if values is None:
                return
            if not values:
                continue  # a blank line holds no row
            if len(values) != len(columns):
                yield start, f"expected {len(columns)} fields, got {len(values)}"
            else:
                yield start, dict(zip(columns, values, strict=True))

    return columns, records()
