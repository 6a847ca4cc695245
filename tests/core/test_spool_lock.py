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
