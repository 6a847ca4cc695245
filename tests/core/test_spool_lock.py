import fcntl

import pytest

import gpuledger.spool as spool_mod
from gpuledger.errors import SpoolError
from gpuledger.spool import Spool


def test_a_lock_file_unlinked_before_the_flock_is_not_held(tmp_path, monkeypatch):
    """The adopter race: B opens LOCK, the adopter unlinks it, B's flock lands on a file no longer at that path.
    B must notice and lock the file that is there, so a third writer is refused."""
    real_flock = fcntl.flock
    calls = []

    def flock_after_unlink(fd, op):
        if not calls:
            (tmp_path / "LOCK").unlink()  # the adopter's delete, between B's open and B's flock
        calls.append(op)
        return real_flock(fd, op)

    monkeypatch.setattr(spool_mod.fcntl, "flock", flock_after_unlink)
    b = Spool(tmp_path, "b")
    b.lock()
    monkeypatch.setattr(spool_mod.fcntl, "flock", real_flock)
    with pytest.raises(SpoolError, match="in use by"):
        Spool(tmp_path, "c").lock()
    assert len(calls) == 2  # the first flock was on the unlinked file, the second on the LOCK at the path


def test_a_synced_failed_append_that_cannot_be_cut_back_is_not_rotated_out(tmp_path, monkeypatch):
    """write ok, fdatasync fails, the truncate back fails: a whole record of a batch the caller still holds stays
    in the file. Rotation must cut it first (or refuse), else the lake gets it and the retried append too."""
    from gpuledger.spool import read_segment

    sp = Spool(tmp_path / "spool", "w1", fsync=True)
    sp.open()
    cols = {"x": [1]}
    sp.append("t", cols)

    def fail(*_a):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(spool_mod.os, "fdatasync", fail)
    monkeypatch.setattr(spool_mod.os, "ftruncate", fail)
    with pytest.raises(SpoolError):
        sp.append("t", {"x": [2]})
    with pytest.raises(SpoolError, match="cannot cut spool segment"):
        sp.rotate()  # the truncate still fails: no swap
    monkeypatch.undo()
    seg, _ = sp.rotate()
    assert [r[1]["x"] for r in read_segment(seg).records] == [[1]]  # batch 2 is not in it
