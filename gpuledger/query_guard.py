"""The query helper's guard: what a query may read, which statements run, and for how long.

Read-only, in two layers:
- DuckDB itself (lock_down): external access off with only the given folders allowed (the lake's, or none),
  extensions neither installed nor loaded, no temp folder, and the configuration locked. Nothing outside the lake
  can be read or written, by any statement, and no setting (these included) can be changed. The temp folder is off
  because DuckDB adds it to allowed_directories by itself (`<cwd>/.tmp/` by default), so any file placed there could
  be read; the cost is that a query larger than DuckDB's memory limit fails (one line) instead of spilling to disk.
- Inside the lake, DuckDB cannot tell a read from a write (allowed_directories grants both: with the lake allowed,
  `COPY ... TO '<a lake file>'` rewrites it). So only SELECT runs, alone or under EXPLAIN [ANALYZE] (which runs the
  statement it explains): COPY, EXPORT and ATTACH, the statements that name a file to write, never reach DuckDB.

Every query runs under a time limit (one thread interrupts the queries past theirs), and its result streams out as
Arrow record batches (Stream), so no reader holds more of a result than a batch. Every DuckDB failure, up front
or mid-stream, is a QueryError of one line.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import re
import threading
import time
from collections.abc import Callable, Iterator

import duckdb
import pyarrow as pa

from gpuledger.errors import QueryError

# Extensions off before external access (a locked configuration with autoload on would still load one a query
# names); the temp folder off and the allowed folders set before external access goes off (DuckDB refuses both
# after), and the configuration locked last.
_LOCKDOWN = (
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET allow_community_extensions = false",
    "SET temp_directory = ''",
    "SET allowed_directories = $dirs",
    "SET enable_external_access = false",
    "SET lock_configuration = true",
)

# EXPLAIN's own words, before the statement it explains: ANALYZE, or options in parentheses, with only white space
# between them (a comment there is left to the statement, which DuckDB's own parser then reads: see _read_only_text).
_GAP = r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*"
_EXPLAIN = re.compile(rf"^{_GAP}EXPLAIN\b(?:\s*ANALY[SZ]E\b|\s*\([^)'\"/\-;]*\))*\s*", re.I | re.S)

# A projection of a result's columns, given their names and DuckDB types (DuckDBPyType, its `id` the type's name):
# SQL for DuckDB to run over the result (positional references #1, #2, ...), or None to keep it as it is.
Projection = Callable[[list[str], list], "str | None"]


def lock_down(con: duckdb.DuckDBPyConnection, dirs: list[str]) -> None:
    """Lock `con` to reading `dirs` (and nothing at all when empty), for good."""
    for setting in _LOCKDOWN:
        con.execute(setting, {"dirs": dirs} if "$dirs" in setting else None)


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


def read_only_texts(con, parser, sql: str) -> list[str]:
    """The statements of `sql` to run, each a SELECT or an EXPLAIN [ANALYZE] of one; else QueryError naming the
    first that is not. `parser`: a connection no query can change, to read the statement inside an EXPLAIN."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as e:
        raise QueryError(f"cannot parse query: {e}") from e
    if not statements:
        raise QueryError("empty query")
    return [_read_only_text(s, parser) for s in statements]


def query_error(e: Exception, timeout_s: float | None) -> QueryError:
    """The one-line QueryError for a DuckDB failure. Mid-stream, DuckDB's Arrow reader raises a plain OSError
    carrying DuckDB's message ("INTERRUPT Error: ...", "Conversion Error: ...")."""
    text = str(e).strip()
    if isinstance(e, duckdb.InterruptException) or text.startswith("INTERRUPT Error"):
        return QueryError(f"query stopped after the {timeout_s:g} s time limit")
    if isinstance(e, duckdb.PermissionException):
        return QueryError(f"refused: queries read the lake only (no other files, extensions or network): {text}")
    if isinstance(e, duckdb.OutOfMemoryException) or text.startswith("Out of Memory Error"):
        return QueryError(f"{text.splitlines()[0]} (queries do not spill to disk here: narrow the query)")
    return QueryError(text)


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


class Stream:
    """A query's result as it comes: its column names, then its Arrow record batches (at most `batch_rows` rows
    each; DuckDB computes the next as the last is taken). Iterate once. A failure while fetching (a cast, the time
    limit) is a QueryError."""

    def __init__(self, columns: list[str], reader: pa.RecordBatchReader, timeout_s: float | None):
        self.columns = columns
        self.schema: pa.Schema = reader.schema
        self._reader = reader
        self._timeout_s = timeout_s

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        batches = iter(self._reader)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return
            except (duckdb.Error, OSError) as e:
                # The first line only: DuckDB's "LINE n:" context after it quotes the SQL it ran, the user's query
                # wrapped in the output's projection, not the text the user wrote.
                err = query_error(e, self._timeout_s)
                raise QueryError(str(err).splitlines()[0]) from e
            yield batch


@contextlib.contextmanager
def guarded(
    con,
    parser,
    sql: str,
    params: list | dict | None,
    timeout_s: float | None,
    batch_rows: int,
    project: Projection | None = None,
) -> Iterator[Stream]:
    """Run read-only SQL on `con` (a connection, or a cursor of one): the Stream of the last statement's rows,
    `project`ed if given. The time limit runs from the first statement until the stream is closed, the time taken
    to write it out included."""
    texts = read_only_texts(con, parser, sql)
    # interrupt() stops what runs on this connection (or cursor) only, not its siblings.
    limit_entry = _TIME_LIMITS.start(timeout_s, con.interrupt) if timeout_s else None
    try:
        try:
            for text in texts[:-1]:
                con.execute(text, params)
            rel = con.sql(texts[-1], params=params)
            columns = list(rel.columns)
            projection = project(columns, list(rel.types)) if project else None
            if projection is not None:
                rel = rel.project(projection)
            # DuckDB 2 names it to_arrow_reader; 1.x record_batch.
            reader = (getattr(rel, "to_arrow_reader", None) or rel.record_batch)(batch_rows)
        except duckdb.Error as e:
            raise query_error(e, timeout_s) from e
        yield Stream(columns, reader, timeout_s)
    finally:
        if limit_entry:
            _TIME_LIMITS.cancel(limit_entry)
