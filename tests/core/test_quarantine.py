"""A damaged or foreign file in the lake is set aside, not a stop: compaction checks its inputs (pyarrow, page
checksums verified, the table's schema), moves a failed one under _quarantine/, names it in one line and records it
in quarantined_files; the rest of the day is merged, and every reader goes on without it. On both stores."""

from __future__ import annotations

import datetime as dt
import io
import logging

import polars as pl
import pytest

from gpuledger import schema
from gpuledger.compaction import compact
from gpuledger.lake import LakeWriter, scan, table_files
from gpuledger.lake_check import verify_bytes
from gpuledger.store.base import parquet_bytes

from builders import at

DAY = dt.date(2026, 11, 1)


def _rows(node: str, n: int, offset: int = 0) -> pl.DataFrame:
    t = at(1, 1)
    return pl.DataFrame(
        {
            "ts": [t + dt.timedelta(seconds=offset + i) for i in range(n)],
            "cluster": ["c"] * n,
            "node": [node] * n,
            "gpu_uuid": [f"GPU-{node}"] * n,
            "util_gpu_pct": [float(i) for i in range(n)],
            "energy_j": [1000.0 + i for i in range(n)],
            "source": ["t"] * n,
        }
    )


def _flip(data: bytes, at_byte: int) -> bytes:
    bad = bytearray(data)
    bad[at_byte] ^= 0x01
    return bytes(bad)


def test_the_lake_writes_page_checksums_that_catch_a_flipped_bit():
    """A single-bit flip anywhere in a file's pages is refused or reads back the same values: never other values
    in silence (a file without checksums reads back silently). A flip the check lets through is in a page header's
    statistics, which no reader here uses (nor does pyarrow check them)."""
    rows = pl.concat([_rows(f"n{k}", 2000, 0) for k in range(3)])
    t = schema.table("gpu_samples")
    from gpuledger.lake import conform

    good = parquet_bytes(conform("gpu_samples", rows, file_only=False).drop("date"))
    assert verify_bytes(t, good) is None
    want = pl.read_parquet(io.BytesIO(good))
    pages_end = len(good) // 2  # the column chunks come first, the footer last
    offsets = range(8, pages_end, max(1, pages_end // 50))
    caught = {i: verify_bytes(t, _flip(good, i)) for i in offsets}
    assert all(c is None or c.startswith("cannot be read whole") for c in caught.values()), caught
    passed = [i for i, c in caught.items() if c is None]
    assert all(pl.read_parquet(io.BytesIO(_flip(good, i))).equals(want) for i in passed), passed
    assert len(passed) < len(offsets) // 5  # most flips are in the pages' data, covered by their checksums
    # The same flips in polars' own encoding (no checksums) mostly read back as other values, with no error.
    buf = io.BytesIO()
    rows.write_parquet(buf, compression="zstd")
    plain = buf.getvalue()
    silent = 0
    for i in range(8, len(plain) // 2, max(1, len(plain) // 100)):
        try:
            pl.read_parquet(io.BytesIO(_flip(plain, i)))
            silent += 1
        except Exception:  # noqa: BLE001 - counting the reads that did fail
            pass
    assert silent > 0


def test_a_foreign_schema_is_named():
    t = schema.table("gpu_samples")
    wrong = _rows("n1", 3).with_columns(pl.col("util_gpu_pct").cast(pl.String))
    assert (
        verify_bytes(t, parquet_bytes(wrong))
        == "column types differ from the table's: util_gpu_pct is String, not Float32"
    )
    assert verify_bytes(t, parquet_bytes(_rows("n1", 3).with_columns(x=pl.lit(1)))) == "unknown column(s) x"
    assert verify_bytes(t, parquet_bytes(_rows("n1", 3).drop("gpu_uuid"))) == "missing required column(s) gpu_uuid"
    # An older file's other width of number is the same kind of type: read with a cast, not a problem.
    older = _rows("n1", 3).with_columns(pl.col("util_gpu_pct").cast(pl.Float64))
    assert verify_bytes(t, parquet_bytes(older)) is None


def test_compaction_sets_damaged_files_aside_and_merges_the_rest(store, caplog):
    w = LakeWriter(store)
    for k, node in enumerate(["n1", "n2", "n3", "n4", "n5"]):
        w.write("gpu_samples", _rows(node, 10, offset=k), node)
    folder = f"gpu_samples/date={DAY.isoformat()}"
    cut = store.get(f"{folder}/part-n2.parquet")
    store.delete([f"{folder}/part-n2.parquet"])
    store.put_new(f"{folder}/part-n2.parquet", cut[: len(cut) // 2])  # cut in half (a disk filled mid-copy)
    flipped = store.get(f"{folder}/part-n3.parquet")
    store.delete([f"{folder}/part-n3.parquet"])
    store.put_new(f"{folder}/part-n3.parquet", _flip(flipped, 64))  # a bit flipped in its first page
    foreign = parquet_bytes(_rows("n4", 10).with_columns(pl.col("ts").dt.to_string()))
    store.delete([f"{folder}/part-n4.parquet"])
    store.put_new(f"{folder}/part-n4.parquet", foreign)  # the right name, another schema

    with caplog.at_level(logging.WARNING):
        r = compact(store, today=DAY + dt.timedelta(days=2), grace_days=1, cluster="c")

    assert r.quarantined == 3 and (r.partitions, r.files_in, r.rows) == (1, 2, 20)
    lines = [m for m in caplog.messages if "set aside as" in m]
    assert len(lines) == 3 and all(store.url(f"{folder}/part-") in m for m in lines)
    samples = scan(store, "gpu_samples").collect()
    assert sorted(samples["node"].unique()) == ["n1", "n5"] and samples.height == 20
    assert samples.schema == schema.GPU_SAMPLES.polars_schema  # no column retyped by the foreign file
    q = scan(store, "quarantined_files").collect().sort("file")
    assert q["file"].to_list() == [f"{folder}/part-n{k}.parquet" for k in (2, 3, 4)]
    assert q["set_aside_as"].to_list() == [f"_quarantine/{folder}/part-n{k}.parquet" for k in (2, 3, 4)]
    assert q["reason"][0].startswith("cannot be read whole") and q["reason"][1].startswith("cannot be read whole")
    assert (
        q["reason"][2]
        == "column types differ from the table's: ts is String, not Datetime(time_unit='us', time_zone='UTC')"
    )
    assert q["found_by"].to_list() == ["compact"] * 3 and q["cluster"].to_list() == ["c"] * 3
    assert store.get(f"_quarantine/{folder}/part-n2.parquet") == cut[: len(cut) // 2]  # kept, to inspect
    # Nothing left to do, and nothing set aside twice.
    again = compact(store, today=DAY + dt.timedelta(days=2), grace_days=1, cluster="c")
    assert (again.partitions, again.quarantined) == (0, 0)
    assert len(table_files(store, "gpu_samples")) == 1


@pytest.mark.parametrize("damage", ["cut", "flip"])
def test_a_lone_damaged_file_beside_one_good_one_is_set_aside_and_the_good_one_stays(store, damage):
    w = LakeWriter(store)
    w.write("gpu_samples", _rows("n1", 5), "n1")
    w.write("gpu_samples", _rows("n2", 5), "n2")
    key = f"gpu_samples/date={DAY.isoformat()}/part-n2.parquet"
    data = store.get(key)
    store.delete([key])
    store.put_new(key, data[:-40] if damage == "cut" else _flip(data, 64))
    r = compact(store, today=DAY + dt.timedelta(days=2), grace_days=1)
    assert (r.quarantined, r.partitions) == (1, 0)  # one file left: nothing to merge
    assert scan(store, "gpu_samples").collect()["node"].unique().to_list() == ["n1"]


def test_new_files_are_checked_once_and_a_bad_one_set_aside(store):
    """What the analytics call on each raw table: files they have not read in this state are checked; a file they
    read before (same stamp) is not read again for the check."""
    from gpuledger.lake_check import checked_stamps

    w = LakeWriter(store)
    w.write("gpu_samples", _rows("n1", 5), "n1")
    first, bad = checked_stamps(store, "gpu_samples", {}, "analyze")
    assert bad == 0 and list(first) == [f"gpu_samples/date={DAY.isoformat()}/part-n1.parquet"]
    w.write("gpu_samples", _rows("n2", 5), "n2")
    key = f"gpu_samples/date={DAY.isoformat()}/part-n2.parquet"
    data = store.get(key)
    store.delete([key])
    store.put_new(key, data[: len(data) // 3])
    got = store.get
    reads = []
    store.get = lambda k: reads.append(k) or got(k)  # noqa: E731 - counting what the check reads
    second, bad = checked_stamps(store, "gpu_samples", first, "analyze", cluster="c")
    assert bad == 1 and second == first
    assert [k for k in reads if k.startswith("gpu_samples/")] == [key, key]  # checked, then sized: the new one only
    q = scan(store, "quarantined_files").collect()
    assert q["file"].to_list() == [key] and q["found_by"].to_list() == ["analyze"]


def test_a_damaged_derived_file_is_one_line_naming_it_for_sql(store, analysed_lake, cli):
    """Until the analytics rebuild it, a query of its view says which file is damaged, in one line."""
    from s3_server import upload

    if store.folder is not None:
        import shutil

        shutil.copytree(analysed_lake, store.folder)
    else:
        upload(analysed_lake, store)
    key = table_files(store, "job_stats")[0]
    data = store.get(key)
    store.delete([key])
    store.put_new(key, data[: len(data) // 2])
    r = cli("sql", "--lake", str(store), "SELECT count(*) AS n FROM job_stats")
    assert r.exit_code == 1
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and key.rsplit("/", 1)[-1] in lines[0], r.output


def test_a_foreign_file_retypes_no_column_and_a_query_that_reads_it_names_it(store, cli):
    """A file of strings beside a good one, not yet seen by analyze or compact: every view keeps its table's types
    (DuckDB's union_by_name would make util_gpu_pct VARCHAR), a query that reads its values is one line naming it,
    and one that does not read that column still answers."""
    from gpuledger.query import Lake

    w = LakeWriter(store)
    w.write("gpu_samples", _rows("n1", 5), "n1")
    foreign = f"gpu_samples/date={DAY.isoformat()}/part-foreign.parquet"
    store.put_new(foreign, parquet_bytes(_rows("n2", 2).with_columns(pl.lit("busy").alias("util_gpu_pct"))))
    with Lake(store) as q:
        types = dict(q.execute("SELECT column_name, column_type FROM (DESCRIBE gpu_samples)").rows)
    assert types["util_gpu_pct"] == "FLOAT" and types["ts"] == "TIMESTAMP WITH TIME ZONE"
    r = cli("sql", "--lake", str(store), "SELECT sum(util_gpu_pct) AS s FROM gpu_samples")
    lines = r.output.strip().splitlines()
    assert r.exit_code == 1 and len(lines) == 1, r.output
    assert "part-foreign.parquet" in lines[0] and "util_gpu_pct is String, not Float32" in lines[0], lines[0]
    if store.folder is not None:  # DuckDB reads the files itself: the text the helper recognises, pinned
        with pytest.raises(Exception, match=r"^Conversion Error") as e, Lake(store) as q:
            q.load_views({"gpu_samples"})
            q.con.execute("SELECT sum(util_gpu_pct) FROM gpu_samples").fetchall()
        assert type(e.value).__name__ == "ConversionException"
