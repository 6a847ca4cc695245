"""The one interface to a lake's bytes. Every stage reads and writes the lake through a Store and never asks which
kind it has: a folder on this machine (LocalStore) or a prefix of an S3 bucket (S3Store). Only `open_store` (and
the config check of a lake's location) tells the two apart.

Keys are POSIX paths relative to the lake's root (`gpu_samples/date=2026-12-01/part-a.parquet`). What differs
between the kinds, and each kind's answer:
- how a file appears whole: a temp file renamed and fsynced; one PUT of the final key;
- how a file is never overwritten by another writer: the same name's bytes compared; If-None-Match;
- how a reader is kept from a file replaced or removed under it: a readers-writer flock; objects that are never
  replaced in place, and a compaction's inputs deleted only well after their merged object;
- how two rewriters take turns (an analytics run, a compaction): flock; a lease object;
- where the analytics' state lives between runs: in the lake's folder; a local copy committed as a snapshot.
"""

from __future__ import annotations

import abc
import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from gpuledger.errors import LakeError

# What a listing says of each file: its stamp (mtime in ns on disk, ETag in an object store) and its size. Either
# changes when the file is written again: the analytics' "has this file changed since the last run".
Stamp = tuple[str | int, int]
RUNS = "_state/runs"  # put_run's records: one per kind of run


class StoreUnreachable(LakeError):
    """The store did not answer: may pass by itself (a store restarting, a network partition), unlike bad
    credentials, a missing bucket or a refused write."""


@dataclass(frozen=True)
class Merge:
    """One compaction of one day folder: `inputs` (names in `folder`) become `output` (a name in `folder`)."""

    folder: str
    inputs: tuple[str, ...]
    output: str


class Staging(abc.ABC):
    """A two-phase write for writers in other processes (Dask workers): each worker stages its files and returns
    picklable handles; the client publishes a chunk's handles once every task of it succeeded. Nothing staged is
    seen by a reader before `publish`."""

    @abc.abstractmethod
    def probe(self, token: str) -> str:
        """Write `token` where the workers can read it; returns the lake string the workers read it from (a
        worker that reads another token, or none, does not see this lake)."""

    def check(self) -> None:
        """On a worker, before it computes: ClusterError when it cannot stage here (it does not see the lake)."""
        return None  # a store every worker reaches by its own settings (an object store) has nothing to check

    @abc.abstractmethod
    def stage(self, key: str, frame: pl.DataFrame) -> object:
        """On a worker: `frame` as Parquet for `key`, not yet visible; a picklable handle for publish."""

    @abc.abstractmethod
    def publish(self, handles: list) -> None:
        """On the client: make the staged files visible, each whole."""

    @abc.abstractmethod
    def clean(self) -> None:
        """On the client: drop what was staged and not published (a failed chunk's, the probe)."""


class Store(abc.ABC):
    """A lake's bytes. LakeError (StoreUnreachable where it may pass) names the lake and the operation on failure."""

    #: what polars' readers and writers take for this store's URLs (None on disk)
    storage_options: dict | None = None

    # -- naming ------------------------------------------------------------------------------------------------
    @abc.abstractmethod
    def __str__(self) -> str:
        """The lake as a person gives it: an absolute folder, or s3://bucket/prefix."""

    @abc.abstractmethod
    def url(self, key: str = "") -> str:
        """What polars opens for `key` (a path, or an s3:// URL), and what messages name."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Store) and type(other) is type(self) and str(other) == str(self)

    def __hash__(self) -> int:
        return hash((type(self).__name__, str(self)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"

    @property
    def folder(self) -> Path | None:
        """The folder holding the lake's files when a reader may open them as files on this machine (DuckDB's
        globs in the sql/ views); None when only the Store reads them."""
        return None

    def views_script_notes(self) -> list[str]:
        """SQL comment lines for `gpuledger views`: what an analyst's own DuckDB session needs to read this lake."""
        return []

    # -- checks ------------------------------------------------------------------------------------------------
    @abc.abstractmethod
    def require(self) -> None:
        """LakeError unless this holds a lake (or an empty one): for readers, so a mistyped lake is not 0 rows."""

    @abc.abstractmethod
    def prepare_writer(self, probe_name: str) -> None:
        """Make the lake ready for a writer and check it can write (LakeError naming what is wrong)."""

    # -- listing and bytes -------------------------------------------------------------------------------------
    @abc.abstractmethod
    def files(self, folder: str, pattern: str) -> dict[str, Stamp]:
        """{key: stamp} of the files under `folder` whose path below it matches `pattern` segment by segment
        (`date=*/*.parquet`), in key order: the files a reader reads now (a compaction's retired inputs left out)."""

    def has_files(self, folder: str, pattern: str) -> bool:
        return bool(self.files(folder, pattern))

    @abc.abstractmethod
    def get(self, key: str) -> bytes | None:
        """The file's bytes, or None when there is none."""

    @abc.abstractmethod
    def put(self, key: str, data: bytes) -> None:
        """Create or replace `key` whole (a reader sees the old bytes or the new). For keys one writer owns."""

    @abc.abstractmethod
    def put_new(self, key: str, data: bytes) -> None:
        """Create `key` unless it exists. The same bytes there already are this write done before (a flush retried
        after a crash): done. Other bytes are another writer's: LakeError, never an overwrite."""

    @abc.abstractmethod
    def put_many(self, items: list[tuple[str, bytes]], workers: int = 8) -> None:
        """put() of each, several at a time, made durable together."""

    def put_frames(self, items: list[tuple[str, pl.DataFrame]], workers: int = 8) -> None:
        """put_many() of each frame as a Parquet file (the lake's compression, page checksums, statistics)."""
        self.put_many([(key, parquet_bytes(frame)) for key, frame in items], workers)

    def put_new_frame(self, key: str, frame: pl.DataFrame) -> None:
        self.put_new(key, parquet_bytes(frame))

    @abc.abstractmethod
    def delete(self, keys: list[str]) -> None:
        """Remove these keys; one already gone is fine. Never from under a reader (see reading())."""

    @abc.abstractmethod
    def set_aside(self, key: str) -> str:
        """Move `key` under `_quarantine/` (outside every table's glob, so no reader reads it again) and return its
        new key. The same key set aside twice keeps the first copy."""

    def set_aside_counts(self) -> dict[str, int]:
        """{table: files} under `_quarantine/` now: what the collector's /metrics reports (a listing, no read)."""
        out: dict[str, int] = {}
        for key in self.files(QUARANTINE, "*/date=*/*.parquet"):
            table = key.split("/")[1]
            out[table] = out.get(table, 0) + 1
        return out

    @abc.abstractmethod
    def version(self, key: str) -> tuple:
        """Something that changes whenever `key` is written again; () when it does not exist."""

    # -- exclusion ---------------------------------------------------------------------------------------------
    @abc.abstractmethod
    def reading(self) -> contextlib.AbstractContextManager[None]:
        """Held for the whole of a read (list, bind, read): no file it listed is replaced or removed meanwhile."""

    @abc.abstractmethod
    def rewriting(self, lease_s: float) -> contextlib.AbstractContextManager[None]:
        """Held by an analytics run or a compaction: one rewriter of the lake at a time. LakeError naming the holder
        when another holds it and cannot be waited for (a lease)."""

    @abc.abstractmethod
    def state(self, what: str, lease_s: float) -> contextlib.AbstractContextManager[Path]:
        """A local folder holding the state `what` (e.g. "analytics") between runs, while holding rewriting(): its
        changes are kept when the block ends without an error."""

    @abc.abstractmethod
    def state_folder(self, what: str) -> Path:
        """Where state() keeps `what` on this machine (readers of the last committed state look there)."""

    def put_run(self, what: str, started_at: float, finished_at: float | None = None, ok: bool | None = None) -> None:
        """Say that a run of `what` (e.g. "analytics") started, or ended: one small JSON file, replaced whole
        (`_state/runs/<what>.json`, outside the state folder, so writing it is no new state for the dashboards'
        snapshot). Read by `last_run`: a dashboard shows "the first run started at ..." rather than "run it"."""
        record = {"started_at": started_at, "finished_at": finished_at, "ok": ok}
        self.put(f"{RUNS}/{what}.json", json.dumps(record).encode())

    def last_run(self, what: str) -> dict | None:
        """The record `put_run` left for `what` ({"started_at", "finished_at", "ok"}, Unix seconds; finished_at
        None while it runs, or after a run that was killed), or None when no run ever started (or it is unreadable).
        """
        raw = self.get(f"{RUNS}/{what}.json")
        try:
            record = json.loads(raw) if raw else None
        except ValueError:
            return None
        return record if isinstance(record, dict) and isinstance(record.get("started_at"), int | float) else None

    @abc.abstractmethod
    def state_version(self, what: str) -> tuple:
        """Changes whenever a run commits the state `what`; () before the first."""

    @abc.abstractmethod
    def machine_folder(self, what: str, environ: Mapping[str, str] | None = None) -> Path:
        """A folder on this machine's disk for this lake's `what` (a spool, a state copy), one per lake: under the
        state folder (`$XDG_STATE_HOME`, else ~/.local/state; /var/lib/gpuledger in deploy/), outside the lake."""

    # -- compaction and other writers ----------------------------------------------------------------------------
    @abc.abstractmethod
    def merge(self, merge: Merge, rows: list[pl.LazyFrame]) -> bool:
        """Replace the day's inputs by `output` holding `rows` (parts written in order), crash-safely: a reader
        sees the inputs or the output, never both nor neither. False when another compactor did this merge already."""

    @abc.abstractmethod
    def finish_merges(self) -> tuple[int, int]:
        """Finish what earlier merges left: (merges a crash cut short, now finished; merged inputs retired now)."""

    @abc.abstractmethod
    def staging(self, run_id: str) -> Staging:
        """A two-phase write for this run (Staging)."""

    @abc.abstractmethod
    def errors(self, doing: str = "reading or writing") -> contextlib.AbstractContextManager[None]:
        """A failure of the store surfacing from inside a library during the block (polars' scan, a sink) as one
        LakeError line naming the store and `doing`; anything else stays what it is."""


COMPRESSION = "zstd"
QUARANTINE = "_quarantine"  # where Store.set_aside moves a file: outside every table's glob
# Every data page carries a CRC32 of its bytes (Parquet's page checksum), written by pyarrow: polars' own writer
# writes none, and a flipped bit in a zstd page that still decompresses reads back as another value with no error
# (40 of 40 single-bit flips in a polars-written file read back silently; with checksums pyarrow refused all 40:
# benchmarks/parquet_checksums.py). Readers that can verify them do (gpuledger.lake.verify_file).
_PYARROW = {"write_page_checksum": True}
MERGE_BATCH_ROWS = 1 << 20  # a merged day is written this many rows at a time: memory bounded by a batch


def _dictionary_columns(schema: pl.Schema) -> list[str]:
    """The columns written dictionary-encoded: all but numbers. pyarrow's default encodes every column so, and a
    float with no repeats gains nothing from it: a day of 10,000 GPUs' gpu_5min rows wrote in 374 against 303 ms and
    10.0 against 9.6 MB, a flush of samples in 271 against 199 ms and 8.8 against 8.0 MB
    (benchmarks/RESULTS.md, "The run after one new hour under 5 s")."""
    return [c for c, dtype in schema.items() if not dtype.is_numeric()]


def write_parquet(frame: pl.DataFrame, dest) -> None:
    """The lake's one Parquet encoding: zstd, statistics, page checksums, dictionaries for all but numbers."""
    options = {**_PYARROW, "use_dictionary": _dictionary_columns(frame.schema)}
    frame.write_parquet(dest, compression=COMPRESSION, statistics=True, use_pyarrow=True, pyarrow_options=options)


def parquet_bytes(frame: pl.DataFrame) -> bytes:
    import io

    buf = io.BytesIO()
    write_parquet(frame, buf)
    return buf.getvalue()


def write_stream(parts: list[pl.LazyFrame], dest) -> int:
    """`parts` written one after the other to `dest` (a path or a writable file) in the lake's encoding, a batch at
    a time (a day of a 1,000-GPU fleet at 10 s is 8.6M samples: never held whole), each part in row groups of its
    own (a merged day's hours: gpuledger.day_layout). Returns the rows written."""
    import pyarrow.parquet as pq

    polars_schema = parts[0].collect_schema()
    schema = pl.DataFrame(schema=polars_schema).to_arrow().schema
    n = 0
    dictionary = _dictionary_columns(polars_schema)
    with pq.ParquetWriter(dest, schema, compression=COMPRESSION, use_dictionary=dictionary, **_PYARROW) as w:
        for part in parts:
            for batch in part.collect_batches(chunk_size=MERGE_BATCH_ROWS):
                w.write_table(batch.to_arrow().cast(schema))
                n += batch.height
    return n
