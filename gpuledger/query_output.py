"""A query's result written out as it streams, a record batch at a time: table, csv, json or parquet.

Memory stays bounded by a batch, not by the result (50M rows to CSV: benchmarks/RESULTS.md). Each format asks
DuckDB, through the stream's projection, for the columns it can write: a result column of any DuckDB type is
written, never a traceback.
- csv and table: a list, struct, map, array or union column is its JSON text (`["a","b"]`), a type polars cannot
  write (INTERVAL, BLOB, UUID, HUGEINT, ...) its DuckDB text; numbers, strings, booleans, dates and times as they are.
- json: an array of one object per line, each row DuckDB's to_json of it (nested columns as JSON values).
- parquet: every column as it is, but INTERVAL (which Parquet's Arrow writer cannot store) as its text.
Two columns of one name (`SELECT * FROM a JOIN b ...`) get DuckDB's own suffixes (`node`, `node_1`) where a format
needs unique names (json keys, parquet and table columns); a csv header keeps the query's names.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeVar

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from gpuledger.atomic import write_atomic
from gpuledger.errors import QueryError
from gpuledger.query_guard import Projection, Stream

FORMATS = ("table", "csv", "json", "parquet")
# Rows per batch written: 20,000 rows of 200 bytes are 4 MB. DuckDB computes a few batches ahead, and each costs
# its Arrow, polars and text copies: 6M such rows to csv peaked at 358 MB in batches of 100,000, 195 MB in 10,000
# (narrow rows: 170 MB either way, the same time).
BATCH_ROWS = 20_000
ROW_GROUP_ROWS = 122_880
# The table format's rows per block (a block is one table, headed by the column names): a terminal's worth of
# pages, so a large --limit prints as it goes instead of holding every row to measure the columns.
TABLE_BLOCK_ROWS = 1_000

# DuckDB types that polars writes as csv and prints as a table as they are (DuckDBPyType.id).
_PLAIN = frozenset(
    "boolean tinyint smallint integer bigint utinyint usmallint uinteger ubigint float double decimal varchar date "
    "time timestamp timestamp_s timestamp_ms timestamp_ns".split()
) | {"timestamp with time zone"}
_NESTED = frozenset({"list", "struct", "map", "array", "union"})

T = TypeVar("T")


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def unique_names(columns: list[str]) -> list[str]:
    """The columns' names, a repeated one suffixed _1, _2, ... as DuckDB does (case-insensitively)."""
    seen: set[str] = set()
    out = []
    for c in columns:
        name, k = c, 0
        while name.lower() in seen:
            k += 1
            name = f"{c}_{k}"
        seen.add(name.lower())
        out.append(name)
    return out


def projection(fmt: str) -> Projection:
    """What DuckDB hands `fmt`'s writer: SQL over the result's columns by position (#1, #2, ...)."""

    def columns_as(columns: list[str], types: list) -> str:
        names = unique_names(columns)
        if fmt == "json":
            fields = ", ".join(f"{_quoted(n)} := #{i}" for i, n in enumerate(names, 1))
            return f"to_json(struct_pack({fields})) AS row"
        out = []
        for i, (name, tp) in enumerate(zip(names, types, strict=True), 1):
            if fmt == "parquet":
                expr = f"CAST(#{i} AS VARCHAR)" if tp.id == "interval" else f"#{i}"
            elif tp.id in _NESTED:
                expr = f"to_json(#{i})"
            else:
                expr = f"#{i}" if tp.id in _PLAIN else f"CAST(#{i} AS VARCHAR)"
            out.append(f"{expr} AS {_quoted(name)}")
        return ", ".join(out)

    return columns_as


@dataclass
class Written:
    rows: int
    truncated: bool  # the result had more rows than the limit


def _limited(stream: Stream, limit: int | None, written: Written) -> Iterator[pa.RecordBatch]:
    """The stream's batches up to `limit` rows in all; `written` counts them and notes a row past the limit."""
    for batch in stream:
        if limit is not None and written.rows + batch.num_rows > limit:
            batch = batch.slice(0, limit - written.rows)
            written.truncated = True
        if batch.num_rows:
            written.rows += batch.num_rows
            yield batch
        if written.truncated:
            return


def _csv(stream: Stream, batches: Iterator[pa.RecordBatch], sink: BinaryIO) -> None:
    header = io.StringIO()
    csv.writer(header, lineterminator="\n").writerow(stream.columns)
    sink.write(header.getvalue().encode())
    for batch in batches:
        buf = io.BytesIO()
        pl.from_arrow(batch).write_csv(buf, include_header=False)
        sink.write(buf.getbuffer())


def _json(batches: Iterator[pa.RecordBatch], sink: BinaryIO) -> None:
    sep = "[\n"
    for batch in batches:
        sink.write((sep + ",\n".join(batch.column(0).to_pylist())).encode())
        sep = ",\n"
    sink.write(b"[]\n" if sep == "[\n" else b"\n]\n")


def _parquet(stream: Stream, batches: Iterator[pa.RecordBatch], sink: BinaryIO) -> None:
    # zstd, as polars writes the lake. A row group per batch would be 20,000 rows (150 of them for 3M rows), so
    # batches gather into row groups of DuckDB's own size (122,880 rows). Dictionaries for strings only: a column
    # chunk of unique numbers builds one and drops it, 16 s against 2.5 s for 10M rows of two BIGINTs.
    strings = [f.name for f in stream.schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
    strings += [f.name for f in stream.schema if pa.types.is_string_view(f.type)]
    pending: list[pa.RecordBatch] = []
    with pq.ParquetWriter(sink, stream.schema, compression="zstd", use_dictionary=strings) as writer:
        for batch in batches:
            pending.append(batch)
            if sum(b.num_rows for b in pending) >= ROW_GROUP_ROWS:
                writer.write_table(pa.Table.from_batches(pending))
                pending = []
        if pending:
            writer.write_table(pa.Table.from_batches(pending))


def _table(
    stream: Stream, batches: Iterator[pa.RecordBatch], sink: BinaryIO, written: Written, limit: int | None
) -> None:
    with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=200, fmt_str_lengths=60, tbl_hide_dataframe_shape=True):
        shown = False
        for batch in batches:
            sink.write((str(pl.from_arrow(batch)) + "\n").encode())
            shown = True
        if not shown:
            sink.write((str(pl.from_arrow(stream.schema.empty_table())) + "\n").encode())
    if written.truncated:
        sink.write(f"(first {limit} rows; use --limit or --format csv for more)\n".encode())


def write(stream: Stream, fmt: str, sink: BinaryIO, limit: int | None = None) -> Written:
    """Write at most `limit` rows of `stream` (projected with `projection(fmt)`) to `sink` as `fmt`, a batch at a
    time. A failure of DuckDB mid-stream is a QueryError; of the sink, its OSError."""
    written = Written(0, False)
    batches = _limited(stream, limit, written)
    try:
        if fmt == "csv":
            _csv(stream, batches, sink)
        elif fmt == "json":
            _json(batches, sink)
        elif fmt == "parquet":
            _parquet(stream, batches, sink)
        elif fmt == "table":
            _table(stream, batches, sink, written, limit)
        else:
            raise ValueError(f"unknown format {fmt!r}")
    except (pl.exceptions.PolarsError, pa.ArrowException) as e:
        if isinstance(e, OSError) and e.errno is not None:  # the sink's own failure (pyarrow raises it as is)
            raise
        raise QueryError(f"cannot write the result as {fmt}: {str(e).strip().splitlines()[0]}") from e
    return written


def batch_rows(fmt: str, limit: int | None) -> int:
    """Rows per batch to ask DuckDB for: a table block, or one row past a smaller limit (to tell truncation)."""
    rows = TABLE_BLOCK_ROWS if fmt == "table" else BATCH_ROWS
    return min(rows, limit + 1) if limit is not None else rows


def to_file(path: Path, emit: Callable[[BinaryIO], T]) -> T:
    """`emit(sink)` into `path`: a regular file (or a new one) through a temp file and a rename, so a failure
    leaves the old file or none; a device or a pipe (/dev/null, /dev/stdout) written in place. A failure to write
    is the write's OSError, or the LakeError naming the file."""
    if path.exists() and not path.is_file():
        with open(path, "wb") as sink:
            return emit(sink)
    result: list[T] = []

    def stage(tmp: Path) -> None:
        with open(tmp, "wb") as sink:
            result.append(emit(sink))

    write_atomic(path, stage)
    return result[0]


@contextlib.contextmanager
def quiet_broken_pipe(stdout: BinaryIO) -> Iterator[None]:
    """A reader that stops reading (`| head -1`) ends the command quietly with status 141, a process killed by
    SIGPIPE in a shell's terms: no traceback, no line, and no second error when Python flushes stdout at exit."""
    try:
        yield
    except BrokenPipeError:
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), stdout.fileno())
        raise SystemExit(141) from None
