"""The analytics' state on an object-store lake (gpuledger/store/s3_state.py), against moto in its own process: the
snapshot (content-addressed objects, one manifest PUT), the local copy that is only a cache, and the lease."""

from __future__ import annotations

import hashlib
import json
import time

import obstore
import pytest

from gpuledger.errors import LakeError
from gpuledger.store import open_store
from gpuledger.store.s3 import S3Store
from gpuledger.store.s3_state import Lease, manifest, pull, push

STATE = "_state/analytics"  # what an analytics run's session keeps (Store.state("analytics"))


def _objects(lake: S3Store) -> set[str]:
    prefix = (lake.loc / STATE / "objects").key + "/"
    return {o["path"][len(prefix) :] for b in obstore.list(lake.client(), prefix=prefix) for o in b}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _committed(lake: S3Store, local, files: dict[str, bytes]) -> Lease:
    """A first run's state committed: the lease taken, `files` written into the local copy and pushed."""
    lease = Lease(lake, STATE, 60, holder="one")
    lease.acquire()
    pull(lake, STATE, local)
    for rel, data in files.items():
        (local / rel).write_bytes(data)
    push(lake, STATE, local, {}, lease)
    return lease


@pytest.fixture
def lake(s3) -> S3Store:
    return open_store(f"s3://{s3.bucket}/eu/lake")


def test_a_run_commits_its_state_and_another_machine_pulls_it(lake, tmp_path):
    one = tmp_path / "one"
    lease = Lease(lake, STATE, 60, holder="one")
    lease.acquire()
    assert pull(lake, STATE, one) == {}  # a new lake: no state yet
    (one / "incremental").mkdir(parents=True)
    (one / "gpu_5min.json").write_bytes(b'{"done_until_s": 1}')
    (one / "incremental" / "state.json").write_bytes(b"{}")
    push(lake, STATE, one, {}, lease)
    assert manifest(lake, STATE) == {
        "gpu_5min.json": _sha(b'{"done_until_s": 1}'),
        "incremental/state.json": _sha(b"{}"),
    }
    assert _objects(lake) == {_sha(b'{"done_until_s": 1}'), _sha(b"{}")}

    # The next run changes one file, removes one and adds one: only the new bytes are put, the unnamed deleted.
    before = pull(lake, STATE, one)
    (one / "gpu_5min.json").write_bytes(b'{"done_until_s": 2}')
    (one / "incremental" / "state.json").unlink()
    (one / "memo").mkdir()
    (one / "memo" / "models.parquet").write_bytes(b"PAR1")
    push(lake, STATE, one, before, lease)
    assert manifest(lake, STATE) == {
        "gpu_5min.json": _sha(b'{"done_until_s": 2}'),
        "memo/models.parquet": _sha(b"PAR1"),
    }
    assert _objects(lake) == {_sha(b'{"done_until_s": 2}'), _sha(b"PAR1")}

    # Another machine (a new pod, an empty copy) gets the same files; a copy edited behind the index is refetched,
    # and a file the manifest does not name is dropped.
    two = tmp_path / "two"
    pull(lake, STATE, two)
    assert (two / "gpu_5min.json").read_bytes() == b'{"done_until_s": 2}'
    assert (two / "memo" / "models.parquet").read_bytes() == b"PAR1"
    (two / "gpu_5min.json").write_bytes(b'{"done_until_s": 99}')
    (two / "stray.json").write_bytes(b"{}")
    pull(lake, STATE, two)
    assert (two / "gpu_5min.json").read_bytes() == b'{"done_until_s": 2}'
    assert not (two / "stray.json").exists()


def test_a_run_that_dies_before_its_manifest_leaves_the_last_snapshot_whole(lake, tmp_path, monkeypatch):
    local = tmp_path / "copy"
    lease = _committed(lake, local, {"a.json": b"old"})
    before = pull(lake, STATE, local)
    (local / "a.json").write_bytes(b"new")

    def dies(key, data):
        raise LakeError(f"object store endpoint unreachable, while writing {lake.url(key)}")

    with monkeypatch.context() as m, pytest.raises(LakeError):
        m.setattr(lake, "put", dies)  # the manifest PUT fails; the objects went (put_many)
        push(lake, STATE, local, before, lease)
    assert manifest(lake, STATE) == {"a.json": _sha(b"old")}  # still the last run's, and its object is there
    assert _sha(b"old") in _objects(lake)
    pull(lake, STATE, local)
    assert (local / "a.json").read_bytes() == b"old"  # the local copy follows the bucket
    # The next committed run deletes the dead run's orphan object.
    assert _sha(b"new") in _objects(lake)
    before = pull(lake, STATE, local)
    (local / "a.json").write_bytes(b"newer")
    push(lake, STATE, local, before, lease)
    assert _objects(lake) == {_sha(b"newer")}


def test_one_run_at_a_time_and_a_dead_runs_lease_is_taken_over_once_expired(lake, tmp_path):
    first = Lease(lake, STATE, 60, holder="node-a pid 1")
    first.acquire()
    with pytest.raises(LakeError) as e:
        Lease(lake, STATE, 60, holder="node-b pid 2").acquire()
    msg = str(e.value)
    assert "another analytics run holds" in msg and "'node-a pid 1'" in msg and "lease.json" in msg
    assert "\n" not in msg
    first.release()
    second = Lease(lake, STATE, 1, holder="node-b pid 2")
    second.acquire()  # free again once released
    held = json.loads(lake.get(f"{STATE}/lease.json"))
    assert held["holder"] == "node-b pid 2"

    # node-b is killed (-9: no release). Its lease expires after its time to live, and then a run takes it over.
    time.sleep(1.2)
    third = Lease(lake, STATE, 60, holder="node-c pid 3")
    third.acquire()
    assert json.loads(lake.get(f"{STATE}/lease.json"))["holder"] == "node-c pid 3"
    # node-b was only paused: its next renewal finds the lease taken, and it may not commit.
    second.renew()
    assert second.lost and "taken over" in second.lost
    with pytest.raises(LakeError) as e:
        push(lake, STATE, tmp_path, {}, second)
    assert "analytics state not saved" in str(e.value)
    assert manifest(lake, STATE) == {}
    second.release()  # a lost lease is not deleted: it is node-c's
    assert lake.get(f"{STATE}/lease.json") is not None
    third.release()
    assert lake.get(f"{STATE}/lease.json") is None


def test_a_lease_is_renewed_while_a_run_works(lake):
    with Lease(lake, STATE, 1.5, holder="long run").kept() as lease:
        first = json.loads(lake.get(f"{STATE}/lease.json"))["expires_at_s"]
        time.sleep(1.0)  # two renewals (every 0.5 s)
        later = json.loads(lake.get(f"{STATE}/lease.json"))["expires_at_s"]
        assert later > first and not lease.lost
        with pytest.raises(LakeError):
            Lease(lake, STATE, 1.5, holder="another").acquire()
    assert lake.get(f"{STATE}/lease.json") is None


def test_the_dashboards_rebuild_when_a_run_commits_not_when_the_lease_is_renewed(lake, tmp_path):
    from gpuledger.dashboards.data import DashData

    dash = DashData(lake)
    assert dash._state_key() == ()  # no analytics run yet
    lease = Lease(lake, STATE, 60, holder="one")
    lease.acquire()
    (tmp_path / "a.json").write_bytes(b"1")
    push(lake, STATE, tmp_path, {}, lease)
    first = dash._state_key()
    assert first != ()
    lease.renew()
    assert dash._state_key() == first
    before = pull(lake, STATE, tmp_path)
    (tmp_path / "a.json").write_bytes(b"2")
    push(lake, STATE, tmp_path, before, lease)
    assert dash._state_key() not in ((), first)


def test_a_snapshot_that_cannot_be_used_is_said_and_the_run_starts_from_no_state(lake, tmp_path, caplog):
    local = tmp_path / "copy"
    lease = _committed(lake, local, {"a.json": b"1", "b.json": b"2"})
    # An object the manifest names is deleted by hand: the state is derived from the lake, so the run recomputes.
    lake.delete([f"{STATE}/objects/{_sha(b'2')}"])
    fresh = tmp_path / "fresh"
    assert pull(lake, STATE, fresh) == {}
    assert not [p for p in fresh.rglob("*.json") if p.name != ".pulled.json"]
    assert f"names b.json as object {_sha(b'2')}, which is missing" in caplog.text
    # A manifest that is not one (written by hand): the same.
    lake.put(f"{STATE}/manifest.json", b"not json")
    assert pull(lake, STATE, local) == {} and not (local / "a.json").exists()
    assert "is not an analytics state manifest: recomputing every table" in caplog.text
    # The next commit writes a whole snapshot again.
    (local / "a.json").write_bytes(b"3")
    push(lake, STATE, local, {}, lease)
    assert manifest(lake, STATE) == {"a.json": _sha(b"3")} and _objects(lake) == {_sha(b"3")}


def test_renewals_from_two_threads_at_once_keep_the_lease(lake):
    import threading

    lease = Lease(lake, STATE, 60, holder="one")
    lease.acquire()
    threads = [threading.Thread(target=lease.renew) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not lease.lost
    lease.renew()
    assert not lease.lost
