"""The lake: append-only, hive-partitioned Parquet; the only interface between the stages.

Layout: `<root>/<table>/date=YYYY-MM-DD/part-<name>.parquet` (see gpuledger.schema).
Writers name files deterministically (writer id + spool segment, or simulation chunk), so re-running a
write replaces the same file instead of adding a duplicate: re-runs are idempotent.

The root may be `s3://bucket/prefix` (gpuledger.lake_url): the same layout as keys. There a partition's file is one
PUT of the final key with If-None-Match (an object appears whole or not at all, no temp key a reader could list, and
a key is never overwritten: the same write done again finds its own bytes there and is done).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from gpuledger import lake_url, schema
from gpuledger.atomic import ensure_dir, explain, fsync_dir, stage, write_atomic, write_many_atomic
from gpuledger.errors import LakeError
from gpuledger.lake_lock import publishing

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$|^_none$")
COMPRESSION = "zstd"


@dataclass(frozen=True)
class Partition:
    table: str
    date: dt.date

    def path(self, root: Path) -> Path:
        return root / self.table / f"date={self.date.isoformat()}"


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
    """Writes conformed frames into partitions, one atomic file per (partition, name)."""

    def __init__(self, root: Path | str | lake_url.S3Location):
        self.root = lake_url.parse(root)
        self._store = None  # an S3 lake's client, made once

    def _s3(self):
        if self._store is None:
            self._store = lake_url.object_store(self.root)
        return self._store

    def init(self) -> None:
        if isinstance(self.root, lake_url.S3Location):
            lake_url.preflight(self.root, write_probe=socket.gethostname())
            return
        ensure_dir(self.root)
        probe = self.root / ".write-probe"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as e:
            raise LakeError(f"lake directory {self.root} is not writable: {e.strerror}") from e

    def write(self, table_name: str, df: pl.DataFrame, name: str) -> list[Path]:
        """Write `df` (any columns of the table, `date` derived) under file name `part-<name>.parquet`.

        Returns the files written. The same (rows, name) written twice gives the same files.
        """
        check_name("file name", name)
        if df.height == 0:
            return []
        t = schema.table(table_name)
        return [self.write_partition(p, part, name) for p, part in _groups(t, conform(table_name, df))]

    def write_partitions(self, table_name: str, df: pl.DataFrame, name: str, workers: int = 8) -> list[Path]:
        """Write a frame with a `date` column, one file per date, several at a time.

        Thousands of small partitions (an analytics run) are staged in threads (polars' writer releases the
        GIL) and made durable with one sync instead of one fsync each (gpuledger.atomic.write_many_atomic).
        """
        if isinstance(self.root, lake_url.S3Location):
            # A PUT replaces a key whole (a reader sees the old object or the new): no temp key, no guard.
            objects = self.partition_objects(table_name, df, name)
            lake_url.put_many(objects, workers)
            return [obj for obj, _ in objects]
        items = [
            (path, lambda tmp, body=body: body.write_parquet(tmp, compression=COMPRESSION, statistics=True))
            for path, body in self._files(table_name, df, name)
        ]
        guard = self._guard([path for path, _ in items])
        if len(items) == 1:
            write_atomic(*items[0], guard=guard)
        elif items:
            write_many_atomic(items, workers, guard=guard)
        return [path for path, _ in items]

    def partition_objects(
        self, table_name: str, df: pl.DataFrame, name: str
    ) -> list[tuple[lake_url.S3Location, bytes]]:
        """An object-store lake's write_partitions, computed but not written: (key, Parquet bytes) per date. A Dask
        worker returns these to the client, which puts a chunk's objects once every task of it succeeded."""
        return [
            (obj, lake_url.parquet_bytes(body, compression=COMPRESSION, statistics=True))
            for obj, body in self._files(table_name, df, name)
        ]

    def _files(self, table_name: str, df: pl.DataFrame, name: str):
        """(lake path, rows conformed to the file's schema) of each date of `df` (which has a `date` column)."""
        check_name("file name", name)
        for p, part in _groups(schema.table(table_name), df):
            yield p.path(self.root) / f"part-{name}.parquet", conform(table_name, part, file_only=True)

    def stage_partitions(self, table_name: str, df: pl.DataFrame, name: str, staging: Path) -> list[tuple[Path, Path]]:
        """The first half of write_partitions, for a writer in another process (a Dask worker): each date's file is
        written and fsynced under `staging`, a folder of the lake outside every table's glob, so no reader sees it.

        Returns (staged file, lake path) pairs for publish_staged; nothing is in the lake until then."""
        staged = []
        for path, body in self._files(table_name, df, name):
            tmp = stage(
                Path(staging) / path.relative_to(self.root),
                lambda tmp, body=body: body.write_parquet(tmp, compression=COMPRESSION, statistics=True),
            )
            staged.append((tmp, path))
        return staged

    def publish_staged(self, staged: list[tuple[Path, Path]]) -> list[Path]:
        """The second half: rename each staged file to its lake path (atomic: the staging folder is on the lake's
        filesystem) and make the renames durable. Returns the lake paths."""
        paths = [path for _, path in staged]
        for d in {p.parent for p in paths}:
            ensure_dir(d)
        with self._guard(paths) or contextlib.nullcontext():
            for tmp, path in staged:
                try:
                    os.replace(tmp, path)
                except OSError as e:
                    raise explain(e, path) from e
        for d in {p.parent for p in paths}:
            fsync_dir(d)
        return paths

    def _guard(self, paths: list[Path]):
        """Replacing a file a query may be reading waits for the queries in flight (gpuledger.lake_lock); adding a
        new one does not (a reader lists its files once, so it sees the file whole or not at all)."""
        if isinstance(self.root, lake_url.S3Location):
            return None  # nothing to guard: a PUT replaces a key atomically, and readers list once
        return publishing(self.root) if any(p.exists() for p in paths) else None

    def write_partition(self, p: Partition, df: pl.DataFrame, name: str) -> Path:
        """Write the rows of one partition (without the date column) as `part-<name>.parquet`."""
        df = conform(p.table, df, file_only=True)
        path = p.path(self.root) / f"part-{name}.parquet"
        if isinstance(path, lake_url.S3Location):
            lake_url.put_new(self._s3(), path, lake_url.parquet_bytes(df, compression=COMPRESSION, statistics=True))
            return path
        write_atomic(
            path, lambda tmp: df.write_parquet(tmp, compression=COMPRESSION, statistics=True), self._guard([path])
        )
        return path


def partition_file(root: Path | str, table_name: str, date: dt.date) -> Path | lake_url.S3Location:
    """Where a derived table's one file of a day is (`part-<table>.parquet`: the analytics name theirs so)."""
    return Partition(table_name, date).path(lake_url.parse(root)) / f"part-{table_name}.parquet"


def file_stamps(root: Path | str, table_name: str) -> dict[str, list]:
    """{path relative to the lake: [stamp, size]} of a table's files, in path order: what changes when a file is
    written again, for the analytics to compare with their last run's. The stamp is the mtime in ns on disk, the
    ETag in an object store (from the LIST, no HEAD per object; compacted objects left out as readers leave them).
    On disk os.scandir, not a glob: a year is 365 folders on every run."""
    if isinstance(root := lake_url.parse(root), lake_url.S3Location):
        listed = lake_url.listing(root / table_name, schema.table(table_name).file_glob)
        return {obj.key[len(root.key) :].lstrip("/"): [tag, size] for obj, (tag, size) in listed.items()}
    out = {}
    base = Path(root, table_name)
    if not base.is_dir():
        return out
    for folder in sorted(os.scandir(base), key=lambda e: e.name):
        if not (folder.name.startswith("date=") and folder.is_dir()):
            continue
        for f in sorted(os.scandir(folder.path), key=lambda e: e.name):
            if f.name.endswith(".parquet") and f.is_file():
                st = f.stat()
                out[f"{table_name}/{folder.name}/{f.name}"] = [st.st_mtime_ns, st.st_size]
    return out


def stamp_day(rel: str) -> dt.date:
    """The date of a file_stamps path."""
    return dt.date.fromisoformat(Path(rel).parent.name.removeprefix("date="))


def table_days(root: Path | str, table_name: str) -> set[dt.date]:
    """The days a table has files for."""
    return {stamp_day(rel) for rel in file_stamps(root, table_name)}


def read_file(f: Path | lake_url.S3Location) -> pl.DataFrame | None:
    """One lake file's rows (its own columns, no hive `date`), or None when there is no such file."""
    if isinstance(f, lake_url.S3Location):
        data = lake_url.read_bytes(f)
        return None if data is None else pl.read_parquet(data)
    return pl.read_parquet(f) if f.exists() else None


def remove_files(root: Path | str, files: list) -> None:
    """Remove these files of the lake (a derived table's days that have no rows any more); missing ones are fine.
    On disk inside `publishing` (not from under a query that listed them: gpuledger.lake_lock)."""
    if isinstance(root := lake_url.parse(root), lake_url.S3Location):
        lake_url.delete_many(files)
        return
    present = [f for f in files if Path(f).exists()]
    if present:
        with publishing(root):
            for f in present:
                Path(f).unlink(missing_ok=True)


def table_files(root: Path | str, table_name: str) -> list[Path]:
    if isinstance(root := lake_url.parse(root), lake_url.S3Location):
        return lake_url.glob(root / table_name, schema.table(table_name).file_glob)
    return sorted(Path(root, table_name).glob(schema.table(table_name).file_glob))


def has_data(root: Path | str, table_name: str) -> bool:
    if isinstance(root := lake_url.parse(root), lake_url.S3Location):
        return bool(table_files(root, table_name))
    base = Path(root, table_name)
    return base.is_dir() and next(base.glob(schema.table(table_name).file_glob), None) is not None


def scan_objects(table_name: str, files: list, with_file_columns: bool = False) -> pl.LazyFrame:
    """The table's rows from these objects of an object-store lake: the file's columns and the hive `date` (missing
    columns null), and with `with_file_columns` a `filename` and a `file_row_number` (a row number across the files
    in their listed order: increasing within each file, which is all the views' tie-break by (filename,
    file_row_number) needs). No objects: no rows, the same shape."""
    t = schema.table(table_name)
    extra = {"filename": pl.String, "file_row_number": pl.UInt32} if with_file_columns else {}
    if not files:
        return pl.LazyFrame(schema=dict(t.polars_schema) | extra)
    lf = pl.scan_parquet(
        [str(f) for f in files],
        hive_partitioning=True,
        hive_schema={"date": pl.Date},
        missing_columns="insert",
        schema=t.file_schema,
        storage_options=lake_url.storage_options(),
        include_file_paths="filename" if with_file_columns else None,
        row_index_name="file_row_number" if with_file_columns else None,
    )
    return lf.select([*t.column_names, *extra])


def scan(root: Path | str, table_name: str, date: dt.date | None = None) -> pl.LazyFrame:
    """The one polars reader of the lake: a LazyFrame with the table's full schema (empty if no files).

    `date` reads one UTC date's partition only: the glob names it, so polars lists that folder alone instead of
    pruning every file of the table (a year of derived tables and open days is thousands of files).
    """
    t = schema.table(table_name)
    glob = t.file_glob if date is None else t.file_glob.replace("date=*", f"date={date.isoformat()}", 1)
    if isinstance(root := lake_url.parse(root), lake_url.S3Location):
        return scan_objects(table_name, lake_url.glob(root / table_name, glob))
    if not has_data(root, table_name) or (date is not None and next(Path(root, table_name).glob(glob), None) is None):
        return pl.LazyFrame(schema=t.polars_schema)
    lf = pl.scan_parquet(
        Path(root, table_name, glob),
        hive_partitioning=True,
        hive_schema={"date": pl.Date},
        missing_columns="insert",
        schema=t.file_schema,
    )
    return lf.select(t.column_names)
