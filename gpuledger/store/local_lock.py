"""Readers never see a lake file replaced or removed: a readers-writer lock on the lake's folder.

The analytics rewrite their tables' files in place (temp file, then rename) and remove partitions a table left;
compaction replaces a day's files by one. A rename is atomic, but a reader is not one open: DuckDB lists a glob
and reads each file's footer when it binds a view, and opens the file again to read it, so a file replaced in
between is read with the old footer ("TProtocolException: Invalid data", 1 query in 27 while `analyze` looped),
and a file removed in between is not found. So a reader holds `reading(lake)` for the whole of a query, and a
writer replaces or removes files only inside `publishing(lake)`: exclusive, and held only for the renames and
unlinks (milliseconds), never while it computes or writes temp files.

Why a lock rather than new file names plus a manifest of the current ones (docs/design/13-hardening.md): the
layout, the sql/ views and every glob-reading tool (a plain DuckDB session over `gpuledger views`, polars) stay as
they are, and compaction's moment with both the inputs and the merged file in the folder is covered by the same
lock. The cost: a writer waits for the queries in flight (each has a time limit, 60 s by default).

The lock is flock(2) on the lake's folder itself, so it needs no file (a reader never writes, and a read-only lake
can still be read). flock does not queue a waiting writer ahead of new readers (four overlapping readers kept a
writer out for 26 s), so a writer first takes `_state/publish.turnstile`, which readers pass through on the way in:
once a writer waits there, new queries wait behind it. The turnstile is only fairness; correctness is the folder's
lock. Both locks are per thread and re-entrant (a thread that holds one may take it again), and a thread reading
must not publish (it would wait for itself).

The analytics read the raw tables that compaction rewrites, with polars, while they publish their own: so they
cannot hold `reading` for a run. Instead the two rewriters of the lake take turns (`rewriting`): an analytics run
never reads a day compaction is merging, and two runs (`gpuledger analyze` beside `gpuledger up`'s) never
overwrite each other's files.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from gpuledger.atomic import ensure_dir, explain
from gpuledger.errors import LakeError

TURNSTILE = Path("_state") / "publish.turnstile"
REWRITE_LOCK = Path("_state") / "rewrite.lock"
_held = threading.local()  # lake folder -> how deeply this thread holds it (re-entry takes no second lock)


@contextlib.contextmanager
def _hold(root: Path, mode: int) -> Iterator[None]:
    depth = _held.__dict__.setdefault("depth", {})
    key = os.path.abspath(root)
    if depth.get(key):  # this thread holds it already
        depth[key] += 1
        try:
            yield
        finally:
            depth[key] -= 1
        return
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        if mode == fcntl.LOCK_EX:
            raise LakeError(f"cannot publish into {root}: the folder does not exist") from None
        fd = None  # no lake yet: nothing in it can be replaced under this read
    except OSError as e:
        raise LakeError(f"cannot open the lake folder {root}: {e.strerror or e}") from e
    turnstile = None if fd is None else _turnstile(root, create=mode == fcntl.LOCK_EX)
    try:
        if turnstile is not None:
            fcntl.flock(turnstile, mode)  # a writer holds it while it waits; a reader only passes through
        if fd is not None:
            fcntl.flock(fd, mode)
        if turnstile is not None and mode == fcntl.LOCK_SH:
            os.close(turnstile)
            turnstile = None
        depth[key] = 1
        yield
    finally:
        depth[key] = 0
        for f in (turnstile, fd):
            if f is not None:
                os.close(f)  # releases its lock


def _turnstile(root: Path, create: bool) -> int | None:
    path = root / TURNSTILE
    try:
        if not create:
            return os.open(path, os.O_RDONLY)
        path.parent.mkdir(exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        # None yet (no writer has waited), or a read-only lake: the folder's lock alone keeps every read whole.
        return None


def reading(root: Path | str) -> contextlib.AbstractContextManager[None]:
    """Hold for the whole of a read (listing, binding and reading files): no file is replaced or removed meanwhile.

    Raises LakeError naming the folder if it cannot be opened."""
    return _hold(Path(root), fcntl.LOCK_SH)


def publishing(root: Path | str) -> contextlib.AbstractContextManager[None]:
    """Hold while replacing or removing lake files: waits for the reads in flight, and new reads wait for it.

    Raises LakeError naming the folder if it cannot be opened."""
    return _hold(Path(root), fcntl.LOCK_EX)


@contextlib.contextmanager
def rewriting(root: Path | str) -> Iterator[None]:
    """Held by an analytics run and by a compaction for their whole length: one at a time per lake.

    Raises LakeError naming the lock file if it cannot be made (a read-only lake: nothing can be rewritten)."""
    if not Path(root).is_dir():
        yield  # no lake yet: nothing in it to take turns over (and a lock would create the folder)
        return
    path = Path(root) / REWRITE_LOCK
    try:
        fd = os.open(path, os.O_RDONLY)  # flock needs no write access: a lake that has one needs no write here
    except FileNotFoundError:
        ensure_dir(path.parent)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
        except OSError as e:
            raise explain(e, path) from e
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
