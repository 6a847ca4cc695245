import os
import re
from dataclasses import replace

import pytest

from gpuledger.errors import SpoolError
from gpuledger.lake import LakeWriter, scan, table_files
from gpuledger.spool import HEADER, Spool, read_segment

from builders import at, epoch_us

T0 = epoch_us(at(2, 12))


def batch(i, gpus=8):
    return {
        "ts": [T0 + i * 1_000_000] * gpus,
        "cluster": ["c"] * gpus,
        "node": ["n1"] * gpus,
        "gpu_uuid": [f"GPU-{g}" for g in range(gpus)],
        "util_gpu_pct": [float(i)] * gpus,
        "mem_used_bytes": [2**40 + g for g in range(gpus)],
        "source": ["test"] * gpus,
    }


def open_spool(tmp_path):
    sp = Spool(tmp_path / "spool", "w1")
    sp.open()
    return sp


def test_append_flush_round_trip_keeps_every_value(tmp_path):
    sp = open_spool(tmp_path)
    lake = LakeWriter(tmp_path / "lake")
    for i in range(3):
        sp.append("gpu_samples", batch(i))
    assert sp.flush(lake) == 24
    df = scan(tmp_path / "lake", "gpu_samples").collect().sort("ts", "gpu_uuid")
    assert df.height == 24
    assert df["util_gpu_pct"].unique().sort().to_list() == [0.0, 1.0, 2.0]
    assert df["mem_used_bytes"].max() == 2**40 + 7  # int64 survives JSON exactly
    assert df["ts"].min() == at(2, 12)
    assert list((tmp_path / "spool").glob("seg-*.wal")) == [sp._current]  # flushed segments are deleted


def test_leftover_segments_are_replayed_on_start(tmp_path):
    sp = open_spool(tmp_path)
    sp.append("gpu_samples", batch(0))
    sp.close()  # the process dies here: nothing was flushed
    sp2 = open_spool(tmp_path)
    assert sp2.replay(LakeWriter(tmp_path / "lake")) == 8
    assert scan(tmp_path / "lake", "gpu_samples").collect().height == 8


def test_crash_between_parquet_write_and_segment_delete_does_not_duplicate(tmp_path):
    sp = open_spool(tmp_path)
    lake = LakeWriter(tmp_path / "lake")
    sp.append("gpu_samples", batch(0))
    seg = sp._current
    kept = seg.read_bytes()
    sp.flush(lake)
    seg.write_bytes(kept)  # as if the unlink never happened
    sp.close()  # the process dies (which lets go of its lock)
    sp2 = open_spool(tmp_path)
    sp2.replay(lake)
    assert scan(tmp_path / "lake", "gpu_samples").collect().height == 8


def test_rotate_hands_over_the_closed_segment_and_its_replay_name(tmp_path):
    sp = Spool(tmp_path / "spool", "w1", fsync=False)
    sp.open()
    assert sp.rotate() is None  # nothing appended: no segment to hand over, none opened
    sp.append("gpu_samples", batch(0), keep="row 0")
    sp.sync()
    first = sp._current
    seg, kept = sp.rotate()
    assert seg == first and sp._current != first and [r[0] for r in read_segment(seg).records] == ["gpu_samples"]
    assert kept == ["row 0"]  # what was appended with it, handed back with its segment
    # A writer that kept the rows writes them under name_of(seg); were it to die before discard(), the replay
    # writes the same file again: the rows are in the lake once.
    lake = LakeWriter(tmp_path / "lake")
    lake.write("gpu_samples", scan_batch(), sp.name_of(seg))
    sp.close()
    again = Spool(tmp_path / "spool", "w1")
    again.open()
    again.replay(lake)
    assert scan(tmp_path / "lake", "gpu_samples").collect().height == 8 and not seg.exists()


def test_a_failed_rotation_keeps_the_open_segment_usable(tmp_path, monkeypatch):
    sp = Spool(tmp_path / "spool", "w1", fsync=False)
    sp.open()
    sp.append("gpu_samples", batch(0))
    before = (sp._current, sp._fd)

    def full(*_a):
        raise SpoolError("cannot create spool segment: No space left on device")

    monkeypatch.setattr(sp, "_create_segment", full)
    with pytest.raises(SpoolError):
        sp.rotate()
    assert (sp._current, sp._fd) == before  # nothing half-swapped: the descriptor is still the segment's own
    sp.append("gpu_samples", batch(1))
    monkeypatch.undo()
    seg, _ = sp.rotate()
    assert seg == before[0] and len(read_segment(seg).records) == 2


def test_rotate_hands_back_exactly_the_kept_objects_of_the_segment_it_closes(tmp_path, monkeypatch):
    sp = Spool(tmp_path / "spool", "w1", fsync=False)
    sp.open()
    sp.append("gpu_samples", batch(0), keep="a")
    real = sp._create_segment

    def slow_create():  # an append arrives while the new segment is being made (outside the lock)
        sp.append("gpu_samples", batch(1), keep="b")
        return real()

    monkeypatch.setattr(sp, "_create_segment", slow_create)
    seg, kept = sp.rotate()
    monkeypatch.undo()
    sp.append("gpu_samples", batch(2), keep="c")
    assert (len(read_segment(seg).records), kept) == (2, ["a", "b"])  # the segment's records, and theirs only
    seg2, kept2 = sp.rotate()
    assert (len(read_segment(seg2).records), kept2) == (1, ["c"])


def scan_batch():
    from gpuledger.lake import frame_from_columns

    return frame_from_columns("gpu_samples", batch(0))


def test_torn_tail_is_dropped_and_everything_before_it_kept(tmp_path):
    sp = open_spool(tmp_path)
    for i in range(3):
        sp.append("gpu_samples", batch(i))
    seg = sp._current
    sp.close()
    data = seg.read_bytes()
    seg.write_bytes(data[:-7])  # the last record lost its end (power loss mid-write)
    got = read_segment(seg)
    assert len(got.records) == 2 and got.torn_tail_bytes > 0 and got.corrupt_at is None
    sp2 = open_spool(tmp_path)
    assert sp2.replay(LakeWriter(tmp_path / "lake")) == 16
    assert sp2.corrupt_reports == []


def test_corrupt_segment_is_kept_aside_reported_and_every_valid_record_written(tmp_path):
    sp = open_spool(tmp_path)
    for i in range(3):
        sp.append("gpu_samples", batch(i))
    seg = sp._current
    sp.close()
    data = bytearray(seg.read_bytes())
    (length, _) = HEADER.unpack_from(data, 0)
    second = HEADER.size + length
    data[second + HEADER.size + 5] ^= 0xFF  # flip a byte inside the second record's payload
    seg.write_bytes(bytes(data))
    sp2 = open_spool(tmp_path)
    rows = sp2.replay(LakeWriter(tmp_path / "lake"))
    assert rows == 16  # the first and the third record; the second is damaged
    utils = scan(tmp_path / "lake", "gpu_samples").collect()["util_gpu_pct"].unique().sort().to_list()
    assert utils == [0.0, 2.0]
    assert (tmp_path / "spool" / "corrupt" / seg.name).exists()
    assert not seg.exists()
    (report,) = sp2.corrupt_reports
    assert seg.name in report and f"corrupt at byte {second}" in report and "kept 2 valid record(s)" in report


def test_a_damaged_length_field_is_resynchronised(tmp_path):
    sp = open_spool(tmp_path)
    for i in range(3):
        sp.append("gpu_samples", batch(i))
    seg = sp._current
    sp.close()
    data = bytearray(seg.read_bytes())
    data[0:4] = (10**6).to_bytes(4, "little")  # the first record's length now points past the end
    seg.write_bytes(bytes(data))
    got = read_segment(seg)
    assert len(got.records) == 2 and got.corrupt_at == 0 and got.torn_tail_bytes == 0


def test_segment_names_keep_increasing_even_if_the_clock_steps_back(tmp_path, monkeypatch):
    sp = open_spool(tmp_path)
    first = sp._current.name
    sp.close()
    import gpuledger.spool as spool_mod

    monkeypatch.setattr(spool_mod.time, "time_ns", lambda: 5)
    sp2 = open_spool(tmp_path)
    assert sp2._current.name > first


def test_append_before_open_is_an_error(tmp_path):
    with pytest.raises(SpoolError, match="not open"):
        Spool(tmp_path, "w").append("gpu_samples", batch(0))


def test_spool_segment_is_durable_bytes_on_disk(tmp_path):
    sp = open_spool(tmp_path)
    sp.append("gpu_samples", batch(0))
    # Another reader (a restarted process) sees the full record without any close or flush.
    assert len(read_segment(sp._current).records) == 1
    assert os.path.getsize(sp._current) > HEADER.size


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=4), cut=st.integers(0, 10_000))
def test_any_damage_yields_only_original_records_and_no_exception(tmp_path, flips, cut):
    path = tmp_path / "seg-fuzz.wal"
    if not path.exists():
        sp = Spool(tmp_path / "fz", "w")
        sp.open()
        for i in range(5):
            sp.append("gpu_samples", batch(i, gpus=2))
        sp.close()
        path.write_bytes(sp._current.read_bytes())
    original = path.read_bytes()
    data = bytearray(original[: len(original) - cut % len(original)])
    for pos, x in flips:
        if data:
            data[pos % len(data)] ^= x
    damaged = tmp_path / "damaged.wal"
    damaged.write_bytes(bytes(data))
    got = read_segment(damaged)
    originals = [(t, c) for t, c in read_segment(path).records]
    assert all(r in originals for r in got.records)


def test_two_flushes_land_every_spooled_row_once_under_the_writers_names(store, tmp_path):
    """The simulator's scrapes of every table, spooled and flushed twice (two segments: two files a partition), read
    back as the rows appended, each once, in files named part-<node>-<segment>."""
    from gpuledger.collector import sources
    from gpuledger.config import SimConfig, defaults
    from gpuledger.lake import conform
    from gpuledger.spool import records_to_frames

    cfg = replace(defaults(), simulator=SimConfig(nodes=2, gpus_per_node=4, models=("H100",)))
    src = sources.make("sim", cfg, tmp_path / "simstate", 1_793_491_200.0)
    batches = [b for k in range(6) for b in src.collect(1_793_491_200.0 + 10 * (k + 1)) if b.rows]
    sp, writer = Spool(tmp_path / "spool", "n1"), LakeWriter(store)
    writer.init()
    sp.open()
    for half in (batches[: len(batches) // 2], batches[len(batches) // 2 :]):
        for b in half:
            sp.append(b.table, b.columns)
        sp.flush(writer)
    sp.close()
    want = records_to_frames([(b.table, b.columns) for b in batches])
    assert {"gpu_samples", "gpu_processes", "nodes"} <= set(want)
    for table, rows in want.items():
        rows = conform(table, rows, file_only=False)
        got = scan(store, table).collect().select(rows.columns)
        assert got.height == rows.height > 0, table
        assert got.sort(got.columns).equals(rows.sort(rows.columns)), table
        files = table_files(store, table)
        if table == "gpu_samples":  # in every scrape: each flush wrote one file of each day
            assert len({f.split("/")[1] for f in files}) * 2 == len(files), files
        assert all(re.fullmatch(rf"{table}/date=\d{{4}}-\d\d-\d\d/part-n1-\d{{20}}\.parquet", f) for f in files), files
