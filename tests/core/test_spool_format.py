"""The spool's two record encodings: Arrow IPC for large batches, JSON for small ones and for every segment written
before Arrow records existed. Both replay, alone or mixed in one segment, and a torn Arrow tail loses only itself."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import zlib

import polars as pl
import pytest

from gpuledger.lake import LakeWriter, scan
from gpuledger.spool import ARROW_MIN_ROWS, ARROW_TAG, HEADER, Spool, read_segment

from builders import at, epoch_us

T0 = epoch_us(at(2, 12))
N = ARROW_MIN_ROWS  # the smallest batch written as Arrow


def fields(i: int, rows: int) -> dict[str, list]:
    """gpu_fields rows of round i: value = 1000 * i + row, every 7th value null."""
    return {
        "ts": [T0 + i * 1_000_000] * rows,
        "cluster": ["c"] * rows,
        "node": [f"n{r // 8}" for r in range(rows)],
        "gpu_uuid": [f"GPU-{r % 8}" for r in range(rows)],
        "field": [f"DCGM_FI_F{r % 5}" for r in range(rows)],
        "value": [None if r % 7 == 0 else float(1000 * i + r) for r in range(rows)],
        "source": ["dcgm"] * rows,
    }


def payloads(seg) -> list[bytes]:
    data, pos, out = seg.read_bytes(), 0, []
    while pos < len(data):
        length, _ = HEADER.unpack_from(data, pos)
        out.append(data[pos + HEADER.size : pos + HEADER.size + length])
        pos += HEADER.size + length
    return out


def open_spool(tmp_path) -> Spool:
    sp = Spool(tmp_path / "spool", "w1")
    sp.open()
    return sp


def test_a_large_batch_is_arrow_a_small_one_json_and_both_replay_in_order(tmp_path):
    sp = open_spool(tmp_path)
    sp.append("gpu_fields", fields(0, N))
    sp.append("gpu_fields", fields(1, 3))
    sp.append("gpu_fields", fields(2, N + 1))
    seg = sp._current
    sp.close()
    kinds = [p[0] for p in payloads(seg)]
    assert kinds == [ARROW_TAG, ord("{"), ARROW_TAG]
    recs = read_segment(seg).records
    assert [(t, type(c)) for t, c in recs] == [
        ("gpu_fields", pl.DataFrame),
        ("gpu_fields", dict),
        ("gpu_fields", pl.DataFrame),
    ]
    sp2 = open_spool(tmp_path)
    assert sp2.replay(LakeWriter(tmp_path / "lake")) == N + 3 + N + 1
    df = scan(tmp_path / "lake", "gpu_fields").collect()
    # every value back, nulls included: sum over rounds of sum(1000 i + r for r not divisible by 7)
    want = sum(1000 * i + r for i, rows in ((0, N), (1, 3), (2, N + 1)) for r in range(rows) if r % 7)
    assert df["value"].sum() == want
    assert df["value"].null_count() == len(range(0, N, 7)) + 1 + len(range(0, N + 1, 7))
    assert sorted(df["ts"].unique().to_list()) == [at(2, 12, 0, s) for s in range(3)]
    assert df.filter(pl.col("ts") == at(2, 12, 0, 2))["node"].n_unique() == (N + 1 + 7) // 8


def test_arrow_records_are_much_smaller_than_json(tmp_path):
    sp = open_spool(tmp_path)
    sp.append("gpu_fields", fields(0, 5000))
    (arrow,) = payloads(sp._current)
    sp.close()
    as_json = json.dumps({"t": "gpu_fields", "c": fields(0, 5000)}, separators=(",", ":")).encode()
    assert len(arrow) * 4 < len(as_json)


def test_a_batch_the_schema_cannot_type_stays_json(tmp_path):
    sp = open_spool(tmp_path)
    sp.append("not_a_table", {"x": list(range(N))})
    bad_ts = fields(0, N) | {"ts": ["noon"] * N}  # a string where microseconds go
    sp.append("gpu_fields", bad_ts)
    first, second = payloads(sp._current)
    sp.close()
    assert json.loads(first) == {"t": "not_a_table", "c": {"x": list(range(N))}}
    assert json.loads(second) == {"t": "gpu_fields", "c": bad_ts}


def old_segment(path, batches) -> None:
    """A segment as the JSON-only spool wrote it: `<length><crc32><json>` per record."""
    out = b""
    for table, cols in batches:
        payload = json.dumps({"t": table, "c": cols}, separators=(",", ":")).encode()
        out += HEADER.pack(len(payload), zlib.crc32(payload)) + payload
    path.write_bytes(out)


def test_an_old_json_segment_is_replayed_and_its_torn_tail_dropped(tmp_path):
    (tmp_path / "spool").mkdir()
    seg = tmp_path / "spool" / f"seg-{1:020d}.wal"
    old_segment(seg, [("gpu_fields", fields(0, 2000)), ("gpu_fields", fields(1, 10)), ("gpu_fields", fields(2, 10))])
    seg.write_bytes(seg.read_bytes()[:-20])  # the third record was being written at a kill -9
    sp = Spool(tmp_path / "spool", "w1")
    assert sp.replay(LakeWriter(tmp_path / "lake")) == 2010
    assert not seg.exists() and sp.corrupt_reports == []
    df = scan(tmp_path / "lake", "gpu_fields").collect()
    assert df["value"].sum() == sum(r for r in range(2000) if r % 7) + sum(1000 + r for r in range(10) if r % 7)


@pytest.mark.parametrize("cut", ["in the header", "just after the header", "mid-stream", "one byte short"])
def test_a_torn_arrow_tail_is_dropped_and_every_whole_record_kept(tmp_path, cut):
    sp = open_spool(tmp_path)
    sp.append("gpu_fields", fields(0, N))
    sp.append("gpu_fields", fields(1, 2))
    sp.append("gpu_fields", fields(2, 3 * N))
    seg = sp._current
    sp.close()
    data = seg.read_bytes()
    last = HEADER.size + len(payloads(seg)[-1])
    start = len(data) - last
    keep = {"in the header": 5, "just after the header": HEADER.size + 3, "mid-stream": last // 2}.get(cut, last - 1)
    seg.write_bytes(data[: start + keep])
    got = read_segment(seg)
    assert (len(got.records), got.torn_tail_bytes, got.corrupt_at) == (2, keep, None)
    assert open_spool(tmp_path).replay(LakeWriter(tmp_path / "lake")) == N + 2


WRITER = textwrap.dedent(
    """
    import sys
    from gpuledger.spool import Spool
    t0, n = int(sys.argv[2]), 4000
    sp = Spool(sys.argv[1], "w1")
    sp.open()
    i = 0
    while True:
        cols = {"ts": [t0 + i * 1_000_000] * n, "cluster": ["c"] * n, "node": ["n"] * n, "source": ["dcgm"] * n,
                "gpu_uuid": [f"GPU-{r}" for r in range(n)], "field": ["F"] * n, "value": [float(i)] * n}
        sp.append("gpu_fields", cols)
        print(i, flush=True)
        i += 1
    """
)


def test_kill_9_mid_arrow_append_loses_no_acknowledged_batch(tmp_path):
    """A real process appends 4,000-row Arrow records as fast as it can and is killed with SIGKILL: every batch it
    acknowledged replays, whole, and at most the one it was writing is missing."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path / "spool"), str(T0)],
        stdout=subprocess.PIPE,
        text=True,
    )
    acked = [int(proc.stdout.readline()) for _ in range(12)]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    acked += [int(line) for line in proc.stdout.read().split()]
    rows = open_spool(tmp_path).replay(LakeWriter(tmp_path / "lake"))
    df = scan(tmp_path / "lake", "gpu_fields").collect()
    rounds = (df["ts"].dt.epoch("us") - T0) // 1_000_000
    assert sorted(rounds.unique().to_list())[: len(acked)] == acked
    assert rows % 4000 == 0 and len(acked) <= rows // 4000 <= len(acked) + 1
