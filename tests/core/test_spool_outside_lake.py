"""The spool and its lock live outside the lake, in the state folder (issue 22, item 2): deleting the lake under a
running collector cannot take them with it, a process says 'everything flushed' only once it has checked, and
`collect --once` exits non-zero when its flush failed."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from gpuledger.errors import SpoolError
from gpuledger.lake import LakeWriter, scan
from gpuledger.spool import Spool, default_dir, legacy_dir

CONFIG = """
[collector]
interval_s = 0.1
flush_interval_s = 0.3
node = "n1"

[simulator]
nodes = 1
gpus_per_node = 3
models = ["H100"]
backfill_days = 0
"""


def gpuledger(*args):
    return [sys.executable, "-m", "gpuledger.cli", *args]


def acked_samples(lines) -> dict[int, int]:
    """gpu_samples rows acknowledged per scrape time (us), from `ack <table> <rows> <first ts>` lines."""
    acked: dict[int, int] = {}
    for line in lines:
        parts = line.split()
        if len(parts) == 4 and parts[0] == "ack" and parts[1] == "gpu_samples":
            acked[int(parts[3])] = acked.get(int(parts[3]), 0) + int(parts[2])
    return acked


def in_lake(lake: Path) -> dict[int, int]:
    got = scan(lake, "gpu_samples").collect().group_by(pl.col("ts").dt.epoch("us")).len()
    return dict(zip(got["ts"].to_list(), got["len"].to_list(), strict=True))


def test_default_dir_is_one_folder_per_lake_and_writer_under_the_state_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {"XDG_STATE_HOME": "/var/lib/gpuledger", "HOME": "/home/u"}
    assert default_dir("/srv/lake", "n1", env) == Path("/var/lib/gpuledger/gpuledger/spool/local/srv/lake/n1")
    assert (
        default_dir("lake", "n1", env)
        == Path("/var/lib/gpuledger/gpuledger/spool/local") / str(tmp_path / "lake").lstrip("/") / "n1"
    )
    assert default_dir("s3://bkt/fleet/a", "n2", env) == Path("/var/lib/gpuledger/gpuledger/spool/s3/bkt/fleet/a/n2")
    assert default_dir("s3://bkt", "n2", {"HOME": "/home/u"}) == Path("/home/u/.local/state/gpuledger/spool/s3/bkt/n2")
    assert default_dir("/srv/lake", "n1", env) != default_dir("/srv/lake2", "n1", env)
    assert legacy_dir("/srv/lake", "n1") == Path("/srv/lake/_spool/n1") and legacy_dir("s3://bkt/p", "n1") is None


def test_a_bad_writer_id_is_one_line():
    with pytest.raises(Exception, match="writer id") as e:
        default_dir("/srv/lake", "../x", {"XDG_STATE_HOME": "/s"})
    assert "\n" not in str(e.value)


def test_rm_rf_of_the_lake_under_a_running_collector_then_collect_once_loses_no_acknowledged_row(tmp_path):
    """The reproduction of issue 22: the lake deleted under a running collector, then `collect --once` on the same
    node. The second process finds the spool's lock held (it is not in the lake) and exits 1 naming the holder; the
    first keeps every row it acknowledged after the deletion and says 'everything flushed' only when it is so."""
    lake, cfg = tmp_path / "lake", tmp_path / "c.toml"
    cfg.write_text(CONFIG)
    first = subprocess.Popen(
        gpuledger("collect", "--source", "sim", "--print-acks", "--lake", str(lake), "--config", str(cfg)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        before = [first.stdout.readline() for _ in range(6)]
        assert all(a.startswith("ack ") for a in before), first.stderr.read() if first.poll() is not None else before
        deadline = time.monotonic() + 60
        while not list(lake.glob("gpu_samples/date=*/*.parquet")):  # a flush has written into the lake
            assert time.monotonic() < deadline, "no flush within 60 s"
            time.sleep(0.1)
        # As `rm -rf` would be run again: a flush creating a file mid-removal leaves "Directory not empty".
        for _ in range(100):
            try:
                shutil.rmtree(lake)
                break
            except OSError:
                time.sleep(0.05)
        spool = default_dir(str(lake), "n1")
        assert (spool / "LOCK").exists()  # the lake's deletion did not take the spool or its lock
        second = subprocess.run(
            gpuledger("collect", "--source", "sim", "--once", "--lake", str(lake), "--config", str(cfg)),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert second.returncode == 1
        assert len(second.stderr.splitlines()) == 1
        assert f"spool {spool} is in use by process {first.pid}" in second.stderr
        after = [first.stdout.readline() for _ in range(6)]  # acknowledged after the deletion
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=120)
        assert first.returncode == 0 and "Traceback" not in err, err
        assert "everything flushed" in err
        acked = acked_samples(after + out.splitlines())
        got = in_lake(lake)
        assert len(acked) >= 3 and {ts: got.get(ts, 0) for ts in acked} == acked  # every one in the lake, once
    finally:  # a failed assertion must not leave the collector running
        if first.poll() is None:
            first.kill()
            first.wait()
    assert not [s for s in spool.glob("seg-*.wal") if s.stat().st_size]


def test_collect_once_with_a_failing_flush_exits_1_with_one_line_and_keeps_the_rows(tmp_path):
    lake, cfg = tmp_path / "lake", tmp_path / "c.toml"
    cfg.write_text(CONFIG)
    lake.mkdir()
    (lake / "gpu_samples").write_text("")  # a file where the table's folder goes: every flush of it fails
    once = gpuledger("collect", "--source", "sim", "--once", "--print-acks", "--lake", str(lake), "--config", str(cfg))
    r = subprocess.run(once, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1
    errors = [line for line in r.stderr.splitlines() if " INFO " not in line]
    assert errors == [f"Error: lake error: cannot write {lake}/gpu_samples/date={errors[0].split('date=')[1]}"]
    assert "Not a directory" in errors[0] and "everything flushed" not in r.stderr
    acked = acked_samples(r.stdout.splitlines())
    assert sum(acked.values()) == 3  # one scrape of 3 GPUs, acknowledged: in the spool, not lost
    (lake / "gpu_samples").unlink()
    r = subprocess.run(once, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = in_lake(lake)
    assert {ts: got.get(ts, 0) for ts in acked} == acked and sum(got.values()) == 6  # and the second scrape's


def batch(i: int) -> dict[str, list]:
    return {
        "ts": [1_790_000_000_000_000 + i] * 2,
        "cluster": ["c"] * 2,
        "node": ["n1"] * 2,
        "gpu_uuid": ["GPU-0", "GPU-1"],
        "source": ["test"] * 2,
    }


def test_a_spool_left_in_the_lake_by_an_earlier_release_is_replayed_once(tmp_path):
    lake = tmp_path / "lake"
    old = Spool(legacy_dir(str(lake), "n1"), "n1")
    old.open()
    old.append("gpu_samples", batch(0))
    old.append("gpu_samples", batch(1))
    old.close()  # the earlier release stopped (or died) before flushing
    new = Spool(default_dir(str(lake), "n1"), "n1", legacy=legacy_dir(str(lake), "n1"))
    assert new.replay(LakeWriter(lake)) == 4
    assert new.replay(LakeWriter(lake)) == 0  # its segments were deleted: not twice
    assert scan(lake, "gpu_samples").collect().height == 4


def test_a_legacy_spool_held_by_a_live_process_is_left_to_it(tmp_path):
    lake = tmp_path / "lake"
    live = Spool(legacy_dir(str(lake), "n1"), "n1")
    live.open()
    live.append("gpu_samples", batch(0))
    new = Spool(default_dir(str(lake), "n1"), "n1", legacy=legacy_dir(str(lake), "n1"))
    assert new.replay(LakeWriter(lake)) == 0
    assert [s.stat().st_size > 0 for s in live.segments()] == [True]
    live.close()


def test_check_flushed_refuses_while_data_is_left_or_after_the_spool_was_deleted(tmp_path):
    sp = Spool(tmp_path / "spool", "n1")
    sp.open()
    sp.append("gpu_samples", batch(0))
    with pytest.raises(SpoolError, match=r"still holds 1 segment\(s\)"):
        sp.check_flushed()
    sp.flush(LakeWriter(tmp_path / "lake"))
    sp.check_flushed()  # everything in the lake: no error
    sp.append("gpu_samples", batch(1))
    shutil.rmtree(tmp_path / "spool")  # the folder deleted under the running process, its open segment with it
    with pytest.raises(SpoolError, match="was deleted or replaced while this process wrote to it"):
        sp.check_flushed()
    sp.close()
