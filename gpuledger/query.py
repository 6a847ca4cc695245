"""The one DuckDB helper: every sql/ view loaded, parameters passed separately, a time limit, one result type.

Every reader of the lake goes through it: `gpuledger sql` and the FOCUS export (Lake), the dashboards (a Snapshot,
the in-memory mode below, filled by a Lake; and a few questions on a Lake), the webhook's decision table (Lake), and
the tests. `gpuledger views` prints its script (views_script), for an analyst's own DuckDB session. The analytics
and compaction write the lake with polars and are not readers here.

Every query runs under gpuledger.query_guard: read-only (DuckDB locked to the lake's folder, only SELECT runs), a
time limit, the result streamed in record batches (`stream`; `execute` collects them into one Result). On an
object-store lake (s3://bucket/prefix) no folder at all is allowed: DuckDB reads no file, local or remote (nor
could it: no httpfs), and each table's view reads a relation registered under `_lake_<table>`, a polars scan of
the objects lake.table_files lists under the lake's prefix (DuckDB pushes its projections and filters into the
scan). So the lake is all it can read there too.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from gpuledger import schema
from gpuledger.errors import QueryError
from gpuledger.lake import has_data, scan_files, table_files
from gpuledger.lake_check import verify_file
from gpuledger.query_guard import Projection, Stream, guarded, lock_down
from gpuledger.schema_sql import duckdb_type, render, with_file_columns
from gpuledger.store import LakeRef, Store, open_store

LAKE_VARIABLE = "gpuledger_lake"
_REGISTERED = re.compile(r"registered as '_lake_(\w+)'")
_CONVERSION = "Conversion Error"  # DuckDB's text for a ConversionException (tests/core/test_quarantine.py pins it)
# Rows per record batch of a streamed result: 100,000 rows of the widest view (jobs, 23 columns) are ~50 MB.
BATCH_ROWS = 100_000


def sql_files() -> dict[str, str]:
    """View name -> SQL text, raw tables first (derived views select from them)."""
    files = {p.name[:-4]: p.read_text() for p in resources.files("gpuledger.sql").iterdir() if p.name.endswith(".sql")}
    order = [n for n in schema.TABLES if n in files] + sorted(n for n in files if n not in schema.TABLES)
    return {n: files[n] for n in order}


def _empty_view(name: str) -> str:
    cols = ", ".join(f'CAST(NULL AS {duckdb_type(c.dtype)}) AS "{c.name}"' for c in schema.table(name).columns)
    return f"CREATE OR REPLACE VIEW {name} AS SELECT {cols} WHERE false"


def views_script(root: LakeRef) -> str:
    """One SQL script defining every view over the lake at `root`, for a plain DuckDB session: `.read` it in the
    duckdb CLI, or `con.execute(script)` in Python. A raw table with no files yet gets an empty typed view, as in
    Lake (DuckDB refuses a view over a glob that matches nothing).

    The same views and the same time zone as Lake, from the same files; not its guard or time limit, which are
    gpuledger's own sessions' rules: the script runs in the analyst's session, under their settings (where a COPY
    of a result to their own file is theirs to run), and gpuledger runs no query with it.

    On an object-store lake the views read `s3://` globs, which the analyst's DuckDB reads with its httpfs
    extension and an S3 secret (a template is in the script's head; gpuledger's own sessions cannot load it)."""
    root = open_store(root)
    quoted = str(root).replace("'", "''")
    parts = [
        f"-- Every gpuledger view over {root}, made by `gpuledger views`.",
        "-- Make it again when a table gets its first files (until then its view is empty).",
    ]
    parts += root.views_script_notes()
    parts += [
        "SET TimeZone = 'UTC';",
        f"SET VARIABLE {LAKE_VARIABLE} = '{quoted}';",
    ]
    for name, text in sql_files().items():
        empty = name in schema.TABLES and not has_data(root, name)
        parts.append(_empty_view(name) + ";" if empty else text.rstrip())
    return "\n".join(parts) + "\n"


def require_lake(root: LakeRef) -> Store:
    """The lake's Store, if it holds a lake (or an empty one, nothing written to it yet); else LakeError.

    Without it a mistyped --lake, or a command run from another folder, reads as an empty lake: 0 rows, no word;
    an unreachable store, bad credentials or a missing bucket is one line naming which before any view is bound."""
    store = open_store(root)
    store.require()
    return store


@dataclass
class Result:
    columns: list[str]
    frame: pl.DataFrame
    truncated: bool = False  # more rows existed than the limit asked for

    @property
    def rows(self) -> list[tuple]:
        return self.frame.rows()


def _collect(stream: Stream, limit: int | None) -> Result:
    """The stream's rows as one Result: at most `limit` of them, read one row past it to tell truncation."""
    batches, n = [], 0
    for batch in stream:
        batches.append(batch)
        n += batch.num_rows
        if limit is not None and n > limit:
            break
    frame = pl.from_arrow(pa.Table.from_batches(batches, schema=stream.schema))
    truncated = limit is not None and frame.height > limit
    return Result(stream.columns, frame.head(limit) if truncated else frame, truncated)


# A query that reads the catalog (which views exist, their columns) needs every view defined, not only those named.
_CATALOG = re.compile(r"\b(duckdb_\w+|information_schema|pg_catalog|sqlite_master)\b|^\s*show\b", re.I | re.M)


def _names_in(text: str, names: set[str]) -> set[str]:
    """The view names a SQL text uses, comments and string literals left out."""
    text = re.sub(r"'(?:[^']|'')*'", "''", re.sub(r"--[^\n]*", "", text))
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text.lower()))
    return names & words


class _Reader:
    """What Lake and Snapshot share: `execute` is their `stream`, collected."""

    def stream(self, sql, params=None, timeout_s=60.0, batch_rows=BATCH_ROWS, project=None):  # pragma: no cover
        raise NotImplementedError

    def execute(
        self, sql: str, params: list | dict | None = None, limit: int | None = None, timeout_s: float | None = 60.0
    ) -> Result:
        """Run read-only SQL (one or more statements; the last one's rows are returned, at most `limit`)."""
        batch_rows = min(limit + 1, BATCH_ROWS) if limit is not None else BATCH_ROWS
        with self.stream(sql, params, timeout_s, batch_rows) as rows:
            return _collect(rows, limit)


class Lake(_Reader):
    """A DuckDB connection over one lake root, with the views of sql/ defined on it as queries need them.

    A view is defined the first time a query names it (with the views it reads), not up front: DuckDB binds a
    view over a glob by reading the schema of every file it matches, and a year of a 125-node fleet is 45,000
    files per raw table (~28 s to define them all, for a query that reads one small table). A query that reads
    the catalog (duckdb_views(), information_schema, SHOW) gets every view first.

    `root` may be an object-store lake (s3://bucket/prefix): there each query lists the tables it reads again (as
    a glob is listed again on a local lake) and reads them through registered polars scans (lake.scan_files).
    """

    def __init__(
        self,
        root: LakeRef,
        threads: int | None = None,
        variables: dict[str, str] | None = None,
    ):
        """`variables`: DuckDB variables the views read (e.g. focus_provider_name, from the config's [finops])."""
        self.root = open_store(root)
        # A lake in a folder DuckDB reads itself (the views' globs); any other has its tables registered as polars
        # scans of the files the Store lists, and DuckDB is allowed no folder at all.
        self._folder = self.root.folder
        self.con = duckdb.connect(":memory:")
        self.con.execute("SET TimeZone = 'UTC'")
        self.con.execute("SET enable_progress_bar = false")  # it would write into the CLI's output
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")
        self.con.execute(f"SET VARIABLE {LAKE_VARIABLE} = ?", [str(self.root)])
        for name, value in (variables or {}).items():
            if not name.isidentifier():
                raise QueryError(f"variable name {name!r} is not an identifier")
            self.con.execute(f"SET VARIABLE {name} = ?", [value])
        self._files = sql_files()
        self._parser = duckdb.connect(":memory:")
        # An object-store lake allows no folder: its tables are registered relations, never files DuckDB opens.
        for con, dirs in ((self.con, [str(self._folder)] if self._folder else []), (self._parser, [])):
            lock_down(con, dirs)
        # The views each one reads (a table's view reads files only).
        self._reads = {
            n: set() if n in schema.TABLES else self._used(re.split(r"\bVIEW\s+\w+\s+AS\b", t, maxsplit=1)[-1]) - {n}
            for n, t in self._files.items()
        }
        self._loaded: dict[str, bool] = {}  # view -> defined as an empty view (its table had no files yet)

    def load_views(self, names: set[str] | None = None) -> None:
        """Define the views `names` (all when None) and those they read, in sql_files() order (tables first);
        a table with no files yet gets an empty view of the right shape. Views already defined over data stay."""
        want = set(self._files) if names is None else self._with_reads(names)
        for name, text in self._files.items():
            if name not in want:
                continue
            if self._folder is None and name in schema.TABLES:
                self._load_registered(name)
                continue
            if self._loaded.get(name) is False:
                # A view over a glob that now matches nothing fails every query ("No files found"): a table emptied
                # since (its files set aside, a retention) reads as no rows, as on an object store.
                if name not in schema.TABLES or has_data(self.root, name):
                    continue
                del self._loaded[name]
            try:
                if name in schema.TABLES and not has_data(self.root, name):
                    if name not in self._loaded:
                        self.con.execute(_empty_view(name))
                        self._loaded[name] = True
                else:
                    self.con.execute(text)
                    self._loaded[name] = False
            except duckdb.Error as e:
                raise QueryError(f"cannot load view {name} from sql/{name}.sql: {_first_line(e)}") from e

    def _load_registered(self, name: str) -> None:
        """(Re)register `_lake_<name>` over the objects one listing finds now (honouring compaction's merge records:
        lake.table_files), and define the view over it once, the generator's view with that relation as its source
        (schema_sql.render); an empty typed view while the table has no objects."""
        files = table_files(self.root, name)
        if not files and self._loaded.get(name) is not False:
            if name not in self._loaded:
                self.con.execute(_empty_view(name))
                self._loaded[name] = True
            return
        try:
            self.con.register(f"_lake_{name}", scan_files(self.root, name, files, with_file_columns(name)))
            if self._loaded.get(name) is not False:
                self.con.execute(render(name, source=f"_lake_{name}"))
                self._loaded[name] = False
        except duckdb.Error as e:
            raise QueryError(f"cannot load view {name} from sql/{name}.sql over {self.root}: {_first_line(e)}") from e

    def _used(self, sql: str) -> set[str]:
        """The views a query names: DuckDB's parser where it can tell without binding, else every view name that
        appears in it as a word outside comments and strings (at worst a view defined for nothing)."""
        try:
            # An empty catalog: asked on the connection holding the views, DuckDB names the tables inside them.
            return {t.lower() for t in self._parser.get_table_names(sql)} & set(self._files)
        except duckdb.Error:
            return _names_in(sql, set(self._files))

    def _views_for(self, sql: str) -> None:
        self.load_views(None if _CATALOG.search(sql) else self._used(sql))

    @contextlib.contextmanager
    def stream(
        self,
        sql: str,
        params: list | dict | None = None,
        timeout_s: float | None = 60.0,
        batch_rows: int = BATCH_ROWS,
        project: Projection | None = None,
    ) -> Iterator[Stream]:
        """Run read-only SQL as `execute` does, its last statement's rows as a Stream of record batches, read while
        the block runs (the time limit counts it too).

        The whole of it (views bound, files read, the stream taken) is one read of the Store (Store.reading: a lock
        on disk, so a writer of the lake waits for the block to end; an object store needs none, its objects are
        never replaced, and a compaction deletes inputs only well after their merged object)."""
        with self.root.reading():
            self._views_for(sql)
            try:
                with guarded(self.con, self._parser, sql, params, timeout_s, batch_rows, project) as rows:
                    yield rows
            except QueryError as e:
                # A registered scan (a lake DuckDB reads no file of) failing: polars does not say which file.
                m = _REGISTERED.search(str(e))
                if m is not None:
                    raise self._damaged([m.group(1)], e) from e
                # A view's cast to its table's type failing: a file of another schema among its files (DuckDB's
                # ConversionException, whose type is lost when it comes through the Arrow stream as an OSError).
                if str(e).startswith(_CONVERSION):
                    raise self._damaged(sorted(self._with_reads(self._used(sql)) & set(schema.TABLES)), e) from e
                raise

    def _with_reads(self, names: Iterable[str]) -> set[str]:
        """The views `names` and every view they read, however deep."""
        seen, stack = set(), list(names)
        while stack:
            n = stack.pop()
            if n not in seen:
                seen.add(n)
                stack.extend(self._reads[n])
        return seen

    def _damaged(self, tables: list[str], e: QueryError) -> QueryError:
        """The query's failure, naming the first file of `tables` that fails its check (each read whole: only on
        this failing path)."""
        for table in tables:
            for key in table_files(self.root, table):
                why = verify_file(self.root, table, key)
                if why is not None:
                    return QueryError(
                        f"{table}: {self.root.url(key)} {why} (`gpuledger analyze` rebuilds a derived table's file, "
                        "`gpuledger compact` sets a raw one aside)"
                    )
        return QueryError(_first_line(e))

    def close(self) -> None:
        self.con.close()
        self._parser.close()

    def __enter__(self) -> "Lake":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Snapshot(_Reader):
    """The helper's in-memory mode: tables copied out of the lake into one in-memory DuckDB database, read with
    Lake's guard: only SELECT (or EXPLAIN [ANALYZE] of one) runs, under the same time limit, in UTC, with the same
    lockdown (here no folder at all is allowed), and the same Result.

    For a reader that asks many small questions of a few tables: the dashboards, where a query on the lake's views
    pays 20-40 ms to list and bind a year of Parquet files and the same question in memory a few ms.

    Many threads read one at once: each query runs on a cursor of its own (a DuckDB connection is not for two
    threads at once; a cursor is a connection of its own to the same database, and the time limit interrupts only
    its query). To replace it with a newer one, its owner stops handing it out and calls retire(): it closes when
    the last reader holding it (acquire() ... release()) is done, never under a running query."""

    def __init__(self, tables: Iterable[tuple[str, pl.DataFrame]]):
        """`tables`: (name, frame) pairs, taken one at a time (a generator need not hold them all at once)."""
        self._con = duckdb.connect(":memory:")
        try:
            # GLOBAL: a cursor is a session of its own and starts from the global settings (else the host's zone).
            self._con.execute("SET GLOBAL TimeZone = 'UTC'")
            for name, frame in tables:
                if not name.isidentifier():
                    raise QueryError(f"snapshot table name {name!r} is not an identifier")
                self._con.register("_load", frame)
                self._con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM _load')
                self._con.unregister("_load")
            lock_down(self._con, [])
        except BaseException:
            self._con.close()
            raise
        # Guards the parent connection (cursor(), close()) and the count of readers holding this snapshot.
        self._lock = threading.Lock()
        self._readers = 0
        self._retired = False
        self.closed = False

    def acquire(self) -> None:
        """Hold it for a reader: it stays open until release(), even if retired meanwhile."""
        with self._lock:
            if self._retired:
                raise QueryError("this snapshot was replaced: take the current one")
            self._readers += 1

    def release(self) -> None:
        with self._lock:
            self._readers -= 1
            last = self._retired and self._readers == 0
        if last:
            self._close()

    def retire(self) -> None:
        """No new reader; close when the readers holding it are done (now, if none)."""
        with self._lock:
            self._retired = True
            last = self._readers == 0
        if last:
            self._close()

    @contextlib.contextmanager
    def stream(
        self,
        sql: str,
        params: list | dict | None = None,
        timeout_s: float | None = 60.0,
        batch_rows: int = BATCH_ROWS,
        project: Projection | None = None,
    ) -> Iterator[Stream]:
        """As Lake.stream, on the snapshot's tables; the caller holds it (acquire)."""
        with self._lock:
            if self.closed:
                raise QueryError("this snapshot is closed")
            cur = self._con.cursor()
        try:
            with guarded(cur, cur, sql, params, timeout_s, batch_rows, project) as rows:
                yield rows
        finally:
            with self._lock:
                cur.close()

    def _close(self) -> None:
        with self._lock:
            if not self.closed:
                self.closed = True
                self._con.close()


def _first_line(e: Exception) -> str:
    """DuckDB's message without the SQL context it appends: the view's own text is not the user's query, and the
    first line names what failed (a file that is not Parquet, cut short)."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
