"""Atomic file writes: temp file in the same directory, fsync the file, rename, fsync the directory.

A reader (or a process restarted after kill -9) sees either the old file or the complete new one, never a
partial one. Temp files start with "." and end in ".tmp", so lake globs (`*.parquet`) never match them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import uuid
from collections.abc import Callable
from pathlib import Path

from gpuledger.errors import LakeError

_OS_ERROR = re.compile(r"\(os error (\d+)\)|\[errno (\d+)\]")  # polars (Rust), pyarrow (Arrow C++)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def explain(e: OSError, path: Path) -> LakeError:
    """The LakeError naming `path` and what the OS said (a full disk, a read-only or forbidden folder)."""
    if e.errno == errno.ENOSPC:
        return LakeError(f"disk full while writing {path}: free space on that disk and run again")
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        # The OS's words for the code: pyarrow's OSError carries its whole message as strerror.
        return LakeError(f"cannot write {path}: {os.strerror(e.errno).lower()}")
    return LakeError(f"cannot write {path}: {e.strerror or e}")


def ensure_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise explain(e, path) from e


def _translate(e: BaseException, path: Path) -> BaseException:
    """The LakeError for an IO failure, or `e` itself. polars (Rust) reports IO failures as
    ComputeError("... (os error 28)") or an OSError with no errno, pyarrow's writer as an OSError with no errno and
    "[errno 30]" in its message, hence the message check."""
    if isinstance(e, OSError) and e.errno is not None:
        return explain(e, path)
    m = _OS_ERROR.search(str(e))  # polars 2 raises an OSError without an errno, the code only in its message
    if m:
        code = int(m.group(1) or m.group(2))
        return explain(OSError(code, os.strerror(code)), path)
    return explain(e, path) if isinstance(e, OSError) else e


def _discard(tmp: Path) -> None:
    """Remove a temp file after a failure, without hiding that failure: on a read-only filesystem unlink() says
    EROFS even for a name that does not exist, and raising it would hide the real error (the write's)."""
    if os.path.lexists(tmp):
        with contextlib.suppress(OSError):  # the write's error is the one to report; a stray .tmp matches no glob
            tmp.unlink()


def _stage(path: Path, write: Callable[[Path], None], fsync: bool) -> Path:
    """Write the content to a temp name beside `path` (fsynced if asked); on failure leave nothing behind."""
    ensure_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        write(tmp)
        if fsync:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    except BaseException as e:
        _discard(tmp)
        err = _translate(e, path)
        if err is e:
            raise
        raise err from e
    return tmp


def stage(path: Path, write: Callable[[Path], None]) -> Path:
    """The first half of write_atomic: `write(tmp_path)`, fsynced, under a temp name beside `path`."""
    return _stage(path, write, fsync=True)


def publish(tmp: Path, path: Path) -> None:
    """The second half of write_atomic: rename the staged `tmp` to `path`, and make the rename durable."""
    try:
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as e:
        _discard(tmp)
        raise explain(e, path) from e


def write_atomic(
    path: Path, write: Callable[[Path], None], guard: contextlib.AbstractContextManager | None = None
) -> None:
    """Call `write(tmp_path)` to produce the content, then publish it at `path` atomically and durably.

    `guard` is held for the rename only (the lake's publishing lock, when `path` may be in a reader's hands)."""
    tmp = stage(path, write)
    with guard or contextlib.nullcontext():
        publish(tmp, path)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    write_atomic(path, lambda tmp: tmp.write_bytes(data))


def write_many_atomic(
    items: list[tuple[Path, Callable[[Path], None]]],
    workers: int = 8,
    guard: contextlib.AbstractContextManager | None = None,
) -> None:
    """Publish many files atomically with one sync instead of one fsync per file.

    Every file is written to its temp name (in threads), then one os.sync() makes all of them durable, then each
    is renamed into place and its directory fsynced. The guarantee is the one write_atomic gives (a published
    file is complete and durable), at a fraction of the cost when a run writes thousands of small partitions.
    If any file fails, none is published and no temp file is left. `guard` is held for the renames only.
    """
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, workers)) as pool:
        futures = [(path, pool.submit(_stage, path, write, False)) for path, write in items]
    staged, errors = [], []
    for path, f in futures:
        if f.exception() is None:
            staged.append((f.result(), path))
        else:
            errors.append(f.exception())
    try:
        if errors:
            raise errors[0]
        os.sync()
        with guard or contextlib.nullcontext():
            for tmp, path in staged:
                os.replace(tmp, path)
        for d in {path.parent for _, path in staged}:
            fsync_dir(d)
    except BaseException:
        for tmp, _ in staged:
            _discard(tmp)
        raise
