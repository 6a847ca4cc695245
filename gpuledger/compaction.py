"""Merge the many small files of a closed day into one, crash-safely.

A day is closed when its date is older than `grace_days` (UTC): no spool flush will add to it (a late flush
that does is merged by the next compaction). Each merge is journaled: `_compact.json` (inputs, output) is written
first, then the merged file, then the inputs are deleted, then the journal. A crash at any point is finished by
`recover()` (run before every compaction): if the output exists, the inputs are deleted; otherwise the journal
is dropped and the inputs stay. Readers glob `date=*/*.parquet` only, so they never see the journal or a temp
file; the merged file's rename and its inputs' removal happen under the lake's publishing lock, so a query sees
the inputs or the merged file, never both nor a removed one.

Files of the earlier layout (`date=/node=<node>/`, the node in the path only) are merged into their day
whatever its age, with their node written into the rows: after one `compact` the lake has one layout.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from gpuledger import compaction_s3, lake_url, schema
from gpuledger.atomic import fsync_dir, publish, stage, write_bytes_atomic
from gpuledger.lake import COMPRESSION
from gpuledger.lake_lock import publishing, rewriting

JOURNAL = "_compact.json"
_LEGACY_NO_NODE = "_none"  # the earlier layout's folder for rows about no node


@dataclass
class CompactionReport:
    partitions: int = 0
    files_in: int = 0
    files_out: int = 0
    rows: int = 0
    recovered: int = 0  # interrupted compactions finished
    retired: int = 0  # object store: earlier merges whose inputs were deleted now (compaction_s3.KEEP_INPUTS_S)


def _finish(journal: Path) -> bool:
    spec = json.loads(journal.read_text())
    d = journal.parent
    if (d / spec["output"]).exists():
        for name in spec["inputs"]:
            if name != spec["output"]:
                (d / name).unlink(missing_ok=True)
        for sub in {Path(name).parent for name in spec["inputs"]} - {Path(".")}:
            if (d / sub).is_dir() and not any((d / sub).iterdir()):
                (d / sub).rmdir()  # an emptied legacy node= folder
    journal.unlink()
    fsync_dir(d)
    return True


def recover(root: Path | str) -> int:
    journals = [*Path(root).glob(f"*/date=*/node=*/{JOURNAL}"), *Path(root).glob(f"*/date=*/{JOURNAL}")]
    if not journals:
        return 0
    with publishing(root):  # it removes inputs a query may have listed
        return sum(_finish(j) for j in journals)


def compact(root: Path | str, today: dt.date | None = None, grace_days: int = 1) -> CompactionReport:
    if isinstance(loc := lake_url.parse(root), lake_url.S3Location):  # no lock there: gpuledger/compaction_s3.py
        report = CompactionReport()
        compaction_s3.compact(loc, today or dt.datetime.now(dt.timezone.utc).date(), grace_days, report)
        return report
    with rewriting(root):  # an analytics run reads the files this removes: one at a time (gpuledger.lake_lock)
        return _compact(Path(root), today, grace_days)


def _compact(root: Path, today: dt.date | None, grace_days: int) -> CompactionReport:
    today = today or dt.datetime.now(dt.timezone.utc).date()
    report = CompactionReport(recovered=recover(root))
    for name, t in schema.TABLES.items():
        for day in sorted(root.glob(f"{name}/date=*")):
            date = dt.date.fromisoformat(day.name[5:])
            legacy = sorted(day.glob("node=*/*.parquet"))
            if date > today - dt.timedelta(days=grace_days) and not legacy:
                continue  # still open: a flush may add to it
            files = sorted(day.glob("*.parquet"))
            if len(files) + len(legacy) < 2 and not legacy:
                continue
            inputs = [str(f.relative_to(day)) for f in [*files, *legacy]]
            output = "part-c" + hashlib.sha1("\n".join(inputs).encode()).hexdigest()[:16] + ".parquet"
            write_bytes_atomic(day / JOURNAL, json.dumps({"inputs": inputs, "output": output}).encode())
            merged = pl.concat([*(_scan(f, t) for f in files), *(_scan(f, t, f.parent.name[5:]) for f in legacy)])
            # Streamed, file after file (each sorted by time): a day of a 1,000-GPU fleet at 10 s is 8.6M samples,
            # and sorting them as one frame took 5 GB (benchmarks/simulate.py).
            tmp = stage(
                day / output, lambda tmp, lf=merged: lf.sink_parquet(tmp, compression=COMPRESSION, statistics=True)
            )
            # The merged file and the removal of its inputs as one step for readers: between the two, a query
            # would read every row twice (gpuledger.lake_lock).
            with publishing(root):
                publish(tmp, day / output)
                _finish(day / JOURNAL)
            report.partitions += 1
            report.files_in += len(inputs)
            report.files_out += 1
            report.rows += pl.scan_parquet(day / output).select(pl.len()).collect().item()
    return report


def _scan(path: Path, t: schema.Table, legacy_node: str | None = None) -> pl.LazyFrame:
    """One file in the current file schema (older files may lack newer nullable columns, legacy ones the node)."""
    lf = pl.scan_parquet(path)
    have = lf.collect_schema()
    if legacy_node is not None:
        have["node"] = pl.String
        lf = lf.with_columns(pl.lit(None if legacy_node == _LEGACY_NO_NODE else legacy_node, pl.String).alias("node"))
    return lf.select(
        [
            pl.col(c).cast(dtype) if c in have else pl.lit(None, dtype=dtype).alias(c)
            for c, dtype in t.file_schema.items()
        ]
    )
