"""A lake file checked before it is trusted, and set aside when it cannot be: one damaged or foreign file must not
stop every run and query that reads its table, nor be read as other values.

A file fails when it cannot be read whole with its page checksums verified (cut short, bytes flipped: polars and
DuckDB verify no checksum, and a flipped bit in a zstd page can decompress to another value; the pages are checked
without decoding them by gpuledger.parquet_pages, or decoded by pyarrow where a page has no checksum), or when its
columns are not its table's (an unknown column, a required one missing, a column of another kind of type: read
with the rest, it would retype the column for every reader). A failed file is moved under `_quarantine/`
(Store.set_aside), named in one warning line, and recorded in the `quarantined_files` table: the rows it held are
not counted until a person puts a repaired copy back.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import logging

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from gpuledger import parquet_pages, schema
from gpuledger.lake import LakeWriter, frame_from_rows
from gpuledger.store import Store

log = logging.getLogger(__name__)


def _kind(dtype: pl.DataType) -> str:
    if dtype.is_numeric():
        return "number"
    if dtype.is_temporal():
        return f"time:{dtype.base_type()}"
    return str(dtype.base_type())


def schema_problem(table: schema.Table, have: pl.Schema) -> str | None:
    """What is wrong with a file of `table` whose columns are `have`, or None. A column of the same kind of type (an
    older file's narrower integer) is read with a cast; another kind would retype the column."""
    want = table.file_schema
    unknown = [c for c in have if c not in want]
    if unknown:
        return f"unknown column(s) {', '.join(unknown)}"
    missing = [c for c in table.required if c in want and c not in have]
    if missing:
        return f"missing required column(s) {', '.join(missing)}"
    wrong = [f"{c} is {have[c]}, not {want[c]}" for c in have if _kind(have[c]) != _kind(want[c])]
    return f"column types differ from the table's: {'; '.join(wrong)}" if wrong else None


def verify_bytes(table: schema.Table, data: bytes) -> str | None:
    """What is wrong with these bytes as a file of `table`, or None."""
    try:
        # The footer by pyarrow (its Thrift reader, and the Arrow schema kept in it), the pages by parquet_pages.
        f = pq.ParquetFile(io.BytesIO(data))
        zone = _unknown_zone(f.schema_arrow)
        if zone is not None:  # polars would panic on it (a Rust panic message on stderr before the exception)
            return f"cannot be read whole (unknown time zone {zone!r})"
        columns = [(c.physical_type, c.max_definition_level, c.max_repetition_level) for c in f.schema]
        try:
            why = parquet_pages.check(data, columns)
        except parquet_pages.Unverifiable:
            why = decoded(data)
        # polars' own reading of the footer: a pyarrow Table (even an empty one) imports pandas, 0.2 s a process
        have = None if why is not None else pl.read_parquet_schema(io.BytesIO(data))
    # polars panics (a BaseException) on some damaged footers: a time zone no longer a zone's name
    except (pa.ArrowException, OSError, ValueError, pl.exceptions.PolarsError, pl.exceptions.PanicException) as e:
        why = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
    if why is not None:
        return f"cannot be read whole ({why})"
    return schema_problem(table, have)


def _unknown_zone(arrow: pa.Schema) -> str | None:
    """The first time zone of a timestamp column that polars does not know, or None (asked of polars' own zone
    database: a raised error here, where reading the file's schema would panic)."""
    for field in arrow:
        tz = getattr(field.type, "tz", None)
        if tz:
            try:
                pl.Series([], dtype=pl.Datetime("us", tz))
            except pl.exceptions.ComputeError:
                return tz
    return None


def decoded(data: bytes) -> None:
    """Every page decoded by pyarrow, checking each page's checksum where it has one: raises what pyarrow raises.
    The slow path (a file with pages written without checksums), and what parquet_pages is tested against."""
    f = pq.ParquetFile(io.BytesIO(data), page_checksum_verification=True)
    for _ in f.iter_batches(batch_size=1 << 16):  # a batch held at a time
        pass


def verify_file(store: Store, table_name: str, key: str) -> str | None:
    """What is wrong with the lake file `key` of `table_name`, or None (a file gone meanwhile is not wrong)."""
    data = store.get(key)
    return None if data is None else verify_bytes(schema.table(table_name), data)


def quarantine(store: Store, table_name: str, key: str, reason: str, by: str, cluster: str = "default") -> str:
    """Set `key` aside, say so in one line, and record it in quarantined_files. Returns where it is now."""
    data_size = len(store.get(key) or b"")
    dest = store.set_aside(key)
    log.warning("%s: %s %s; set aside as %s", by, store.url(key), reason, dest)
    now = dt.datetime.now(dt.timezone.utc)
    row = {
        "ts": int(now.timestamp() * 1e6),
        "cluster": cluster,
        "table_name": table_name,
        "file": key,
        "set_aside_as": dest,
        "reason": reason,
        "size_bytes": data_size,
        "found_by": by,
    }
    name = f"q-{hashlib.sha1(key.encode()).hexdigest()[:16]}-{now.strftime('%Y%m%dT%H%M%S%f')}"
    LakeWriter(store).write("quarantined_files", frame_from_rows("quarantined_files", [row]), name)
    return dest


def checked_stamps(
    store: Store, table_name: str, known: dict[str, list], by: str, cluster: str = "default"
) -> tuple[dict[str, list], int]:
    """A table's {key: [stamp, size]} (lake.file_stamps) after checking every file `known` does not hold with the
    same stamp: a file new or changed since the caller last read it. A file that fails is set aside (quarantine)
    and left out. Returns the stamps of the files to read, and how many were set aside."""
    from gpuledger.lake import file_stamps

    stamps = file_stamps(store, table_name)
    bad = 0
    for key, stamp in list(stamps.items()):
        if known.get(key) == stamp:
            continue
        why = verify_file(store, table_name, key)
        if why is not None:
            quarantine(store, table_name, key, why, by, cluster)
            del stamps[key]
            bad += 1
    return stamps, bad
