import datetime as dt
import json

import polars as pl

from gpuledger.compaction import compact
from gpuledger.lake import LakeWriter, scan, table_files
from gpuledger.store.local import JOURNAL

from builders import SCRAPES_T0, at, day_files, fill_scrapes


def _rows(day, n, offset=0):
    t = at(day, 1)
    return pl.DataFrame(
        {
            "ts": [t + dt.timedelta(seconds=offset + i) for i in range(n)],
            "cluster": ["c"] * n,
            "node": ["n1"] * n,
            "gpu_uuid": ["GPU-a"] * n,
            "util_gpu_pct": [float(offset + i) for i in range(n)],
            "source": ["t"] * n,
        }
    )


def test_closed_partitions_are_merged_open_ones_left_alone(store):
    w = LakeWriter(store)
    for k in range(3):
        w.write("gpu_samples", _rows(1, 5, offset=10 * k), f"w-{k}")  # closed day: 3 files
        w.write("gpu_samples", _rows(3, 5, offset=10 * k), f"w-{k}")  # "today": 3 files
    before = scan(store, "gpu_samples").collect().sort("ts")
    r = compact(store, today=dt.date(2026, 11, 3), grace_days=1)
    assert (r.partitions, r.files_in, r.files_out, r.rows) == (1, 3, 1, 15)
    after = scan(store, "gpu_samples").collect().sort("ts")
    assert after.equals(before)
    days = [k.split("/")[1] for k in table_files(store, "gpu_samples")]
    assert days.count("date=2026-11-01") == 1 and days.count("date=2026-11-03") == 3
    # Idempotent: a second run has nothing to do.
    assert compact(store, today=dt.date(2026, 11, 3), grace_days=1).partitions == 0


def test_interrupted_compaction_is_finished_without_duplicates(tmp_path):
    w = LakeWriter(tmp_path)
    for k in range(2):
        w.write("gpu_samples", _rows(1, 4, offset=10 * k), f"w-{k}")
    files = [tmp_path / k for k in table_files(tmp_path, "gpu_samples")]
    part = files[0].parent
    # Simulate a crash after the merged file was published but before the inputs were deleted.
    merged = pl.concat([pl.read_parquet(f) for f in files])
    merged.write_parquet(part / "part-cmerged.parquet")
    (part / JOURNAL).write_text(json.dumps({"inputs": [f.name for f in files], "output": "part-cmerged.parquet"}))
    r = compact(tmp_path, today=dt.date(2026, 11, 3), grace_days=1)
    assert r.recovered == 1
    assert scan(tmp_path, "gpu_samples").collect().height == 8
    assert not (part / JOURNAL).exists()


def test_crash_before_the_merged_file_exists_keeps_the_inputs(tmp_path):
    w = LakeWriter(tmp_path)
    for k in range(2):
        w.write("gpu_samples", _rows(1, 4, offset=10 * k), f"w-{k}")
    part = (tmp_path / table_files(tmp_path, "gpu_samples")[0]).parent
    (part / JOURNAL).write_text(
        json.dumps({"inputs": ["part-w-0.parquet", "part-w-1.parquet"], "output": "part-cnever.parquet"})
    )
    compact(tmp_path, today=dt.date(2026, 11, 1), grace_days=1)  # nothing closed: only recovery runs
    assert scan(tmp_path, "gpu_samples").collect().height == 8
    assert len(table_files(tmp_path, "gpu_samples")) == 2


def test_merged_day_keeps_every_writers_rows_in_order(store):
    w = LakeWriter(store)
    w.write("gpu_samples", _rows(1, 3, offset=1).with_columns(node=pl.lit("n2")), "n2-0")
    w.write("gpu_samples", _rows(1, 3, offset=0), "n1-0")
    compact(store, today=dt.date(2026, 11, 3), grace_days=1)
    (f,) = table_files(store, "gpu_samples")
    merged = pl.read_parquet(store.get(f))
    # File after file, in name order, each as written.
    assert merged["node"].to_list() == ["n1"] * 3 + ["n2"] * 3
    assert merged["util_gpu_pct"].to_list() == [0.0, 1.0, 2.0, 1.0, 2.0, 3.0]


def test_files_of_the_earlier_node_in_path_layout_are_moved_into_theirday_files(tmp_path):
    """Lakes written before the node left the path: `date=/node=<node>/` files, node only in the path."""
    day = tmp_path / "gpu_samples" / "date=2026-11-03"  # today: an open day is migrated too
    for node in ("n1", "_none"):
        (day / f"node={node}").mkdir(parents=True)
        _rows(3, 2).drop("node").write_parquet(day / f"node={node}" / "part-w-0.parquet")
    LakeWriter(tmp_path).write("gpu_samples", _rows(3, 1, offset=5).with_columns(node=pl.lit("n3")), "w-1")
    r = compact(tmp_path, today=dt.date(2026, 11, 3), grace_days=1)
    assert (r.partitions, r.files_in, r.files_out, r.rows) == (1, 3, 1, 5)
    assert not any(day.glob("node=*"))  # the emptied legacy folders are gone
    back = scan(tmp_path, "gpu_samples").collect()
    assert sorted(back["node"].to_list(), key=lambda v: v or "") == [None, None, "n1", "n1", "n3"]
    assert compact(tmp_path, today=dt.date(2026, 11, 3), grace_days=1).partitions == 0


T0 = SCRAPES_T0
CLOSED, OPEN = dt.date(2026, 10, 31), dt.date(2026, 11, 1)


def test_compact_merges_every_tables_closed_day_and_keeps_every_row(store, tmp_path, cli):
    """The collector's files of every table: each closed table-day becomes one file, the open day is left alone,
    every row is read once before and after; `gpuledger compact` on today's date then merges the day just closed."""
    from gpuledger import schema

    rows = fill_scrapes(store, tmp_path)
    before = scan(store, "gpu_samples").collect().sort("ts", "gpu_uuid")
    assert before.height == rows and len(day_files(store, CLOSED)) == 3 and len(day_files(store, OPEN)) == 3
    closed = {t: [key for key in table_files(store, t) if f"date={CLOSED}" in key] for t in schema.TABLES}
    merged = {t: len(fs) for t, fs in closed.items() if len(fs) > 1}
    assert merged["gpu_samples"] == 3
    report = compact(store, today=OPEN, grace_days=1)
    assert (report.files_in, report.files_out) == (sum(merged.values()), len(merged))
    for t in merged:
        (only,) = [key for key in table_files(store, t) if f"date={CLOSED}" in key]
        assert only.rsplit("/", 1)[-1].startswith("part-c"), only
    assert len(day_files(store, OPEN)) == 3
    assert scan(store, "gpu_samples").collect().sort("ts", "gpu_uuid").equals(before)
    r = cli("compact", "--lake", str(store))  # today: 2026-11-01 is closed by now, and only it is left to merge
    assert r.exit_code == 0, r.output
    assert "compacted 1 partition(s): 3 files -> 1 (24 rows)" in r.output  # gpu_samples: 3 scrapes x 8 GPUs
    assert len(day_files(store, OPEN)) == 1
    assert scan(store, "gpu_samples").collect().sort("ts", "gpu_uuid").equals(before)
