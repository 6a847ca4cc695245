"""A run's state on an object-store lake (S3Store.state): a local copy, and the bucket's snapshot of it.

The state (the analytics': watermarks, the incremental state, the jobs' newest rows, the day memos, the partition
manifests: a few MB, 14 MB for 90 days of 1,000 GPUs) is read and written by many small pieces of code with Path
calls. On a local lake it lives in `<lake>/_state/<what>/`. On an object-store lake a run works on a copy of it on
local disk (S3Store.machine_folder: an emptyDir in the Deployment, which may be lost at any time) and the bucket
holds the truth, as a snapshot committed once per run:

- `_state/<what>/objects/<sha256>`: each state file's bytes, content-addressed (If-None-Match: a key is never
  overwritten, so an object a manifest names never changes);
- `_state/<what>/manifest.json`: {path in the state folder: sha256}, one PUT at the end of a successful run.

A run pulls the manifest's files it lacks (a file whose (mtime, size) is the one it pulled or pushed is not read
again), works, then puts the new objects and the manifest last. A run that dies before the manifest leaves the last
run's snapshot whole (objects are deleted only once no manifest names them): the next run starts from that state,
whose difference with the lake's inputs covers what the dead run did (as on a local lake, where state is written
after the tables). Only one run may write: a lease (`Lease`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import logging
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import obstore

from gpuledger.atomic import write_bytes_atomic
from gpuledger.errors import LakeError
from gpuledger.store.s3 import S3Store, explain

log = logging.getLogger(__name__)
INDEX = ".pulled.json"  # in the local copy: {path: [sha256, mtime_ns, size]} of the files as pulled or pushed


# -- the lease ------------------------------------------------------------------------------------------------------
class Lease:
    """One analytics run at a time on an object-store lake, where flock cannot reach: `_state/analytics/lease.json`,
    {"holder", "expires_at_s"}, created with If-None-Match, renewed with If-Match on its ETag (so of two runs that
    both saw it expire only one takes it over), deleted at the end. A run killed with -9 leaves it until it expires
    (`[analytics] lease_s`): the run after waits that long at most."""

    def __init__(self, store: S3Store, state: str, ttl_s: float, holder: str | None = None):
        self.store = store
        self.key = f"{state}/lease.json"
        self.obj = store.loc / self.key  # what messages name
        self.ttl_s = ttl_s
        self.holder = holder or f"{socket.gethostname()} pid {os.getpid()}"
        self.e_tag: str | None = None
        self.lost: str | None = None  # why, once a renewal found another holder
        # The renewing thread and the commit's own renewal must not race: two PUTs If-Match the same ETag, and the
        # second would find the lease "taken over" by the first.
        self._renewing = threading.Lock()
        self._store = store.client()

    def _body(self) -> bytes:
        return json.dumps({"holder": self.holder, "expires_at_s": time.time() + self.ttl_s}).encode()

    def _put(self, mode) -> str:
        return obstore.put(self._store, self.obj.key, self._body(), mode=mode, use_multipart=False)["e_tag"]

    def acquire(self) -> None:
        """Take the lease, or LakeError naming its holder and until when."""
        try:
            self.e_tag = self._put("create")
            return
        except obstore.exceptions.AlreadyExistsError:
            pass
        except (obstore.exceptions.BaseError, OSError) as e:
            raise explain(e, self.obj, "writing the analytics lease") from None
        try:
            got = obstore.get(self._store, self.obj.key)
            tag, held = got.meta["e_tag"], json.loads(bytes(got.bytes()))
        except FileNotFoundError:  # ended between our PUT and this GET: try once more
            return self._retake(None)
        except (obstore.exceptions.BaseError, OSError) as e:
            raise explain(e, self.obj, "reading the analytics lease") from None
        except ValueError:
            held, tag = {"holder": "unknown (unreadable lease)", "expires_at_s": 0}, got.meta["e_tag"]
        if float(held.get("expires_at_s", 0)) > time.time():
            until = dt.datetime.fromtimestamp(float(held["expires_at_s"]), dt.timezone.utc)
            until = until.isoformat(timespec="seconds")
            raise LakeError(
                f"another analytics run holds {self.obj}: {held.get('holder')!r}, until {until} (renewed while it "
                "runs; a run killed without ending frees it then)"
            )
        self._retake(tag)

    def _retake(self, tag: str | None) -> None:
        try:
            self.e_tag = self._put("create" if tag is None else {"e_tag": tag})
        except (obstore.exceptions.PreconditionError, obstore.exceptions.AlreadyExistsError):
            raise LakeError(f"another analytics run took {self.obj} over a moment ago; not started") from None
        except (obstore.exceptions.BaseError, OSError) as e:
            raise explain(e, self.obj, "writing the analytics lease") from None

    def renew(self) -> None:
        with self._renewing:
            if self.lost:
                return
            try:
                self.e_tag = self._put({"e_tag": self.e_tag})
            except (obstore.exceptions.PreconditionError, FileNotFoundError):
                self.lost = f"{self.obj} was taken over by another run (this run outlived its lease)"
            except (obstore.exceptions.BaseError, OSError):
                pass  # the store did not answer: the next renewal tries again, the commit checks

    def release(self, failed: bool = False) -> None:
        """Delete the lease. Not raised if that fails, only said (the lease expires by itself), and not even said
        when the run `failed`: its own error (most often the same store failing) is the line that matters."""
        if self.e_tag is not None and not self.lost:
            try:
                self.store.delete([self.key])
            except LakeError as e:
                if not failed:
                    log.warning("analytics lease not released (%s): the next run waits up to %g s", e, self.ttl_s)

    @contextlib.contextmanager
    def kept(self) -> Iterator[Lease]:
        """Held, and renewed every third of its time to live in a thread, for the block."""
        self.acquire()
        stop = threading.Event()

        def renewing():
            while not stop.wait(self.ttl_s / 3):
                self.renew()

        t = threading.Thread(target=renewing, name="analytics-lease", daemon=True)
        t.start()
        failed = True
        try:
            yield self
            failed = False
        finally:
            stop.set()
            t.join()
            self.release(failed)


# -- the snapshot ---------------------------------------------------------------------------------------------------
def _sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _local_files(local: Path) -> dict[str, os.stat_result]:
    if not local.is_dir():
        return {}
    return {
        p.relative_to(local).as_posix(): p.stat()
        for p in sorted(local.rglob("*"))
        if p.is_file() and p.name != INDEX and not p.name.endswith(".tmp")  # atomic's temp files
    }


def _index(local: Path) -> dict[str, list]:
    try:
        return json.loads((local / INDEX).read_text())
    except (FileNotFoundError, ValueError):
        return {}


def manifest(store: S3Store, state: str) -> dict[str, str]:
    """The committed snapshot: {path: sha256}; {} when there is none (a new lake) or it cannot be used."""
    where = store.url(f"{state}/manifest.json")
    data = store.get(f"{state}/manifest.json")
    if data is None:
        return {}
    try:
        files = json.loads(data)["files"]
        if isinstance(files, dict) and all(isinstance(v, str) for v in files.values()):
            return files
    except (ValueError, KeyError, TypeError):
        pass
    log.warning("%s is not an analytics state manifest: recomputing every table from the lake once", where)
    return {}


def pull(store: S3Store, state: str, local: Path) -> dict[str, str]:
    """Make `local` the bucket's last committed state: fetch the files that differ, drop those it does not name.
    Returns the manifest."""
    files = manifest(store, state)
    index, have = _index(local), _local_files(local)
    fresh = {}
    for rel, sha in files.items():
        st, known = have.get(rel), index.get(rel)
        if st is not None and known == [sha, st.st_mtime_ns, st.st_size]:
            fresh[rel] = known
            continue
        data = store.get(f"{state}/objects/{sha}")
        if data is None:
            # Only a hand (or a lifecycle rule on the prefix) deletes a named object. The state is derived from the
            # lake: start from none, and the run recomputes every table, rather than stop every run from now on.
            log.warning(
                "%s names %s as object %s, which is missing: recomputing every table from the lake once",
                store.url(f"{state}/manifest.json"),
                rel,
                sha,
            )
            return pull_nothing(local)
        write_bytes_atomic(local / rel, data)
        st = (local / rel).stat()
        fresh[rel] = [sha, st.st_mtime_ns, st.st_size]
    for rel in set(have) - set(files):
        (local / rel).unlink()
    write_bytes_atomic(local / INDEX, json.dumps(fresh, sort_keys=True).encode())
    return files


def pull_nothing(local: Path) -> dict[str, str]:
    """An empty state: the copy emptied, as for a new lake (its first run commits a whole snapshot)."""
    shutil.rmtree(local, ignore_errors=True)
    write_bytes_atomic(local / INDEX, b"{}")
    return {}


def push(store: S3Store, state: str, local: Path, before: dict[str, str], lease: Lease) -> None:
    """Commit `local` as the bucket's state: new objects, then the manifest (one PUT), then unnamed objects go."""
    index, have = _index(local), _local_files(local)
    files, fresh = {}, {}
    for rel, st in have.items():
        known = index.get(rel)
        sha = known[0] if known and known[1:] == [st.st_mtime_ns, st.st_size] else _sha(local / rel)
        files[rel], fresh[rel] = sha, [sha, st.st_mtime_ns, st.st_size]
    committed = set(before.values())
    new = {sha: rel for rel, sha in files.items() if sha not in committed}
    objects = [(f"{state}/objects/{sha}", (local / rel).read_bytes()) for sha, rel in new.items()]
    store.put_many(objects)  # content-addressed: putting one again writes the same bytes
    lease.renew()  # the commit is this run's only if the lease still is
    if lease.lost:
        raise LakeError(f"analytics state not saved: {lease.lost}; the tables it wrote are redone by the next run")
    body = json.dumps({"files": files, "committed_at_s": time.time(), "by": lease.holder}, sort_keys=True)
    store.put(f"{state}/manifest.json", body.encode())
    write_bytes_atomic(local / INDEX, json.dumps(fresh, sort_keys=True).encode())
    # Objects no manifest names: this run's replaced ones, and any a run that died before its manifest put.
    listed = store.files(f"{state}/objects", "*")
    keep = set(files.values())
    store.delete([k for k in listed if k.rsplit("/", 1)[-1] not in keep])


@contextlib.contextmanager
def session(store: S3Store, what: str, lease_s: float) -> Iterator[Path]:
    """A run on an object-store lake: the lease held, the state `what` pulled into the local copy (yielded), and
    committed if the block ends without an error (else the bucket keeps the last run's)."""
    local = store.machine_folder(what)
    state = f"_state/{what}"
    with Lease(store, state, lease_s).kept() as lease:
        try:
            before = pull(store, state, local)
        except OSError as e:
            shutil.rmtree(local, ignore_errors=True)  # a broken local copy is only a cache: the next run refetches
            raise LakeError(f"analytics state copy {local}: {e.strerror or e}") from e
        yield local
        push(store, state, local, before, lease)
