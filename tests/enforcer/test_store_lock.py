import fcntl
import os
from types import SimpleNamespace

import polars as pl

import gpuledger.enforcer.store as store


def test_the_decision_table_is_read_under_the_lakes_read_lock(tmp_path, monkeypatch):
    """While the table is collected, a publisher (analytics replacing the files) cannot take the lake."""
    lake = tmp_path / "lake"
    lake.mkdir()
    blocked = []

    class Lake:  # the query helper, as load_table opens it, seeing whether a publisher could take the lake
        def __init__(self, root):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

        def execute(self, sql, params=None):
            fd = os.open(lake, os.O_RDONLY | os.O_DIRECTORY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what publishing() takes
                blocked.append(False)
            except BlockingIOError:
                blocked.append(True)
            finally:
                os.close(fd)
            frame = pl.DataFrame({"computed_at": []}, schema={"computed_at": pl.Datetime("us", "UTC")})
            return SimpleNamespace(frame=frame)

    monkeypatch.setattr(store, "has_data", lambda *_a: True)
    monkeypatch.setattr(store, "Lake", Lake)
    assert store.load_table(lake, "c") is None  # no rows
    assert blocked == [True, True]  # decisions and idle_holds both read under the shared lock
