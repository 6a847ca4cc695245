import fcntl
import os

import polars as pl

import gpuledger.enforcer.store as store


def test_the_decision_table_is_read_under_the_lakes_read_lock(tmp_path, monkeypatch):
    """While the table is collected, a publisher (analytics replacing the files) cannot take the lake."""
    lake = tmp_path / "lake"
    lake.mkdir()
    blocked = []

    def scan(_lake, table):
        fd = os.open(lake, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what publishing() takes
            blocked.append(False)
        except BlockingIOError:
            blocked.append(True)
        finally:
            os.close(fd)
        return pl.LazyFrame({"computed_at": []}, schema={"computed_at": pl.Datetime("us", "UTC")})

    monkeypatch.setattr(store, "has_data", lambda *_a: True)
    monkeypatch.setattr(store, "scan", scan)
    assert store.load_table(lake) is None  # no rows
    assert blocked == [True, True]  # decisions and idle_holds both read under the shared lock
