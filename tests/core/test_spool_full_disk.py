"""A full disk must not lose acknowledged data (issue 13, item 1): an append writes all of its bytes or fails and is
cut back; the collector keeps what the spool could not take and retries it; the webhook still answers, counts what
it could not spool and records it in health_events.

Each scenario runs on a real small filesystem: a 3 MB tmpfs filled by another file (as root), and under a file-size
limit in a subprocess (anywhere). The scenarios themselves are in tests/core/full_disk.py.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuledger.errors import SpoolError
from gpuledger.lake import LakeWriter, scan
from gpuledger.spool import Spool, read_segment

from core import full_disk  # the scenarios: a helper module (also run as a script), not a test module

SCRAPE_TS = [int((full_disk.T + 10 * (i + 1)) * 1e6) for i in range(full_disk.SCRAPES)]
UIDS = [f"u-{i:02d}" for i in range(20)]


@pytest.fixture
def tmpfs(tmp_path):
    """A 3 MB tmpfs mounted for the test, unmounted after it."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; the file-size-limit variant of this test runs anywhere")
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=True)


def filler(mnt: Path, leave_bytes: int):
    """fill(): another file takes every free page of the tmpfs but `leave_bytes`; free(): it is deleted."""
    path = mnt / "filler"

    def fill(_spool_dir):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while os.write(fd, b"\0" * 65536):
                pass
        except OSError as e:
            assert e.errno == errno.ENOSPC
        finally:
            os.close(fd)
        os.truncate(path, os.path.getsize(path) - leave_bytes)

    return fill, path.unlink


def under_a_file_size_limit(which: str, tmp_path: Path) -> dict:
    r = subprocess.run(
        [sys.executable, full_disk.__file__, which, str(tmp_path / "lake" / "_spool" / "n1"), str(tmp_path / "lake")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def check_collector(got: dict) -> None:
    per_batch = full_disk.GPUS
    assert (got["acked_at_fill"], got["acked_at_free"]) == (10, 10)  # nothing acknowledged while the disk was full
    assert got["pending_rows_when_full"] == 10 * per_batch  # the 10 batches of the full spell, kept in memory
    assert got["acked_ts"] == SCRAPE_TS  # every scrape acknowledged once, in order, once the disk had room
    assert got["lake_rows"] == 30 * per_batch and got["lake_ts"] == SCRAPE_TS  # 2,880 acknowledged, 2,880 in the lake
    assert got["corrupt"] == [] and got["segments_left"] == []


def check_webhook(got: dict) -> None:
    assert got["statuses"] == [[200, True]] * 20  # every decision answered with its AdmissionReview, none a 500
    acked, lost = got["acked"], got["unspooled"]
    assert acked[:5] == UIDS[:5] and acked[-5:] == UIDS[15:] and lost >= 1 and len(acked) + lost == 20
    # The spool as kill -9 would leave it: exactly the acknowledged decisions, nothing torn between them.
    assert got["spooled_uids"] == acked and got["corrupt_at"] == [None]
    assert got["lake_uids"] == acked
    assert got["events"] == [["audit_unspooled", lost, "enforcer"]]
    assert got["audit_errors_metric"] == [f"gpuledger_audit_errors_total {float(lost)}"]


def test_collector_on_a_full_tmpfs(tmpfs):
    # 8 KB left: the next 27 KB record is a short write, then ENOSPC.
    fill, free = filler(tmpfs, leave_bytes=8192)
    check_collector(full_disk.collector_scenario(tmpfs / "lake" / "_spool" / "n1", tmpfs / "lake", fill, free))


def test_collector_under_a_file_size_limit(tmp_path):
    check_collector(under_a_file_size_limit("collector", tmp_path))


def test_webhook_on_a_full_tmpfs(tmpfs, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmpfs / "state"))  # the audit spool, outside the lake, on the tmpfs
    # Nothing left but the rest of the segment's last page: a decision or so fits, the next one is cut short.
    fill, free = filler(tmpfs, leave_bytes=0)
    check_webhook(full_disk.webhook_scenario(tmpfs / "lake", fill, free))


def test_webhook_under_a_file_size_limit(tmp_path):
    got = under_a_file_size_limit("webhook", tmp_path)
    check_webhook(got)
    # 100 bytes of room, less than any decision: the ten decisions of the full spell are the ones not spooled.
    assert got["acked"] == UIDS[:5] + UIDS[15:] and got["unspooled"] == 10


def test_a_failed_append_is_cut_back_to_the_last_whole_record(tmp_path, monkeypatch):
    sp = Spool(tmp_path / "spool", "w1")
    sp.open()
    sp.append("gpu_samples", {"ts": [1], "cluster": ["c"], "node": ["n"], "gpu_uuid": ["G"], "source": ["t"]})
    good = sp._current.stat().st_size
    real_write = os.write

    def short_then_full(fd, data):  # what a filling disk does: part of the record, then ENOSPC
        if len(data) > 10:
            return real_write(fd, bytes(data[:10]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", short_then_full)
    with pytest.raises(SpoolError, match="No space left on device"):
        sp.append("gpu_samples", {"ts": [2], "cluster": ["c"], "node": ["n"], "gpu_uuid": ["G"], "source": ["t"]})
    monkeypatch.undo()
    assert sp._current.stat().st_size == good  # the 10 torn bytes are gone
    sp.append("gpu_samples", {"ts": [3], "cluster": ["c"], "node": ["n"], "gpu_uuid": ["G"], "source": ["t"]})
    got = read_segment(sp._current)
    assert [c["ts"] for _, c in got.records] == [[1], [3]] and got.corrupt_at is None and got.torn_tail_bytes == 0
    assert sp.flush(LakeWriter(tmp_path / "lake")) == 2
    assert sorted(scan(tmp_path / "lake", "gpu_samples").collect()["ts"].dt.epoch("us").to_list()) == [1, 3]
