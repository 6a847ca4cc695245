"""The one DuckDB helper: every sql/ view loaded, parameters passed separately, a time limit, one result type.

Every reader of the lake goes through it: `gpuledger sql` and the FOCUS export (Lake), the dashboards (a Snapshot,
the in-memory mode below, filled by a Lake; and a few questions on a Lake), the webhook's decision table (Lake), and
the tests. `gpuledger views` prints its script (views_script), for an analyst's own DuckDB session. The analytics
and compaction write the lake with polars and are not readers here. Read-only, in two layers:
- DuckDB itself: external access off with only the lake's folder allowed, extensions neither installed nor loaded,
  and the configuration locked. Nothing outside the lake can be read or written, by any statement, and no setting
  (these included) can be changed. On an object-store lake (s3://bucket/prefix) no folder at all is allowed: DuckDB
  reads no file, local or remote (nor could it: no httpfs), and each table's view reads a relation registered
  under `_lake_<table>`, a polars scan of the objects lake.table_files lists under the lake's prefix (DuckDB
  pushes its projections and filters into the scan). So the lake is all it can read there too.
- Inside the lake, DuckDB cannot tell a read from a write (allowed_directories grants both: with the lake allowed,
  `COPY ... TO '<a lake file>'` rewrites it). So only SELECT runs, alone or under EXPLAIN [ANALYZE] (which runs the
  statement it explains): COPY, EXPORT and ATTACH, the statements that name a file to write, never reach DuckDB.
"""

from __future__ import annotations

import datetime as dt
import heapq
import itertools
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from gpuledger import lake_url, schema
from gpuledger.errors import LakeError, QueryError, UsageError
from gpuledger.lake import has_data, scan_objects, table_files
from gpuledger.lake_lock import reading

LAKE_VARIABLE = "gpuledger_lake"
# Extensions off before external access (a locked configuration with autoload on would still load one a query
# names); the lake's folder is allowed before external access goes off (DuckDB refuses it after).
_LOCKDOWN = (
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET allow_community_extensions = false",
    "SET allowed_directories = $dirs",
    "SET enable_external_access = false",
    "SET lock_configuration = true",
)
# EXPLAIN's own words, before the statement it explains: ANALYZE, or options in parentheses, with only white space
# between them (a comment there is left to the statement, which DuckDB's own parser then reads: see _read_only_text).
_GAP = r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*"
_EXPLAIN = re.compile(rf"^{_GAP}EXPLAIN\b(?:\s*ANALY[SZ]E\b|\s*\([^)'\"/\-;]*\))*\s*", re.I | re.S)

_DUCK_TYPES = {
    pl.String: "VARCHAR",
    pl.Int32: "INTEGER",
    pl.Int64: "BIGINT",
    pl.Float32: "FLOAT",
    pl.Float64: "DOUBLE",
    pl.Boolean: "BOOLEAN",
    pl.Date: "DATE",
}


def duckdb_type(dtype: pl.DataType) -> str:
    """The DuckDB type a polars column type reads back as (used by the schema/SQL agreement test too)."""
    if dtype == schema.UTC_US:
        return "TIMESTAMP WITH TIME ZONE"
    if dtype == schema.LABELS:
        return 'STRUCT("key" VARCHAR, "value" VARCHAR)[]'
    if isinstance(dtype, pl.List):
        return duckdb_type(dtype.inner) + "[]"
    if isinstance(dtype, pl.Decimal):
        return f"DECIMAL({dtype.precision},{dtype.scale})"
    return _DUCK_TYPES[dtype.base_type()]


# A table view's read of its files, as gpuledger/schema_sql.py writes it: on an object-store lake it reads the
# registered `_lake_<table>` relation instead (gpuledger.lake.scan_objects; polars, not DuckDB over fsspec: 100x
# faster over 30 objects, docs/design/16-object-store.md), the rest of the view's SQL unchanged.
_TABLE_READ = re.compile(r"read_parquet\(getvariable\('gpuledger_lake'\) \|\| '/(\w+)/[^']*',([^)]*)\)")


def sql_files() -> dict[str, str]:
    """View name -> SQL text, raw tables first (derived views select from them)."""
    files = {p.name[:-4]: p.read_text() for p in resources.files("gpuledger.sql").iterdir() if p.name.endswith(".sql")}
    order = [n for n in schema.TABLES if n in files] + sorted(n for n in files if n not in schema.TABLES)
    return {n: files[n] for n in order}


def _empty_view(name: str) -> str:
    cols = ", ".join(f'CAST(NULL AS {duckdb_type(c.dtype)}) AS "{c.name}"' for c in schema.table(name).columns)
    return f"CREATE OR REPLACE VIEW {name} AS SELECT {cols} WHERE false"


def views_script(root: Path | str | lake_url.S3Location) -> str:
    """One SQL script defining every view over the lake at `root`, for a plain DuckDB session: `.read` it in the
    duckdb CLI, or `con.execute(script)` in Python. A raw table with no files yet gets an empty typed view, as in
    Lake (DuckDB refuses a view over a glob that matches nothing).

    The same views and the same time zone as Lake, from the same files; not its guard or time limit, which are
    gpuledger's own sessions' rules: the script runs in the analyst's session, under their settings (where a COPY
    of a result to their own file is theirs to run), and gpuledger runs no query with it.

    On an object-store lake the views read `s3://` globs, which the analyst's DuckDB reads with its httpfs
    extension and an S3 secret (a template is in the script's head; gpuledger's own sessions cannot load it)."""
    root = lake_url.parse(root).resolve()
    quoted = str(root).replace("'", "''")
    parts = [
        f"-- Every gpuledger view over {root}, made by `gpuledger views`.",
        "-- Make it again when a table gets its first files (until then its view is empty).",
    ]
    if isinstance(root, lake_url.S3Location):
        s = lake_url.aws_settings()
        endpoint = (s.endpoint or "").split("://")[-1].rstrip("/")
        parts += [
            "-- An object-store lake: DuckDB reads it with httpfs and an S3 secret (keys left out here), e.g.",
            "--   INSTALL httpfs; LOAD httpfs;",
            "--   CREATE SECRET (TYPE s3, KEY_ID '...', SECRET '...'"
            + (f", REGION '{s.region}'" if s.region else "")
            + (f", ENDPOINT '{endpoint}', URL_STYLE 'path'" if endpoint else "")
            + (", USE_SSL false" if (s.endpoint or "").startswith("http://") else "")
            + ");",
            "-- A glob does not follow compaction's merge records: a query in the moment between a merged object",
            "-- and its inputs' deletion counts that day twice (gpuledger sql does not: it lists the lake itself).",
        ]
    parts += [
        "SET TimeZone = 'UTC';",
        f"SET VARIABLE {LAKE_VARIABLE} = '{quoted}';",
    ]
    for name, text in sql_files().items():
        empty = name in schema.TABLES and not has_data(root, name)
        parts.append(_empty_view(name) + ";" if empty else text.rstrip())
    return "\n".join(parts) + "\n"


# gpuledger's own folders in a lake (not any "_" name: a project folder with __pycache__/ is no lake).
_OWN_FOLDERS = {"_state", "_spool", "_sim"}


def require_lake(root: Path | str | lake_url.S3Location) -> Path | lake_url.S3Location:
    """`root`, if it holds a lake (or is an empty folder, a lake nothing has been written to yet); else LakeError.

    Without it a mistyped --lake, or a command run from another folder, reads as an empty lake: 0 rows, no word.
    An object-store lake: one LIST of its prefix, so an unreachable endpoint, bad credentials or a missing bucket
    is one line naming which (lake_url.preflight) before any view is bound.
    """
    if isinstance(root := lake_url.parse(root), lake_url.S3Location):
        lake_url.preflight(root)
        return root
    root = Path(root)
    if not root.exists():
        raise LakeError(f"no lake at {root}: the folder does not exist (give --lake, $GPULEDGER_LAKE or [lake] path)")
    if not root.is_dir():
        raise LakeError(f"no lake at {root}: it is a file, not a folder")
    # A lake holds table folders and gpuledger's own _state, _spool, _sim; a folder holding none of them is not one.
    names = [p.name for p in root.iterdir()]
    if names and not any(n in schema.TABLES or n in _OWN_FOLDERS for n in names):
        raise LakeError(f"no lake at {root}: the folder holds none of the lake's tables (e.g. gpu_samples/, jobs/)")
    return root


def _utc_timestamp(text: str) -> dt.datetime:
    t = dt.datetime.fromisoformat(text)
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)  # the lake's times are UTC, so is a bare one


_BOOLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _bool(text: str) -> bool:
    return _BOOLS[text.lower()]


# --param NAME:TYPE=VALUE: what each TYPE makes of the value (DuckDB binds a date as DATE, an aware time as
# TIMESTAMP WITH TIME ZONE).
PARAM_TYPES = {
    "str": str,
    "int": int,
    "float": float,
    "bool": _bool,
    "date": dt.date.fromisoformat,
    "timestamp": _utc_timestamp,
}


# What the untyped guess takes for a number: plain decimal digits only. Python's int() and float() also take
# "1_000", "nan", "inf" and other scripts' digits, so a job id such as 2023_01 would have matched 202301.
_INT = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?[0-9]+\.[0-9]+(?:[eE][-+]?[0-9]+)?")


def _guess(value: str) -> Any:
    if _INT.fullmatch(value):
        return int(value)
    if _DECIMAL.fullmatch(value):
        return float(value)
    return value


def parse_param(text: str) -> tuple[str, Any]:
    """`NAME=VALUE` (a whole number or a decimal becomes one, anything else a string) or `NAME:TYPE=VALUE` with a
    TYPE of PARAM_TYPES; UsageError naming the parameter and the problem."""
    spec, sep, value = text.partition("=")
    name, colon, kind = spec.partition(":")
    if not sep or not name.isidentifier():
        raise UsageError(f"--param {text!r}: expected NAME=VALUE or NAME:TYPE=VALUE")
    if not colon:
        return name, _guess(value)
    if kind not in PARAM_TYPES:
        raise UsageError(f"--param {text!r}: unknown type {kind!r}; one of {', '.join(PARAM_TYPES)}")
    try:
        return name, PARAM_TYPES[kind](value)
    except (ValueError, KeyError):
        hint = {"bool": f" (one of {', '.join(_BOOLS)})", "date": " (YYYY-MM-DD)", "timestamp": " (ISO-8601)"}
        raise UsageError(f"--param {text!r}: {value!r} is not a valid {kind}{hint.get(kind, '')}") from None


@dataclass
class Result:
    columns: list[str]
    frame: pl.DataFrame
    truncated: bool = False  # more rows existed than the limit asked for

    @property
    def rows(self) -> list[tuple]:
        return self.frame.rows()


# A query that reads the catalog (which views exist, their columns) needs every view defined, not only those named.
_CATALOG = re.compile(r"\b(duckdb_\w+|information_schema|pg_catalog|sqlite_master)\b|^\s*show\b", re.I | re.M)


def _names_in(text: str, names: set[str]) -> set[str]:
    """The view names a SQL text uses, comments and string literals left out."""
    text = re.sub(r"'(?:[^']|'')*'", "''", re.sub(r"--[^\n]*", "", text))
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text.lower()))
    return names & words


class _TimeLimits:
    """One thread that stops every query past its time limit. A threading.Timer per query started a thread per
    query: 0.1-1 ms each on a busy 2-core host, a page's worth of milliseconds over the dashboards' ten questions."""

    def __init__(self):
        self._wake = threading.Condition()
        self._due: list[list] = []  # heap of [deadline (monotonic s), order, interrupt or None once cancelled]
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def start(self, timeout_s: float, interrupt) -> list:
        entry = [time.monotonic() + timeout_s, next(self._order), interrupt]
        with self._wake:
            heapq.heappush(self._due, entry)
            if self._thread is None or not self._thread.is_alive():  # started on first use, not at import
                self._thread = threading.Thread(target=self._run, name="gpuledger-query-time-limits", daemon=True)
                self._thread.start()
            if self._due[0] is entry:
                self._wake.notify()
        return entry

    def cancel(self, entry: list) -> None:
        with self._wake:
            entry[2] = None

    def _run(self) -> None:
        while True:
            with self._wake:
                while True:
                    while self._due and self._due[0][2] is None:
                        heapq.heappop(self._due)
                    if not self._due:
                        self._wake.wait()
                        continue
                    wait_s = self._due[0][0] - time.monotonic()
                    if wait_s <= 0:
                        interrupt = heapq.heappop(self._due)[2]
                        break
                    self._wake.wait(wait_s)
            try:
                interrupt()  # outside the lock: a query finishing meanwhile must be able to cancel
            except duckdb.Error:
                pass  # its query ended and its cursor closed between the pop and this call: nothing left to stop


_TIME_LIMITS = _TimeLimits()


def _guarded(con, parser, sql: str, params: list | dict | None, limit: int | None, timeout_s: float | None) -> Result:
    """Run read-only SQL on `con` (a connection, or a cursor of one) under the time limit: the last statement's
    rows. `parser`: a connection no query can change, to read the statement inside an EXPLAIN."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as e:
        raise QueryError(f"cannot parse query: {e}") from e
    if not statements:
        raise QueryError("empty query")
    texts = [_read_only_text(s, parser) for s in statements]
    # interrupt() stops what runs on this connection (or cursor) only, not its siblings.
    limit_entry = _TIME_LIMITS.start(timeout_s, con.interrupt) if timeout_s else None
    try:
        for text in texts[:-1]:
            con.execute(text, params)
        rel = con.sql(texts[-1], params=params)
        columns = list(rel.columns)
        # DuckDB 2 names it to_arrow_reader; 1.x record_batch.
        to_reader = getattr(rel, "to_arrow_reader", None) or rel.record_batch
        reader = to_reader(min(limit + 1, 100_000) if limit is not None else 100_000)
        batches, n = [], 0
        for batch in reader:
            batches.append(batch)
            n += batch.num_rows
            if limit is not None and n > limit:
                break
    except duckdb.InterruptException as e:
        raise QueryError(f"query stopped after the {timeout_s:g} s time limit") from e
    except duckdb.PermissionException as e:
        raise QueryError(f"refused: queries read the lake only (no other files, extensions or network): {e}") from e
    except duckdb.Error as e:
        raise QueryError(str(e).strip()) from e
    finally:
        if limit_entry:
            _TIME_LIMITS.cancel(limit_entry)
    frame = pl.from_arrow(pa.Table.from_batches(batches, schema=reader.schema))
    truncated = limit is not None and frame.height > limit
    if truncated:
        frame = frame.head(limit)
    return Result(columns, frame, truncated)


def _read_only_text(statement, parser) -> str:
    """The text to run for a statement that DuckDB's parser calls a SELECT, or an EXPLAIN [ANALYZE] of one.

    An EXPLAIN is rebuilt from the SELECT the parser found inside it, never run as the user wrote it: our
    reading of EXPLAIN's prefix (comments, options) cannot be trusted to match DuckDB's lexer (nested
    `/* /* */ */`, a `--` comment ended by CR), and a mismatch had `EXPLAIN ANALYZE ... COPY` rewrite a lake file.
    The rebuilt text is a keyword, a newline and a statement the parser read on its own, so it lexes the same.
    EXPLAIN's options, such as (FORMAT json), are dropped."""
    if statement.type == duckdb.StatementType.SELECT:
        return statement.query
    kind = statement.type.name
    if statement.type == duckdb.StatementType.EXPLAIN:
        prefix = _EXPLAIN.match(statement.query)
        try:
            (explained,) = parser.extract_statements(statement.query[prefix.end() :]) if prefix else ()
        except (duckdb.Error, ValueError):
            explained = None
        if explained is not None and explained.type == duckdb.StatementType.SELECT:
            analyze = re.search(r"\bANALY[SZ]E\b", prefix.group(0), re.I) is not None
            return ("EXPLAIN ANALYZE\n" if analyze else "EXPLAIN\n") + explained.query
        kind = explained.type.name if explained is not None else "EXPLAIN of unclear text"
    raise QueryError(
        f"only read-only queries are allowed (SELECT, or EXPLAIN [ANALYZE] of one); got a {kind} "
        f"statement: {statement.query.strip()[:80]}"
    )


class Lake:
    """A DuckDB connection over one lake root, with the views of sql/ defined on it as queries need them.

    A view is defined the first time a query names it (with the views it reads), not up front: DuckDB binds a
    view over a glob by reading the schema of every file it matches, and a year of a 125-node fleet is 45,000
    files per raw table (~28 s to define them all, for a query that reads one small table). A query that reads
    the catalog (duckdb_views(), information_schema, SHOW) gets every view first.

    `root` may be an object-store lake (s3://bucket/prefix): there each query lists the tables it reads again (as
    a glob is listed again on a local lake) and reads them through registered polars scans (lake.scan_objects).
    """

    def __init__(
        self,
        root: Path | str | lake_url.S3Location,
        threads: int | None = None,
        variables: dict[str, str] | None = None,
    ):
        """`variables`: DuckDB variables the views read (e.g. focus_provider_name, from the config's [finops])."""
        self.root = lake_url.parse(root).resolve()
        self._s3 = isinstance(self.root, lake_url.S3Location)
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
        for con, dirs in ((self.con, [] if self._s3 else [str(self.root)]), (self._parser, [])):
            for setting in _LOCKDOWN:
                con.execute(setting, {"dirs": dirs} if "$dirs" in setting else None)
        # The views each one reads (a table's view reads files only).
        self._reads = {
            n: set() if n in schema.TABLES else self._used(re.split(r"\bVIEW\s+\w+\s+AS\b", t, maxsplit=1)[-1]) - {n}
            for n, t in self._files.items()
        }
        self._loaded: dict[str, bool] = {}  # view -> defined as an empty view (its table had no files yet)

    def load_views(self, names: set[str] | None = None) -> None:
        """Define the views `names` (all when None) and those they read, in sql_files() order (tables first);
        a table with no files yet gets an empty view of the right shape. Views already defined over data stay."""
        want = set(self._files) if names is None else set()
        stack = list(names or ())
        while stack:
            n = stack.pop()
            if n not in want:
                want.add(n)
                stack.extend(self._reads[n])
        for name, text in self._files.items():
            if name not in want:
                continue
            if self._s3 and name in schema.TABLES:
                self._load_s3_table(name, text)
                continue
            if self._loaded.get(name) is False:
                continue
            try:
                if name in schema.TABLES and not has_data(self.root, name):
                    if name not in self._loaded:
                        self.con.execute(_empty_view(name))
                        self._loaded[name] = True
                else:
                    self.con.execute(text)
                    self._loaded[name] = False
            except duckdb.Error as e:
                raise QueryError(f"cannot load view {name} from sql/{name}.sql: {e}") from e

    def _load_s3_table(self, name: str, text: str) -> None:
        """(Re)register `_lake_<name>` over the objects one listing finds now (honouring compaction's merge records:
        lake.table_files), and define the view over it once; an empty typed view while the table has no objects."""
        files = table_files(self.root, name)
        if not files and self._loaded.get(name) is not False:
            if name not in self._loaded:
                self.con.execute(_empty_view(name))
                self._loaded[name] = True
            return
        read = _TABLE_READ.search(text)
        if read is None or read.group(1) != name:  # the generator and this pattern disagree: say so, not misread
            raise QueryError(f"sql/{name}.sql does not read its files as gpuledger/schema_sql.py writes them")
        try:
            self.con.register(f"_lake_{name}", scan_objects(name, files, "filename = true" in read.group(2)))
            if self._loaded.get(name) is not False:
                self.con.execute(_TABLE_READ.sub(f"_lake_{name}", text, count=1))
                self._loaded[name] = False
        except duckdb.Error as e:
            raise QueryError(f"cannot load view {name} from sql/{name}.sql over {self.root}: {e}") from e

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

    def execute(
        self, sql: str, params: list | dict | None = None, limit: int | None = None, timeout_s: float | None = 60.0
    ) -> Result:
        """Run read-only SQL (one or more statements; the last one's rows are returned).

        The whole of it (views bound, files read) holds the lake's read lock: no file is replaced or removed
        under it (gpuledger.lake_lock). An object-store lake has no such lock: its objects are never replaced, and
        a compaction deletes inputs only after their merged object is listed (lake_url.live)."""
        if self._s3:
            return self._execute(sql, params, limit, timeout_s)
        with reading(self.root):
            return self._execute(sql, params, limit, timeout_s)

    def _execute(self, sql: str, params: list | dict | None, limit: int | None, timeout_s: float | None) -> Result:
        self._views_for(sql)
        return _guarded(self.con, self._parser, sql, params, limit, timeout_s)

    def close(self) -> None:
        self.con.close()
        self._parser.close()

    def __enter__(self) -> "Lake":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Snapshot:
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
            for setting in _LOCKDOWN:
                self._con.execute(setting, {"dirs": []} if "$dirs" in setting else None)
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

    def execute(
        self, sql: str, params: list | dict | None = None, limit: int | None = None, timeout_s: float | None = 60.0
    ) -> Result:
        """As Lake.execute, on the snapshot's tables; the caller holds it (acquire)."""
        with self._lock:
            if self.closed:
                raise QueryError("this snapshot is closed")
            cur = self._con.cursor()
        try:
            return _guarded(cur, cur, sql, params, limit, timeout_s)
        finally:
            with self._lock:
                cur.close()

    def _close(self) -> None:
        with self._lock:
            if not self.closed:
                self.closed = True
                self._con.close()
