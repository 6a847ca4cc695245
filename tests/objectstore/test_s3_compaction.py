"""Compaction on an object-store lake (gpuledger/store/s3_compaction.py), where a merge is a record, an output and
the inputs' deletion well after: a reader listing at any step of it (record written, output written, inputs deleted
one by one, a compactor dying mid-way) reads every row once, and one that listed before the merge reads what it
listed. (What a compaction merges and keeps, on both stores: tests/core/test_compaction.py.)"""

from __future__ import annotations

import datetime as dt
import time

import pytest

from gpuledger.compaction import compact
from gpuledger.errors import LakeError
from gpuledger.lake import scan
from gpuledger.store import open_store, s3_compaction
from gpuledger.store.s3 import live

from builders import SCRAPES_T0, day_files, fill_scrapes

T0 = SCRAPES_T0
CLOSED, OPEN = dt.date(2026, 10, 31), dt.date(2026, 11, 1)


def test_the_reader_rule_for_merge_records():
    a_b = {"inputs": ["a", "b"], "output": "c1"}
    c1_d = {"inputs": ["c1", "d"], "output": "c2"}
    assert live({"a", "b"}, []) == {"a", "b"}
    assert live({"a", "b"}, [a_b]) == {"a", "b"}  # record written, output not yet: the inputs
    assert live({"a", "b", "c1"}, [a_b]) == {"c1"}  # output written, inputs not yet deleted: the output alone
    assert live({"b", "c1"}, [a_b]) == {"c1"}  # inputs being deleted
    assert live({"b"}, [a_b]) is None  # an input gone and no output listed: a LIST caught mid-way, list again
    assert live({"c1", "d", "c2"}, [a_b, c1_d]) == {"c2"}  # the day merged again after a late flush
    assert live({"c2"}, [a_b, c1_d]) == {"c2"}  # the first output is gone too, merged into the second
    assert live({"c2"}, [{"inputs": ["a", "b"], "output": "c0"}, {"inputs": ["a", "b", "x"], "output": "c2"}]) == {
        "c2"
    }  # a compactor died after its record; a later merge of more files took its inputs


def _selector(bucket):
    import pyarrow.fs as pafs

    return pafs.FileSelector(bucket, recursive=True)


def test_a_reader_sees_every_row_once_at_each_step_and_after_a_compactor_dies(s3, tmp_path, monkeypatch):
    root = open_store(f"s3://{s3.bucket}/p")
    fill_scrapes(root, tmp_path)
    want = scan(root, "gpu_samples").collect().sort("ts", "gpu_uuid")
    monkeypatch.setattr(s3_compaction, "KEEP_INPUTS_S", 0)  # inputs deleted in the same pass: each step seen
    seen = []
    real_delete = s3_compaction._delete

    def one_by_one_then_die(store, keys):
        for key in keys:
            name = key.rsplit("/", 1)[-1]
            got = scan(root, "gpu_samples").collect().sort("ts", "gpu_uuid")
            seen.append((name, got.height))
            assert got.equals(want), f"before deleting {name}"
            real_delete(store, [key])
            if "gpu_samples" in key and len(seen) == 2:
                raise LakeError("the compactor dies here")

    monkeypatch.setattr(s3_compaction, "_delete", one_by_one_then_die)
    with pytest.raises(LakeError, match="dies here"):
        compact(root, today=OPEN, grace_days=1)
    assert len(seen) == 2  # output written, then one input deleted: both read every row once
    assert len(day_files(root, CLOSED)) == 1  # the output alone, though two inputs are still there
    assert scan(root, "gpu_samples").collect().sort("ts", "gpu_uuid").equals(want)
    monkeypatch.setattr(s3_compaction, "_delete", real_delete)
    report = compact(root, today=OPEN, grace_days=1)
    assert report.retired == 1  # the dead compactor's inputs deleted
    left = [i.path for i in s3.server.filesystem().get_file_info(_selector(s3.bucket))]
    day = f"{s3.bucket}/p/gpu_samples/date={CLOSED}/"
    assert sorted(k.removeprefix(day) for k in left if k.startswith(day) and k.endswith(".parquet")) == [
        day_files(root, CLOSED)[0]
    ]  # the output alone: no input of the closed day is left
    assert scan(root, "gpu_samples").collect().sort("ts", "gpu_uuid").equals(want)


def test_a_reader_that_listed_before_the_merge_still_reads_its_objects(s3, tmp_path, monkeypatch):
    """The inputs outlive the merge by KEEP_INPUTS_S: a query, a dashboard snapshot or an analytics scan that listed
    the day before the output existed reads what it listed (deleted at once, its GET failed with no such key)."""
    root = open_store(f"s3://{s3.bucket}/p")
    fill_scrapes(root, tmp_path)
    listed = scan(root, "gpu_samples")  # the objects are listed now, read at collect()
    want = listed.collect().sort("ts", "gpu_uuid")
    monkeypatch.setattr(s3_compaction, "KEEP_INPUTS_S", 1.0)
    report = compact(root, today=OPEN, grace_days=1)
    assert report.partitions >= 1 and report.retired == 0
    assert listed.collect().sort("ts", "gpu_uuid").equals(want)  # every input it listed is still there
    assert len(day_files(root, CLOSED)) == 1  # a new listing reads the output alone
    day = f"{s3.bucket}/p/gpu_samples/date={CLOSED}/"
    stored = [i.path for i in s3.server.filesystem().get_file_info(_selector(s3.bucket)) if i.path.startswith(day)]
    assert sum(k.endswith(".parquet") for k in stored) == 4  # 3 inputs and the output
    assert sum("part~merged-" in k for k in stored) == 1  # the merge's record, which readers follow
    time.sleep(1.2)
    again = compact(root, today=OPEN, grace_days=1)  # a later pass, once the output is old enough
    assert again.retired >= 1 and again.partitions == 0
    stored = [i.path for i in s3.server.filesystem().get_file_info(_selector(s3.bucket)) if i.path.startswith(day)]
    assert [k.removeprefix(day) for k in stored if k.endswith(".parquet")] == day_files(root, CLOSED)
    assert sum("part~merged-" in k for k in stored) == 1  # the record outlives the inputs it retired
    assert scan(root, "gpu_samples").collect().sort("ts", "gpu_uuid").equals(want)
