"""The lake: append-only, hive-partitioned Parquet; the only interface between the stages.

Layout: `<root>/<table>/date=YYYY-MM-DD/part-<name>.parquet` (see gpuledger.schema).
Writers name files deterministically (writer id + spool segment, or simulation chunk), so re-running a
write replaces the same file instead of adding a duplicate: re-runs are idempotent.

The lake lives in a Store (gpuledger.store: a local folder, or `s3://bucket/prefix` with the same layout as keys):
every byte goes through it, and nothing here asks which kind it is. A collector's file is created once and never
overwritten (Store.put_new: the same write done again finds its own bytes there and is done); a derived table's
file is replaced whole (Store.put_frames).
"""

from __future__ import annotations

import datetime as dt
import re
import socket
from dataclasses import dataclass

import polars as pl

from gpuledger import schema
from gpuledger.errors import LakeError
from gpuledger.store import LakeRef, Staging, Store, open_store
from gpuledger.store.base import COMPRESSION

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$|^_none$")
__all__ = ["COMPRESSION", "LakeWriter", "Partition", "scan", "file_stamps", "table_files", "has_data"]


@dataclass(frozen=True)
class Partition:
    table: str
    date: dt.date

    @property
    def folder(self) -> str:
        return f"{self.table}/date={self.date.isoformat()}"

    def key(self, name: str) -> str:
        return f"{self.folder}/part-{name}.parquet"


def _groups(t: schema.Table, df: pl.DataFrame):
    """(Partition, rows without the path columns) for every partition of `df` (which has the path columns)."""
    for (date,), part in df.partition_by(["date"], as_dict=True, maintain_order=True).items():
        yield Partition(t.name, date), part.drop("date")


def check_name(kind: str, value: str) -> str:
    """Node names and writer ids become path segments: refuse anything that could escape or confuse the layout."""
    if not _SAFE_NAME.match(value):
        raise LakeError(
            f"{kind} {value!r} cannot be used in a lake path: use letters, digits, '.', '_' or '-' "
            "(at most 200 characters, not starting with '.', '_' or '-')"
        )
    return value


def conform(table_name: str, df: pl.DataFrame, file_only: bool = False) -> pl.DataFrame:
    """Return `df` with exactly the table's columns in order and types; missing nullable columns become null.

    With `file_only`, the partition column (date) is left out: the shape of the rows inside a file.

    Raises LakeError naming the table and the offending columns: unknown columns, missing required ones,
    values that do not cast, or nulls in a required column.
    """
    t = schema.table(table_name)
    target = t.file_schema if file_only else t.polars_schema
    if dict(df.schema) == dict(target):
        # Already the table's columns and types (the analytics build them so): order them, check nulls, done.
        nulls = [c for c in t.required if c in target and df[c].null_count()]
        if nulls:
            raise LakeError(f"{table_name}: null values in required column(s) {', '.join(nulls)}")
        return df if df.columns == target.names() else df.select(target.names())
    unknown = [c for c in df.columns if c not in t.polars_schema or (file_only and c in t.path_columns)]
    if unknown:
        raise LakeError(f"{table_name}: unknown column(s) {', '.join(unknown)}")
    missing = [c for c in t.required if c not in df.columns and c in target and c != "date"]
    if missing:
        raise LakeError(f"{table_name}: missing required column(s) {', '.join(missing)}")
    exprs = []
    for name, dtype in target.items():
        if name == "date":
            exprs.append(pl.col(t.time_column).dt.date().alias("date"))
        elif name in df.columns:
            exprs.append(pl.col(name).cast(dtype, strict=True))
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(name))
    try:
        out = df.lazy().select(exprs).collect()
    except pl.exceptions.PolarsError as e:
        raise LakeError(f"{table_name}: values do not fit the schema: {e}") from e
    nulls = [c for c in t.required if c in target and out[c].null_count()]
    if nulls:
        raise LakeError(f"{table_name}: null values in required column(s) {', '.join(nulls)}")
    return out


def frame_from_columns(table_name: str, columns: dict[str, list]) -> pl.DataFrame:
    """Build a typed frame from plain Python columns (timestamps as integer microseconds since the epoch, UTC).

    Types come from the schema, never inferred from the values: a column whose first rows are null keeps its
    type.
    """
    types = schema.table(table_name).polars_schema
    series = []
    for name, values in columns.items():
        if name not in types:
            raise LakeError(f"{table_name}: unknown column {name!r}")
        dtype = types[name]
        if dtype == schema.UTC_US:
            series.append(pl.Series(name, values, pl.Int64).cast(schema.UTC_US))
        else:
            series.append(pl.Series(name, values, dtype, strict=False))
    return pl.DataFrame(series)


def frame_from_rows(table_name: str, rows: list[dict]) -> pl.DataFrame:
    """Typed frame from row dicts; a key missing from some rows is null there (the union of keys is kept)."""
    keys = dict.fromkeys(k for r in rows for k in r)
    return frame_from_columns(table_name, {k: [r.get(k) for r in rows] for k in keys})


class LakeWriter:
    """Writes conformed frames into partitions, one file per (partition, name), through the lake's Store."""

    def __init__(self, lake: LakeRef):
        self.store = open_store(lake)

    @property
    def root(self) -> Store:
        return self.store

    def init(self) -> None:
        self.store.prepare_writer(socket.gethostname())

    def write(self, table_name: str, df: pl.DataFrame, name: str) -> list[str]:
        """Write `df` (any columns of the table, `date` derived) under file name `part-<name>.parquet`, each file
        created once (a collector's flush, an import: the same (rows, name) written twice gives the same files).

        Returns the keys written."""
        check_name("file name", name)
        if df.height == 0:
            return []
        t = schema.table(table_name)
        return [self.write_partition(p, part, name) for p, part in _groups(t, conform(table_name, df))]

    def write_partitions(self, table_name: str, df: pl.DataFrame, name: str, workers: int = 8) -> list[str]:
        """Write (or replace) a frame with a `date` column, one file per date, several at a time: a derived table's
        days (an analytics run: thousands of small partitions, written in threads and made durable together)."""
        items = list(self._files(table_name, df, name))
        self.store.put_frames(items, workers)
        return [key for key, _ in items]

    def stage_partitions(self, staging: Staging, table_name: str, df: pl.DataFrame, name: str) -> list:
        """write_partitions' first half, for a writer in another process (a Dask worker): handles that
        staging.publish makes visible."""
        return [staging.stage(key, body) for key, body in self._files(table_name, df, name)]

    def _files(self, table_name: str, df: pl.DataFrame, name: str):
        """(key, rows conformed to the file's schema) of each date of `df` (which has a `date` column)."""
        check_name("file name", name)
        for p, part in _groups(schema.table(table_name), df):
            yield p.key(name), conform(table_name, part, file_only=True)

    def write_partition(self, p: Partition, df: pl.DataFrame, name: str) -> str:
        """Create the rows of one partition (without the date column) as `part-<name>.parquet`."""
        df = conform(p.table, df, file_only=True)
        key = p.key(name)
        self.store.put_new_frame(key, df)
        return key


def partition_file(table_name: str, date: dt.date) -> str:
    """The key of a derived table's one file of a day (`part-<table>.parquet`: the analytics name theirs so)."""
    return Partition(table_name, date).key(table_name)


def file_stamps(lake: LakeRef, table_name: str) -> dict[str, list]:
    """{key: [stamp, size]} of a table's files, in key order: what changes when a file is written again, for the
    analytics to compare with their last run's (Store.files), as lists: the shape they take back from JSON."""
    return {k: list(v) for k, v in open_store(lake).files(table_name, schema.table(table_name).file_glob).items()}


def stamp_day(rel: str) -> dt.date:
    """The date of a file_stamps key."""
    return dt.date.fromisoformat(rel.rsplit("/", 2)[-2].removeprefix("date="))


def table_days(lake: LakeRef, table_name: str) -> set[dt.date]:
    """The days a table has files for."""
    return {stamp_day(rel) for rel in file_stamps(lake, table_name)}


def read_file(lake: LakeRef, key: str) -> pl.DataFrame | None:
    """One lake file's rows (its own columns, no hive `date`), or None when there is no such file."""
    data = open_store(lake).get(key)
    return None if data is None else pl.read_parquet(data)


def remove_files(lake: LakeRef, keys: list[str]) -> None:
    """Remove these files of the lake (a derived table's days that have no rows any more); missing ones are fine."""
    open_store(lake).delete(keys)


def table_files(lake: LakeRef, table_name: str) -> list[str]:
    """The keys a reader of the table reads now."""
    return list(file_stamps(lake, table_name))


def has_data(lake: LakeRef, table_name: str) -> bool:
    return open_store(lake).has_files(table_name, schema.table(table_name).file_glob)


def scan_files(store: Store, table_name: str, keys: list[str], with_file_columns: bool = False) -> pl.LazyFrame:
    """The table's rows from these files: the file's columns and the hive `date` (missing columns null), and with
    `with_file_columns` a `filename` and a `file_row_number` (a row number across the files in their listed order:
    increasing within each file, which is all the views' tie-break by (filename, file_row_number) needs). No files:
    no rows, the same shape."""
    t = schema.table(table_name)
    extra = {"filename": pl.String, "file_row_number": pl.UInt32} if with_file_columns else {}
    if not keys:
        return pl.LazyFrame(schema=dict(t.polars_schema) | extra)
    lf = pl.scan_parquet(
        [store.url(k) for k in keys],
        hive_partitioning=True,
        hive_schema={"date": pl.Date},
        missing_columns="insert",
        schema=t.file_schema,
        storage_options=store.storage_options,
        include_file_paths="filename" if with_file_columns else None,
        row_index_name="file_row_number" if with_file_columns else None,
    )
    return lf.select([*t.column_names, *extra])


def scan(lake: LakeRef, table_name: str, date: dt.date | None = None) -> pl.LazyFrame:
    """The one polars reader of the lake: a LazyFrame with the table's full schema (empty if no files).

    `date` reads one UTC date's partition only: the glob names it, so only that folder is listed, not every file
    of the table (a year of derived tables and open days is thousands of files)."""
    t = schema.table(table_name)
    glob = t.file_glob if date is None else t.file_glob.replace("date=*", f"date={date.isoformat()}", 1)
    store = open_store(lake)
    return scan_files(store, table_name, list(store.files(table_name, glob)))
