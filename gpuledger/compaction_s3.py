"""Compaction of an object-store lake (s3://): a closed day's objects merged into one, then the merged ones deleted,
with no lock (S3 has none) and no reader ever seeing a day's rows twice or missing.

Order, per day:
  1. PUT the merge record `part~merged-<h>.json` ({"inputs": [...], "output": "part-c<h>.parquet"}, h a hash of the
     inputs) with If-None-Match: of two compactors of one day, one goes on; the other finds the record and finishes
     the same merge (same inputs, same output) or leaves it.
  2. Write the output (polars' S3 sink: one PUT or a multipart upload, visible only whole).
  3. DELETE the inputs, once the output is KEEP_INPUTS_S old (at a later compaction): a reader that listed the day
     before the output existed reads the inputs it listed, and an analytics run or a dashboard snapshot reads for
     seconds to minutes after its LIST; deleted at once, its GET found no object and the run failed. Readers that
     list after the output ignore the inputs (below), so keeping them costs storage only. The record stays (it is
     tiny, one per merge, and never rewritten).
Readers (gpuledger.lake_url.glob, under gpuledger.lake.table_files and scan) read, of a day, every Parquet object
less the inputs of each record whose output they listed; a LIST that shows neither an input nor its record's output
(an input deleted after the output's page was listed: a LIST of many pages is not a snapshot) is listed again.
Records sort after every `part-` key, so a LIST that reached an output reaches its record too (written before it).
A crash after 1 leaves a record with no output: readers read the inputs, and the next compaction merges the day
again (the same record if no file came meanwhile, else a new one). A crash after 2 or mid-3: readers already
read the output alone; a later compaction deletes the inputs left.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json

import obstore
import polars as pl

from gpuledger import lake_url, schema
from gpuledger.lake import COMPRESSION

KEEP_INPUTS_S = 900.0  # a merged day's inputs outlive its output's PUT by this much: longer than any one read


def compact(root: lake_url.S3Location, today: dt.date, grace_days: int, report) -> None:
    store = lake_url.object_store(root)
    opts = lake_url.storage_options()
    for name, t in schema.TABLES.items():
        files = lake_url.glob(root / name, t.file_glob)
        days: dict[str, list[lake_url.S3Location]] = {}
        for f in files:
            days.setdefault(f.key.rsplit("/", 2)[-2], []).append(f)
        report.retired += _finish_merged(store, root / name, KEEP_INPUTS_S)
        for day, objs in sorted(days.items()):
            date = dt.date.fromisoformat(day.removeprefix("date="))
            if date > today - dt.timedelta(days=grace_days) or len(objs) < 2:
                continue  # still open (a flush may add to it), or nothing to merge
            folder = root / name / day
            inputs = sorted(o.name for o in objs)
            h = hashlib.sha1("\n".join(inputs).encode()).hexdigest()[:16]
            output = folder / f"part-c{h}.parquet"
            record = json.dumps({"inputs": inputs, "output": output.name}).encode()
            lake_url.put_new(store, folder / f"part~merged-{h}.json", record)
            if not _exists(store, output):
                lf = pl.scan_parquet(
                    [str(o) for o in objs],
                    storage_options=opts,
                    missing_columns="insert",
                    schema=t.file_schema,
                    hive_partitioning=False,
                )
                lf.sink_parquet(str(output), compression=COMPRESSION, statistics=True, storage_options=opts)
            if KEEP_INPUTS_S <= 0:
                _delete([folder / n for n in inputs])
            report.partitions += 1
            report.files_in += len(inputs)
            report.files_out += 1
            report.rows += pl.scan_parquet(str(output), storage_options=opts).select(pl.len()).collect().item()


def _finish_merged(store, table: lake_url.S3Location, keep_s: float) -> int:
    """Delete the inputs of earlier merges (and of merges a crash cut short): those of a record whose output exists
    and was written at least `keep_s` ago (its LIST time against this machine's clock: a skew of seconds is nothing
    against minutes). Returns the merges finished."""
    try:
        keys = {o["path"]: o["last_modified"] for batch in obstore.list(store, prefix=table.key + "/") for o in batch}
    except (obstore.exceptions.BaseError, OSError) as e:
        raise lake_url.explain(e, table, "listing") from None
    done = 0
    for key in sorted(keys):
        folder, _, name = key.rpartition("/")
        if not lake_url.MERGE_RECORD.match(name):
            continue
        rec = json.loads(lake_url.read_bytes(lake_url.S3Location(table.bucket, key)) or b"{}")
        left = [n for n in rec.get("inputs", []) if f"{folder}/{n}" in keys]
        written = keys.get(f"{folder}/{rec.get('output')}")
        old = written is not None and (dt.datetime.now(dt.timezone.utc) - written).total_seconds() >= keep_s
        if old and left:
            _delete([lake_url.S3Location(table.bucket, f"{folder}/{n}") for n in left])
            done += 1
    return done


def _exists(store, obj: lake_url.S3Location) -> bool:
    try:
        obstore.head(store, obj.key)
        return True
    except FileNotFoundError:
        return False
    except (obstore.exceptions.BaseError, OSError) as e:
        raise lake_url.explain(e, obj, "reading") from None


def _delete(objs: list[lake_url.S3Location]) -> None:
    lake_url.delete_many(objs)  # one seam, so a test can stop a compactor between two deletes
