"""Merge the many small files of closed partitions into one, crash-safely.

A partition is closed when its date is older than `grace_days` (UTC): no spool flush will add to it.
Each merge is journaled: `_compact.json` (inputs, output) is written first, then the merged file, then the
inputs are deleted, then the journal. A crash at any point is finished by `recover()` (run before every
compaction): if the output exists, the inputs are deleted; otherwise the journal is dropped and the inputs
stay. Readers glob `*.parquet` only, so they never see the journal or a temp file.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from gpuledger import schema
from gpuledger.atomic import fsync_dir, write_atomic, write_bytes_atomic
from gpuledger.lake import COMPRESSION

JOURNAL = "_compact.json"


@dataclass
class CompactionReport:
    partitions: int = 0
    files_in: int = 0
    files_out: int = 0
    rows: int = 0
    recovered: int = 0


def _finish(journal: Path) -> bool:
    spec = json.loads(journal.read_text())
    d = journal.parent
    if (d / spec["output"]).exists():
        for name in spec["inputs"]:
            if name != spec["output"]:
                (d / name).unlink(missing_ok=True)
    journal.unlink()
    fsync_dir(d)
    return True


def recover(root: Path | str) -> int:
    journals = [*Path(root).glob(f"*/date=*/node=*/{JOURNAL}"), *Path(root).glob(f"*/date=*/{JOURNAL}")]
    return sum(_finish(j) for j in journals)


def compact(root: Path | str, today: dt.date | None = None, grace_days: int = 1) -> CompactionReport:
    root = Path(root)
    today = today or dt.datetime.now(dt.timezone.utc).date()
    report = CompactionReport(recovered=recover(root))
    for name, t in schema.TABLES.items():
        for part in sorted(root.glob(f"{name}/date=*/node=*" if t.node_in_path else f"{name}/date=*")):
            date = dt.date.fromisoformat((part.parent if t.node_in_path else part).name[5:])
            if date > today - dt.timedelta(days=grace_days):
                continue  # still open: a flush may add to it
            files = sorted(part.glob("*.parquet"))
            if len(files) < 2:
                continue
            inputs = [f.name for f in files]
            output = "part-c" + hashlib.sha1("\n".join(inputs).encode()).hexdigest()[:16] + ".parquet"
            write_bytes_atomic(part / JOURNAL, json.dumps({"inputs": inputs, "output": output}).encode())
            df = pl.concat([_read(f, t) for f in files]).sort(t.time_column, maintain_order=True)
            write_atomic(
                part / output, lambda tmp, df=df: df.write_parquet(tmp, compression=COMPRESSION, statistics=True)
            )
            _finish(part / JOURNAL)
            report.partitions += 1
            report.files_in += len(files)
            report.files_out += 1
            report.rows += df.height
    return report


def _read(path: Path, t: schema.Table) -> pl.DataFrame:
    """Read one file into the current file schema (older files may lack newer nullable columns)."""
    df = pl.read_parquet(path)
    return df.select(
        [
            pl.col(c).cast(dtype) if c in df.columns else pl.lit(None, dtype=dtype).alias(c)
            for c, dtype in t.file_schema.items()
        ]
    )
