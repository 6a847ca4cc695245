"""The per-node spool: a write-ahead log of scraped batches, fsynced before a scrape counts as done.

File format: segments `seg-<seq>.wal` (seq: 20-digit, increasing across restarts). Each record is
`<length u32><crc32 u32>` followed by `length` bytes of payload, in one of two encodings told apart by its first
byte:
- JSON `{"t": table, "c": {column: [values]}}` (timestamps as integer microseconds since the epoch, UTC);
- Arrow: `\x01`, the table name's length (u8) and name, then an Arrow IPC stream (zstd) of the batch, typed
  by the table's schema.
A batch of ARROW_MIN_ROWS rows or more is written as Arrow, a smaller one as JSON: for one 8-GPU scrape
json.dumps takes ~30 us where the typed frame and IPC write take ~500 us (the spool's whole budget for append +
fsync is 1 ms, benchmarks/spool_append.py); for a central collector's 50,000-row chunk JSON takes ~90 ms and
5.8 MB, Arrow ~25 ms and 0.14 MB. A replay reads both, so segments written before Arrow records existed (all
JSON) replay unchanged.

Recovery rules (kill -9 or power loss):
- an incomplete or bad *last* record is a torn tail: never acknowledged, dropped;
- a bad record followed by a valid one is corruption: every valid record (before and after the damage) is
  kept, the segment is moved to `corrupt/` for inspection and the damage is reported. Nothing is silently
  thrown away.

An append writes all of its bytes or fails: a short write (a full disk, a file-size limit) or a failed sync is
cut off again (the segment truncated back to its last whole record) and raised, so nothing is acknowledged that
is not on disk and no later record lands behind torn bytes.

Where: by default outside the lake, under the state folder (`$XDG_STATE_HOME`, else ~/.local/state; deploy/ sets
/var/lib/gpuledger), one folder per lake and writer (`default_dir`). A spool inside the lake was deleted with it: an
`rm -rf` of the lake under a running collector took its lock too, so a second collector could take the spool and
replay and delete the first one's live segment (24 acknowledged rows lost in the reproduction of issue 22). A spool
left at the former default, `<lake>/_spool/<writer>`, is replayed once by the next start (`legacy_dir`, `adopt`).

One live writer per spool: `lock` takes an flock on `LOCK` (released by the kernel when the process dies, even
by kill -9) and writes the holder's pid and host into it, so a second process can say who holds the spool.

Flushing turns each closed segment into Parquet files named after the segment (`part-<writer>-<seq>`)
and only then deletes it; a crash in between replays the segment into the same file names, so the
lake holds each acknowledged row exactly once.
"""

from __future__ import annotations

import errno
import fcntl
import io
import json
import logging
import os
import socket
import struct
import threading
import time
import zlib
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from gpuledger.atomic import ensure_dir, fsync_dir, write_bytes_atomic
from gpuledger.errors import LakeError, SpoolError
from gpuledger.lake import LakeWriter, check_name, frame_from_columns
from gpuledger.store import LakeRef, open_store

log = logging.getLogger(__name__)

HEADER = struct.Struct("<II")
MAX_RECORD_BYTES = 64 << 20
ARROW_TAG = 0x01  # first payload byte of an Arrow record; a JSON record starts with "{" (0x7b)
# Below ~500 rows JSON is the cheaper encoding, above it Arrow (measured on gpu_fields rows: 200 rows 0.7 ms
# JSON, 1.4 ms Arrow; 1,000 rows 3.2 ms JSON, 1.9-2.8 ms Arrow).
ARROW_MIN_ROWS = 512


def default_dir(lake: LakeRef, writer: str, environ: Mapping[str, str] | None = None) -> Path:
    """The spool folder of `writer` for `lake` when collector.spool_dir is not set: the lake's folder for spools on
    this machine's disk (Store.machine_folder: under the state folder, `$XDG_STATE_HOME` else ~/.local/state,
    `gpuledger/spool/local/<absolute lake path>/` or `gpuledger/spool/s3/<bucket>/<prefix>/`), then the writer.
    Outside the lake: its deletion cannot take the spool or its lock with it."""
    return open_store(lake).machine_folder("spool", environ) / check_name("writer id", writer)


def legacy_dir(lake: LakeRef, writer: str) -> Path | None:
    """Where a spool lived before `default_dir` (`<lake>/_spool/<writer>`, a lake in a folder); None otherwise."""
    folder = open_store(lake).folder
    return None if folder is None else folder / "_spool" / writer


@dataclass
class SegmentRead:
    # (table, columns): a JSON record's plain {column: [values]}, an Arrow record's typed DataFrame
    records: list[tuple[str, dict | pl.DataFrame]] = field(default_factory=list)
    torn_tail_bytes: int = 0
    corrupt_at: int | None = None  # byte offset of the first bad record followed by more data
    skipped_bytes: int = 0  # bytes passed over to find the next valid record after corruption


def _record_at(data: bytes, pos: int) -> tuple[tuple[str, dict], int] | None:
    """The valid record starting at `pos` and the offset after it, or None."""
    if pos + HEADER.size > len(data):
        return None
    length, crc = HEADER.unpack_from(data, pos)
    end = pos + HEADER.size + length
    if length > MAX_RECORD_BYTES or end > len(data):
        return None
    payload = data[pos + HEADER.size : end]
    if zlib.crc32(payload) != crc:
        return None
    try:
        return decode_record(payload), end
    except (ValueError, KeyError, TypeError, pl.exceptions.PolarsError):
        return None


def encode_record(table_name: str, columns: dict[str, list]) -> bytes:
    """One record's payload: Arrow for a batch of ARROW_MIN_ROWS rows or more of a lake table, JSON otherwise.

    A batch the table's schema cannot type (an unknown table or column, a value of the wrong kind) is written as
    JSON (what older segments hold throughout): the flush that reads it then names the table and the problem."""
    rows = len(next(iter(columns.values()))) if columns else 0
    if rows >= ARROW_MIN_ROWS:
        try:
            df = frame_from_columns(table_name, columns)
        except (LakeError, KeyError, TypeError, ValueError, pl.exceptions.PolarsError):
            df = None
        if df is not None:
            name = table_name.encode()
            buf = io.BytesIO()
            buf.write(bytes((ARROW_TAG, len(name))) + name)
            df.write_ipc_stream(buf, compression="zstd")
            return buf.getvalue()
    return json.dumps({"t": table_name, "c": columns}, separators=(",", ":")).encode()


def decode_record(payload: bytes) -> tuple[str, dict | pl.DataFrame]:
    """(table, columns) of one record's payload; ValueError (or a polars error) when it is neither encoding."""
    if payload[:1] == bytes((ARROW_TAG,)):
        n = payload[1]
        return payload[2 : 2 + n].decode(), pl.read_ipc_stream(io.BytesIO(payload[2 + n :]))
    rec = json.loads(payload)
    return rec["t"], rec["c"]


def read_segment(path: Path) -> SegmentRead:
    data = path.read_bytes()
    out = SegmentRead()
    pos = 0
    while pos < len(data):
        got = _record_at(data, pos)
        if got is not None:
            out.records.append(got[0])
            pos = got[1]
            continue
        # A bad record. If nothing valid follows it, it is a torn tail (never acknowledged). Otherwise the
        # segment is corrupt: resynchronise on the next offset where a whole record checks out (a false match
        # needs a CRC32 collision), so acknowledged records after the damage are kept too.
        nxt = next((q for q in range(pos + 1, len(data) - HEADER.size + 1) if _record_at(data, q)), None)
        if nxt is None:
            out.torn_tail_bytes = len(data) - pos
            break
        if out.corrupt_at is None:
            out.corrupt_at = pos
        out.skipped_bytes += nxt - pos
        pos = nxt
    return out


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte or raise OSError: os.write may write fewer bytes than asked (a disk filling up mid-record,
    a file-size limit); the next call then reports why."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[n:]


def _merged(table_name: str, batches: list[dict]) -> pl.DataFrame:
    """One typed frame of consecutive JSON records (a column missing from some is null there)."""
    merged: dict[str, list] = defaultdict(list)
    n = 0
    for cols in batches:
        rows = len(next(iter(cols.values()))) if cols else 0
        for name in cols:
            if name not in merged:
                merged[name] = [None] * n
        for name in merged:
            merged[name].extend(cols.get(name, [None] * rows))
        n += rows
    return frame_from_columns(table_name, merged)


def records_to_frames(records: list[tuple[str, dict | pl.DataFrame]]) -> dict[str, pl.DataFrame]:
    """Group spooled records by table and build one typed frame per table, rows in record order. Runs of JSON
    records are merged as lists first: one frame per record would cost ~0.2 ms each, and the webhook's spool holds
    thousands of one-row records."""
    by_table: dict[str, list] = defaultdict(list)
    for table_name, cols in records:
        by_table[table_name].append(cols)
    frames = {}
    for table_name, batches in by_table.items():
        parts, run = [], []
        for cols in batches:
            if isinstance(cols, pl.DataFrame):
                if run:
                    parts.append(_merged(table_name, run))
                    run = []
                parts.append(cols)
            else:
                run.append(cols)
        if run or not parts:
            parts.append(_merged(table_name, run))
        frames[table_name] = parts[0] if len(parts) == 1 else pl.concat(parts, how="diagonal")
    return frames


class Spool:
    """Append-only WAL in `directory`, owned by one writer process (`writer` names its lake files). `legacy`: another
    folder of this writer's records (`legacy_dir`), replayed by `replay` too."""

    def __init__(self, directory: Path | str, writer: str, fsync: bool = True, legacy: Path | None = None):
        self.dir = Path(directory)
        self.legacy = legacy
        self.writer = check_name("writer id", writer)
        self.fsync = fsync
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._current: Path | None = None
        self._kept: list = []  # objects appended with keep=, since the last rotate
        self._size = 0  # bytes of whole records in the open segment: where a failed append is cut back to
        self._torn = False  # a failed append could not be cut back: the next one tries again before writing
        self._lock_fd: int | None = None
        self.corrupt_reports: list[str] = []

    # -- segments ---------------------------------------------------------------------------------
    def _segments(self) -> list[Path]:
        return sorted(self.dir.glob("seg-*.wal"))

    def _next_seq(self) -> int:
        hw_path = self.dir / "HIGHWATER"
        try:
            hw = int(hw_path.read_text().strip() or 0)
        except FileNotFoundError:
            hw = 0
        except ValueError:
            hw = 0
        segs = [int(p.stem[4:]) for p in self._segments()]
        # Wall-clock ns keeps names increasing across restarts even if HIGHWATER were lost; HIGHWATER keeps
        # them increasing if the clock steps back.
        seq = max([time.time_ns(), hw + 1, *[s + 1 for s in segs]])
        write_bytes_atomic(hw_path, str(seq).encode())
        return seq

    def lock(self) -> None:
        """Take the spool for this process, before reading or writing anything in it (`open` does it too).

        Raises SpoolError naming the process (pid, host) that holds it: two writers on one spool would replay and
        delete each other's live segment."""
        if self._lock_fd is not None:
            return
        try:
            ensure_dir(self.dir)
        except LakeError as e:
            raise SpoolError(str(e).replace("cannot write", "cannot create spool directory")) from e
        path = self.dir / "LOCK"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise SpoolError(f"cannot open the spool lock {path}: {e.strerror}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            st, now = os.fstat(fd), os.stat(path)
            if (st.st_ino, st.st_dev) != (now.st_ino, now.st_dev):
                # the LOCK we opened was replaced before our flock: holding it guards nothing, take the new one
                os.close(fd)
                return self.lock()
        except FileNotFoundError:
            os.close(fd)  # unlinked under us (an older release removed an adopted spool's LOCK): take a new one
            return self.lock()
        except BlockingIOError:
            holder = os.pread(fd, 256, 0).decode(errors="replace").split()
            os.close(fd)
            who = f"process {holder[0]} on host {holder[1]}" if len(holder) == 2 else "another process"
            raise SpoolError(
                f"spool {self.dir} is in use by {who}: one writer per spool (stop that one, or give this one "
                "another lake or collector.node)"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        except OSError:
            pass  # only who holds it, for the message above (a full disk must not stop the writer starting)
        self._lock_fd = fd

    def open(self) -> None:
        self.lock()
        with self._lock:
            self._open_new_segment()

    def _open_new_segment(self) -> None:
        self._current, self._fd = self._create_segment()
        self._size, self._torn = 0, False

    def _create_segment(self) -> tuple[Path, int]:
        """A new, empty segment file and its descriptor. Nothing is swapped in: if this fails, the spool keeps
        its open segment (a half-done swap would leave a closed descriptor number in use)."""
        seq = self._next_seq()
        path = self.dir / f"seg-{seq:020d}.wal"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as e:
            raise SpoolError(f"cannot create spool segment {path}: {e.strerror}") from e
        try:
            fsync_dir(self.dir)
        except Exception:
            os.close(fd)
            raise
        return path, fd

    def _swap_segment(self) -> tuple[Path, list] | None:
        """The open segment out, a new one in: the old segment and the objects kept with its records, or None when
        it is empty. The new segment is made before the lock is taken (its name costs an fsync); the swap of
        segment and kept objects is one step under the lock, so no append lands in one and not the other; the old
        segment is synced and closed after it."""
        with self._lock:
            if self._fd is None or self._current is None:
                return None
            # A failed append's bytes may be a whole, valid record (written, then its fdatasync failed): its replay
            # would put in the lake a batch the caller still holds and appends again, a duplicate.
            try:
                self._untear()
            except OSError as e:
                raise SpoolError(
                    f"cannot cut spool segment {self._current} back to its last whole record: {e.strerror}"
                ) from e
            if self._size == 0:
                return None
        new = self._create_segment()
        with self._lock:
            path, fd, kept = self._current, self._fd, self._kept
            (self._current, self._fd), self._kept = new, []
            self._size, self._torn = 0, False  # the old segment was cut back to whole records above
        try:
            if not self.fsync:
                os.fdatasync(fd)  # every append was synced already with fsync; else all of it on disk now
        finally:
            os.close(fd)
        return path, kept

    def close(self) -> None:
        """Close the open segment and let go of the spool (the lock); a second call does nothing."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
                if self._current is not None and self._size == 0:
                    self._current.unlink()  # nothing whole in it: leave no empty segment behind
                    fsync_dir(self.dir)
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    # -- hot path ---------------------------------------------------------------------------------
    def append(self, table_name: str, columns: dict[str, list], keep=None) -> None:
        """Durably append one batch. When this returns, the batch survives kill -9 (and power loss, with fsync;
        else after the next `sync`). `keep`: an object handed back by `rotate` with the segment holding it."""
        payload = encode_record(table_name, columns)
        record = HEADER.pack(len(payload), zlib.crc32(payload)) + payload
        with self._lock:
            if self._fd is None:
                raise SpoolError("spool is not open")
            try:
                self._untear()
                _write_all(self._fd, record)
                if self.fsync:
                    os.fdatasync(self._fd)
            except OSError as e:
                self._cut_back()
                raise SpoolError(f"cannot append to spool segment {self._current}: {e.strerror}") from e
            self._size += len(record)
            if keep is not None:
                self._kept.append(keep)

    def _untear(self) -> None:
        """Cut off what a failed append left that its own cut-back could not (under the lock; OSError if it fails)."""
        if self._torn:
            os.ftruncate(self._fd, self._size)
            self._torn = False

    def _cut_back(self) -> None:
        """Truncate the open segment to its last whole record after a failed append (under the lock)."""
        try:
            os.ftruncate(self._fd, self._size)
        except OSError:
            self._torn = True

    def sync(self) -> None:
        """fdatasync what was appended (a spool opened with fsync=False batches its syncs this way).

        On a duplicate of the descriptor and outside the lock: a sync takes milliseconds, and appends (on a
        webhook's request path) must not wait for it."""
        with self._lock:
            fd = os.dup(self._fd) if self._fd is not None else None
            current = self._current
        if fd is None:
            return
        try:
            os.fdatasync(fd)
        except OSError as e:
            raise SpoolError(f"cannot sync spool segment {current}: {e.strerror}") from e
        finally:
            os.close(fd)

    def rotate(self) -> tuple[Path, list] | None:
        """Close the open segment (synced) and open a new one: the closed segment and the objects `append` was
        given to keep with its records, or None when it was empty. For a writer that keeps its own copy of the
        records: it writes them, named `name_of(segment)` as a replay would, then `discard`s the segment.
        Appends wait only for the swap, never for a sync."""
        return self._swap_segment()

    def discard(self, seg: Path) -> None:
        seg.unlink()
        fsync_dir(self.dir)

    def name_of(self, seg: Path) -> str:
        """The lake file name a segment's records are written under (the same on replay: idempotent)."""
        return f"{self.writer}-{seg.stem[4:]}"

    # -- flush ------------------------------------------------------------------------------------
    def depth(self) -> tuple[int, int]:
        """(segments, bytes) waiting to be flushed, the open segment included."""
        segs = self._segments()
        return len(segs), sum(p.stat().st_size for p in segs if p.exists())

    def flush(self, lake: LakeWriter) -> int:
        """Turn every closed segment into Parquet and delete it, then rotate and do the same with the segment that
        was open. Returns rows written. Closed segments go first: on a full spool disk that frees the space the
        rotation needs (a new segment and its HIGHWATER)."""
        with self._lock:
            closed = [p for p in self._segments() if p != self._current]
        rows = 0
        for seg in closed:
            rows += self._flush_segment(seg, lake)
        old = self._swap_segment()
        if old is not None:
            rows += self._flush_segment(old[0], lake)
        return rows

    def replay(self, lake: LakeWriter) -> int:
        """On start, before the first append: write whatever a previous run left behind (takes the lock first: a
        segment another live process still writes must never be replayed and deleted)."""
        self.lock()
        rows = 0
        for seg in self._segments():
            if seg != self._current:
                rows += self._flush_segment(seg, lake)
        if self.legacy is not None:
            rows += self.adopt(self.legacy, lake)
        return rows

    def adopt(self, other: Path, lake: LakeWriter) -> int:
        """Replay the segments of another folder of this writer (a spool at `legacy_dir`) into the lake, under the
        names that folder's own replay would give them, and delete them; rows written. A folder that a live process
        still holds is left alone (logged): that process flushes it."""
        if other == self.dir or not other.is_dir():
            return 0
        old = Spool(other, self.writer, fsync=self.fsync)
        try:
            old.lock()
        except SpoolError as e:
            log.warning("%s: not replaying it from here", e)
            return 0
        try:
            rows = old.replay(lake)
            self.corrupt_reports += old.corrupt_reports
        finally:
            old.close()
        if rows:
            log.info("replayed %d row(s) from the spool at %s, where an earlier release kept it", rows, other)
        return rows

    def check_flushed(self) -> None:
        """Raise SpoolError unless every acknowledged record is in the lake: no segment with data is left and the
        spool's LOCK is still the file this process holds (a spool folder deleted or taken over under a running
        process cannot vouch for what it acknowledged). For a process about to say 'everything flushed'."""
        left = [p for p in self._segments() if p.stat().st_size]
        if left:
            size = sum(p.stat().st_size for p in left)
            raise SpoolError(f"spool {self.dir} still holds {len(left)} segment(s), {size} bytes, not in the lake")
        if self._lock_fd is not None:
            held = os.fstat(self._lock_fd)
            try:
                now = os.stat(self.dir / "LOCK")
            except FileNotFoundError:
                now = None
            if now is None or (now.st_ino, now.st_dev) != (held.st_ino, held.st_dev):
                raise SpoolError(
                    f"spool {self.dir} was deleted or replaced while this process wrote to it: rows it acknowledged "
                    "may not be in the lake"
                )

    def _flush_segment(self, seg: Path, lake: LakeWriter) -> int:
        got = read_segment(seg)
        if got.torn_tail_bytes:
            log.info("spool %s: dropped a torn tail of %d bytes (never acknowledged)", seg.name, got.torn_tail_bytes)
        name = self.name_of(seg)
        rows = 0
        for table_name, df in records_to_frames(got.records).items():
            lake.write(table_name, df, name)
            rows += df.height
        if got.corrupt_at is not None:
            aside = self.dir / "corrupt" / seg.name
            ensure_dir(aside.parent)
            os.replace(seg, aside)
            msg = (
                f"spool segment {seg.name} is corrupt at byte {got.corrupt_at}: skipped {got.skipped_bytes} "
                f"byte(s), kept {len(got.records)} valid record(s), moved the segment to {aside}"
            )
            log.error(msg)
            self.corrupt_reports.append(msg)
        else:
            seg.unlink()
        fsync_dir(self.dir)
        return rows

    def segments(self) -> Iterator[Path]:
        yield from self._segments()
