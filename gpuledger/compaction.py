"""Merge the many small files of a closed day into one: which days to merge, and the merged rows. How a merge is
made crash-safe is the Store's (a journal and a rename on disk, a merge record and deferred deletes in an object
store: Store.merge).

A day is closed when its date is older than `grace_days` (UTC): no spool flush will add to it (a late flush that
does is merged by the next compaction). Files of the earlier layout (`date=/node=<node>/`, the node in the path
only) are merged into their day whatever its age, with their node written into the rows: after one `compact` the
lake has one layout.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

import polars as pl

from gpuledger import day_layout, schema
from gpuledger.lake_check import quarantine, verify_file
from gpuledger.store import LakeRef, Merge, Store, open_store

_LEGACY_NO_NODE = "_none"  # the earlier layout's folder for rows about no node


@dataclass
class CompactionReport:
    partitions: int = 0
    files_in: int = 0
    files_out: int = 0
    rows: int = 0
    recovered: int = 0  # interrupted compactions finished
    retired: int = 0  # object store: earlier merges whose inputs were deleted now (s3_compaction.KEEP_INPUTS_S)
    quarantined: int = 0  # inputs that failed their check, set aside (gpuledger.lake_check)


def plan(store: Store, table: str, today: dt.date, grace_days: int) -> Iterator[Merge]:
    """The merges one compaction makes of `table`: every closed day with two files or more, and every day with
    files of the earlier layout."""
    t = schema.table(table)
    days: dict[str, list[str]] = {}
    legacy: dict[str, list[str]] = {}
    for key in store.files(table, t.file_glob):
        folder, _, name = key.rpartition("/")
        days.setdefault(folder, []).append(name)
    for key in store.files(table, "date=*/node=*/*.parquet"):
        folder, node, name = key.rsplit("/", 2)
        legacy.setdefault(folder, []).append(f"{node}/{name}")
    for folder in sorted(days.keys() | legacy.keys()):
        date = dt.date.fromisoformat(folder.rsplit("/", 1)[-1].removeprefix("date="))
        names, old = days.get(folder, []), legacy.get(folder, [])
        if not old and (date > today - dt.timedelta(days=grace_days) or len(names) < 2):
            continue  # still open (a flush may add to it), or nothing to merge
        yield _merge(folder, names + old)


def _merge(folder: str, names: list[str]) -> Merge:
    inputs = tuple(sorted(names))
    return Merge(folder, inputs, "part-c" + hashlib.sha1("\n".join(inputs).encode()).hexdigest()[:16] + ".parquet")


def checked(store: Store, table: str, merge: Merge, report: CompactionReport, cluster: str) -> Merge | None:
    """`merge` less its inputs that fail their check (set aside, each named in one line): None when fewer than two
    of the day's current-layout files are left to merge."""
    bad = {n: why for n in merge.inputs if (why := verify_file(store, table, f"{merge.folder}/{n}"))}
    for name, why in bad.items():
        quarantine(store, table, f"{merge.folder}/{name}", why, "compact", cluster)
        report.quarantined += 1
    if not bad:
        return merge
    left = [n for n in merge.inputs if n not in bad]
    if len(left) < 2 and not any("/" in n for n in left):  # nothing to merge (a legacy file is moved alone)
        return None
    return _merge(merge.folder, left)


def merged_rows(store: Store, table: str, merge: Merge) -> pl.LazyFrame:
    """The day's rows in the current file schema, file after file (each sorted by time), lazily: a day of a
    1,000-GPU fleet at 10 s is 8.6M samples (gpuledger.day_layout puts them in hour order without holding them)."""
    t = schema.table(table)
    return pl.concat(
        [
            _scan(store, f"{merge.folder}/{name}", t, name.split("/")[0][5:] if "/" in name else None)
            for name in merge.inputs
        ]
    )


def _scan(store: Store, key: str, t: schema.Table, legacy_node: str | None) -> pl.LazyFrame:
    """One file in the current file schema (older files may lack newer nullable columns, legacy ones the node)."""
    lf = pl.scan_parquet(store.url(key), storage_options=store.storage_options, hive_partitioning=False)
    have = lf.collect_schema()
    if legacy_node is not None:
        have["node"] = pl.String
        lf = lf.with_columns(pl.lit(None if legacy_node == _LEGACY_NO_NODE else legacy_node, pl.String).alias("node"))
    return lf.select(
        [
            pl.col(c).cast(dtype) if c in have else pl.lit(None, dtype=dtype).alias(c)
            for c, dtype in t.file_schema.items()
        ]
    )


def compact(
    lake: LakeRef, today: dt.date | None = None, grace_days: int = 1, cluster: str = "default"
) -> CompactionReport:
    """Merge every closed day of every table; an input that fails its check is set aside first (`cluster` names
    who set it aside in quarantined_files)."""
    store = open_store(lake)
    today = today or dt.datetime.now(dt.timezone.utc).date()
    # An analytics run reads the files a merge removes: one rewriter at a time where the Store needs it.
    with store.rewriting(), store.errors("compacting"):
        recovered, retired = store.finish_merges()
        report = CompactionReport(recovered=recovered, retired=retired)
        for name in schema.TABLES:
            if not schema.table(name).compact:
                continue  # its file names are claims (schema.QUOTA_EVENTS): a few files a day, left as they are
            for planned in plan(store, name, today, grace_days):
                if (merge := checked(store, name, planned, report, cluster)) is None:
                    continue
                with day_layout.hours(merged_rows(store, name, merge), schema.table(name)) as parts:
                    store.merge(merge, parts)
                report.partitions += 1
                report.files_in += len(merge.inputs)
                report.files_out += 1
                out = store.url(f"{merge.folder}/{merge.output}")
                report.rows += (
                    pl.scan_parquet(out, storage_options=store.storage_options).select(pl.len()).collect().item()
                )
    return report
