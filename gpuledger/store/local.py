"""A lake in a folder on this machine (or a shared filesystem): files written to a temp name and renamed, fsynced;
readers and the rewriters kept apart by flock (gpuledger.store.local_lock); the analytics' state in the lake's own
`_state/` folder; a compaction journaled beside the day it merges."""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import shutil
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import polars as pl

from gpuledger.atomic import ensure_dir, explain, fsync_dir, publish, stage, write_atomic, write_many_atomic
from gpuledger.errors import ClusterError, LakeError
from gpuledger.store import local_lock
from gpuledger.store.base import QUARANTINE, Merge, Staging, Stamp, Store, write_parquet, write_stream

JOURNAL = "_compact.json"
STAGING = "_state/staging"
# gpuledger's own folders in a lake (not any "_" name: a project folder with __pycache__/ is no lake).
OWN_FOLDERS = {"_state", "_spool", "_sim", QUARANTINE}


def machine_state_root(environ: Mapping[str, str] | None = None) -> Path:
    """The XDG state folder (`$XDG_STATE_HOME`, else ~/.local/state) under which gpuledger keeps what lives on
    this machine's disk (`/var/lib/gpuledger` in deploy/, by XDG_STATE_HOME)."""
    environ = os.environ if environ is None else environ
    return Path(environ.get("XDG_STATE_HOME") or Path(environ.get("HOME", "~"), ".local", "state")).expanduser()


class LocalStore(Store):
    def __init__(self, root: Path | str):
        self.root = Path(os.path.abspath(root))  # the same lake from any working folder (a Dask worker's)

    def __str__(self) -> str:
        return str(self.root)

    def url(self, key: str = "") -> str:
        return str(self.root / key) if key else str(self.root)

    @property
    def folder(self) -> Path:
        return self.root

    def views_script_notes(self) -> list[str]:
        return []

    # -- checks ------------------------------------------------------------------------------------------------
    def require(self) -> None:
        root = self.root
        if not root.exists():
            raise LakeError(
                f"no lake at {root}: the folder does not exist (give --lake, $GPULEDGER_LAKE or [lake] path)"
            )
        if not root.is_dir():
            raise LakeError(f"no lake at {root}: it is a file, not a folder")
        from gpuledger import schema

        # A lake holds table folders and gpuledger's own _state, _spool, _sim; a folder holding none is not one.
        names = [p.name for p in root.iterdir()]
        if names and not any(n in schema.TABLES or n in OWN_FOLDERS for n in names):
            raise LakeError(f"no lake at {root}: the folder holds none of the lake's tables (e.g. gpu_samples/, jobs/)")

    def prepare_writer(self, probe_name: str) -> None:
        ensure_dir(self.root)
        probe = self.root / ".write-probe"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as e:
            raise LakeError(f"lake directory {self.root} is not writable: {e.strerror}") from e

    # -- listing and bytes -------------------------------------------------------------------------------------
    def _matching(self, folder: str, pattern: str) -> Iterator[tuple[str, os.DirEntry]]:
        """(key, entry) of each file under `folder` matching `pattern`, in key order, lazily."""
        # os.scandir segment by segment, not Path.glob: a year of a table is 365 folders on every run.
        segments = pattern.split("/")

        def walk(path: str, rel: str, depth: int) -> Iterator[tuple[str, os.DirEntry]]:
            try:
                entries = sorted(os.scandir(path), key=lambda e: e.name)
            except (FileNotFoundError, NotADirectoryError):
                return
            seg, last = segments[depth], depth == len(segments) - 1
            for e in entries:
                if e.name.startswith(".") or not fnmatch.fnmatchcase(e.name, seg):
                    continue  # temp files (".x.tmp") match no pattern
                if last:
                    if e.is_file():
                        yield f"{rel}{e.name}", e
                elif e.is_dir():
                    yield from walk(e.path, f"{rel}{e.name}/", depth + 1)

        yield from walk(str(self.root / folder if folder else self.root), f"{folder}/" if folder else "", 0)

    def has_files(self, folder: str, pattern: str) -> bool:
        return next(self._matching(folder, pattern), None) is not None  # the first match ends the walk

    def files(self, folder: str, pattern: str) -> dict[str, Stamp]:
        found = list(self._matching(folder, pattern))
        out = {}
        for key, e in found:
            try:
                st = e.stat()
            except FileNotFoundError:
                continue  # removed since the scan (a compaction's input)
            out[key] = (st.st_mtime_ns, st.st_size)
        return out

    def get(self, key: str) -> bytes | None:
        try:
            return (self.root / key).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise LakeError(f"cannot read {self.root / key}: {e.strerror or e}") from e

    def put(self, key: str, data: bytes) -> None:
        path = self.root / key
        write_atomic(path, lambda tmp: tmp.write_bytes(data), self._guard([path]))

    def put_new(self, key: str, data: bytes) -> None:
        self._create(key, lambda tmp: tmp.write_bytes(data))

    def put_new_frame(self, key: str, frame: pl.DataFrame) -> None:
        self._create(key, lambda tmp: write_parquet(frame, tmp))

    def _create(self, key: str, write) -> None:
        """A temp file linked to its name (link(2) fails on an existing name: create-if-absent in one step)."""
        path = self.root / key
        tmp = stage(path, write)
        try:
            os.link(tmp, path)
        except FileExistsError:
            same = tmp.read_bytes() == path.read_bytes()
            if not same:
                raise LakeError(
                    f"{path} already exists with other contents: another writer wrote this file (two collectors "
                    "with one collector.node?); not overwritten"
                ) from None
        except OSError as e:
            raise explain(e, path) from e
        finally:
            tmp.unlink(missing_ok=True)
        fsync_dir(path.parent)

    def put_many(self, items: list[tuple[str, bytes]], workers: int = 8) -> None:
        self._replace_many([(key, lambda tmp, data=data: tmp.write_bytes(data)) for key, data in items], workers)

    def put_frames(self, items: list[tuple[str, pl.DataFrame]], workers: int = 8) -> None:
        # polars' writer releases the GIL: the files are written in threads, and made durable by one sync.
        self._replace_many([(key, lambda tmp, f=frame: write_parquet(f, tmp)) for key, frame in items], workers)

    def _replace_many(self, items, workers: int) -> None:
        paths = [(self.root / key, write) for key, write in items]
        guard = self._guard([p for p, _ in paths])
        if len(paths) == 1:
            write_atomic(*paths[0], guard=guard)
        elif paths:
            write_many_atomic(paths, workers, guard=guard)

    def _guard(self, paths: list[Path]):
        """Replacing a file a query may be reading waits for the queries in flight; adding a new one does not (a
        reader lists its files once, so it sees the file whole or not at all)."""
        return local_lock.publishing(self.root) if any(p.exists() for p in paths) else None

    def delete(self, keys: list[str]) -> None:
        present = [self.root / k for k in keys if (self.root / k).exists()]
        if present:
            with local_lock.publishing(self.root):
                for f in present:
                    f.unlink(missing_ok=True)

    def set_aside(self, key: str) -> str:
        dest_key = f"{QUARANTINE}/{key}"
        src, dest = self.root / key, self.root / dest_key
        ensure_dir(dest.parent)
        with local_lock.publishing(self.root):  # a query may have listed it
            try:
                os.replace(src, dest)
            except FileNotFoundError:
                pass  # set aside already (by another run), or gone
            except OSError as e:
                raise explain(e, dest) from e
        fsync_dir(dest.parent)
        fsync_dir(src.parent)
        return dest_key

    def version(self, key: str) -> tuple:
        try:
            st = (self.root / key).stat()
        except FileNotFoundError:
            return ()
        return (st.st_mtime_ns, st.st_size)

    # -- exclusion and state -----------------------------------------------------------------------------------
    def reading(self) -> contextlib.AbstractContextManager[None]:
        return local_lock.reading(self.root)

    def rewriting(self, lease_s: float = 0.0) -> contextlib.AbstractContextManager[None]:
        return local_lock.rewriting(self.root)

    @contextlib.contextmanager
    def state(self, what: str, lease_s: float = 0.0) -> Iterator[Path]:
        with self.rewriting(lease_s):
            yield self.state_folder(what)

    def state_folder(self, what: str) -> Path:
        return self.root / "_state" / what

    def state_version(self, what: str) -> tuple:
        try:
            return tuple(sorted((p.name, p.stat().st_mtime_ns) for p in self.state_folder(what).iterdir()))
        except FileNotFoundError:
            return ()

    def machine_folder(self, what: str, environ: Mapping[str, str] | None = None) -> Path:
        return machine_state_root(environ) / "gpuledger" / what / "local" / self.root.relative_to("/")

    # -- compaction --------------------------------------------------------------------------------------------
    def merge(self, merge: Merge, rows: list[pl.LazyFrame]) -> bool:
        """Journaled: `_compact.json` (inputs, output) first, then the merged file, then the inputs deleted, then
        the journal. The merged file's rename and its inputs' removal happen under the publishing lock, so a query
        sees the inputs or the merged file, never both nor a removed one."""
        day = self.root / merge.folder
        journal = day / JOURNAL
        write_atomic(journal, lambda tmp: tmp.write_bytes(json.dumps(_spec(merge)).encode()))
        tmp = stage(day / merge.output, lambda tmp: write_stream(rows, str(tmp)))
        with local_lock.publishing(self.root):
            publish(tmp, day / merge.output)
            _finish(journal)
        return True

    def finish_merges(self) -> tuple[int, int]:
        journals = [*self.root.glob(f"*/date=*/node=*/{JOURNAL}"), *self.root.glob(f"*/date=*/{JOURNAL}")]
        if not journals:
            return 0, 0
        with local_lock.publishing(self.root):  # it removes inputs a query may have listed
            return sum(_finish(j) for j in journals), 0

    def staging(self, run_id: str) -> Staging:
        return LocalStaging(self, run_id)

    def errors(self, doing: str = "reading or writing") -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


def _spec(merge: Merge) -> dict:
    return {"inputs": list(merge.inputs), "output": merge.output}


def _finish(journal: Path) -> bool:
    """A journaled merge finished: with its output there the inputs go; without, the journal goes and they stay."""
    spec = json.loads(journal.read_text())
    d = journal.parent
    if (d / spec["output"]).exists():
        for name in spec["inputs"]:
            if name != spec["output"]:
                (d / name).unlink(missing_ok=True)
        for sub in {Path(name).parent for name in spec["inputs"]} - {Path(".")}:
            if (d / sub).is_dir() and not any((d / sub).iterdir()):
                (d / sub).rmdir()  # an emptied legacy node= folder
    journal.unlink()
    fsync_dir(d)
    return True


class LocalStaging(Staging):
    """Staged files in `<lake>/_state/staging/<run>/`, on the lake's filesystem (so publishing is a rename),
    outside every table's glob. Runs take turns (rewriting), so anything staged before is a dead run's: dropped."""

    def __init__(self, store: LocalStore, run_id: str):
        self.store = store
        self.root = store.root.resolve()
        shutil.rmtree(self.root / STAGING, ignore_errors=True)
        self.key = f"{STAGING}/{run_id}"
        self.dir = self.root / self.key
        ensure_dir(self.dir)

    def probe(self, token: str) -> str:
        (self.dir / "probe").write_text(token)
        return f"{self.key}/probe"

    def check(self) -> None:
        if not self.dir.is_dir():
            raise ClusterError(
                f"this worker does not see the lake at {self.root} (no {self.dir}): it needs the same path"
            )

    def stage(self, key: str, frame: pl.DataFrame) -> tuple[str, str]:
        self.check()
        tmp = stage(self.dir / key, lambda tmp: write_parquet(frame, tmp))
        return str(tmp), key

    def publish(self, handles: list) -> None:
        paths = [(Path(tmp), self.root / key) for tmp, key in handles]
        for d in {p.parent for _, p in paths}:
            ensure_dir(d)
        with local_lock.publishing(self.root):
            for tmp, path in paths:
                try:
                    os.replace(tmp, path)
                except OSError as e:
                    raise explain(e, path) from e
        for d in {p.parent for _, p in paths}:
            fsync_dir(d)

    def clean(self) -> None:
        # Tasks of later chunks may still run (a task cannot be stopped); what they stage is removed here or by the
        # next run, and never published.
        shutil.rmtree(self.dir, ignore_errors=True)
        with contextlib.suppress(OSError):  # not empty: a cancelled task staged after us; the next run clears it
            (self.root / STAGING).rmdir()


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]
