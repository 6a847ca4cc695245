"""A compaction's merge on an object-store lake (S3Store.merge; the planner is gpuledger.compaction): a closed day's
objects merged into one, then the merged ones deleted, with no lock (S3 has none) and no reader ever seeing a day's
rows twice or missing.

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
Readers (S3Store.files, under every reader of the lake) read, of a day, every Parquet object
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
import tempfile
from pathlib import Path

import obstore
import polars as pl

from gpuledger.store.base import Merge, write_stream
from gpuledger.store.s3 import MERGE_RECORD, S3Store, explain

KEEP_INPUTS_S = 900.0  # a merged day's inputs outlive its output's PUT by this much: longer than any one read


def merge(store: S3Store, m: Merge, rows: list[pl.LazyFrame]) -> bool:
    h = hashlib.sha1("\n".join(m.inputs).encode()).hexdigest()[:16]
    record = json.dumps({"inputs": list(m.inputs), "output": m.output}).encode()
    store.put_new(f"{m.folder}/part~merged-{h}.json", record)
    if not store.version(f"{m.folder}/{m.output}"):
        # Written to a local temp file, then one PUT (multipart when large) that publishes it whole: a stream into
        # the bucket would complete its upload, half-written, when a failure closed it.
        with tempfile.TemporaryDirectory(prefix="gpuledger-merge-") as tmp, store.errors("writing a merged day"):
            path = Path(tmp, m.output)
            write_stream(rows, str(path))
            try:
                obstore.put(store.client(), (store.loc / f"{m.folder}/{m.output}").key, path)
            except (obstore.exceptions.BaseError, OSError) as e:
                raise explain(e, store.loc / f"{m.folder}/{m.output}", "writing a merged day") from None
    if KEEP_INPUTS_S <= 0:
        _delete(store, [f"{m.folder}/{n}" for n in m.inputs])
    return True


def retire(store: S3Store, keep_s: float | None = None) -> int:
    """Delete the inputs of earlier merges (and of merges a crash cut short): those of a record whose output exists
    and was written at least `keep_s` ago (its LIST time against this machine's clock: a skew of seconds is nothing
    against minutes). Returns the merges finished."""
    keep_s = KEEP_INPUTS_S if keep_s is None else keep_s
    root = store.loc
    prefix = f"{root.key}/" if root.key else ""
    try:
        keys = {o["path"]: o["last_modified"] for batch in obstore.list(store.client(), prefix=prefix) for o in batch}
    except (obstore.exceptions.BaseError, OSError) as e:
        raise explain(e, root, "listing") from None
    done = 0
    for key in sorted(keys):
        folder, _, name = key.rpartition("/")
        if not MERGE_RECORD.match(name):
            continue
        rec = json.loads(store.get(key[len(prefix) :]) or b"{}")
        left = [n for n in rec.get("inputs", []) if f"{folder}/{n}" in keys]
        written = keys.get(f"{folder}/{rec.get('output')}")
        old = written is not None and (dt.datetime.now(dt.timezone.utc) - written).total_seconds() >= keep_s
        if old and left:
            _delete(store, [f"{folder}/{n}"[len(prefix) :] for n in left])
            done += 1
    return done


def _delete(store: S3Store, keys: list[str]) -> None:
    store.delete(keys)  # one seam, so a test can stop a compactor between two deletes
