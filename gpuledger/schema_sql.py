"""sql/<table>.sql generated from gpuledger/schema.py, so a column is declared once.

`python -m gpuledger.schema_sql --write` rewrites sql/<table>.sql for every raw or derived table whose view is a
plain read of its files (all of schema.TABLES but CUSTOM). The files stay committed: analysts read them and the
package ships them; tests/core/test_schema_sql.py fails when one differs from `render(table)`.

CUSTOM views keep a hand-written file (the test still checks that it documents every column with its type):
jobs (the latest state per job, ties broken by file and row), nodes (one row per node) and tenants (the latest
run's snapshot). The generator skips them.
"""

import sys
from functools import cache
from pathlib import Path

import duckdb

from gpuledger import schema
from gpuledger.query import duckdb_type

CUSTOM = frozenset({"jobs", "nodes", "tenants"})
SQL_DIR = Path(__file__).resolve().parent.parent / "sql"
COMMAND = "python -m gpuledger.schema_sql --write"


@cache
def _reserved() -> frozenset[str]:
    # Only reserved words need quotes as a column name (end does; start and open do not).
    rows = duckdb.sql("SELECT keyword_name FROM duckdb_keywords() WHERE keyword_category = 'reserved'").fetchall()
    return frozenset(r[0] for r in rows)


def _ident(name: str) -> str:
    return f'"{name}"' if name in _reserved() else name


def render(name: str) -> str:
    """The text of sql/<name>.sql for a plain table: a header, one line per column with `-- TYPE: doc`, and a
    read_parquet over the table's hive-partitioned files (the empty-lake case is query._empty_view's)."""
    t = schema.table(name)
    lines = [
        f"-- {t.name}: {t.grain}.",
        f"-- Time column: {t.time_column} (UTC). Units are in the column names.",
        f"-- Generated from gpuledger/schema.py by `{COMMAND}`: edit schema.py, not this file.",
        "-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';",
        f"CREATE OR REPLACE VIEW {t.name} AS",
        "SELECT",
    ]
    last = len(t.columns) - 1
    for i, c in enumerate(t.columns):
        col = _ident(c.name) + ("" if i == last else ",")
        lines.append(f"    {col:<56} -- {duckdb_type(c.dtype)}: {c.doc}")
    partitions = ", ".join(f"'{p}': {duckdb_type(t.polars_schema[p])}" for p in t.path_columns)
    lines += [
        f"FROM read_parquet(getvariable('gpuledger_lake') || '/{t.name}/{t.file_glob}',",
        f"    hive_partitioning = true, union_by_name = true, hive_types = {{{partitions}}});",
    ]
    return "\n".join(lines) + "\n"


def generated() -> list[str]:
    return [n for n in schema.TABLES if n not in CUSTOM]


def main(argv: list[str]) -> int:
    if argv != ["--write"]:
        print(f"usage: {COMMAND}", file=sys.stderr)
        return 2
    for name in generated():
        (SQL_DIR / f"{name}.sql").write_text(render(name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
