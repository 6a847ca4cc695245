"""Readers against a writer: a query never sees a lake file replaced or removed (issue 13, item 3).

Real processes, real DuckDB on real Parquet: a writer process rewrites (or compacts) the files while this process
queries them through gpuledger.query.Lake, for a bounded number of writes. Every answer must be one the lake held
as a whole; before the lake lock, 1 query in ~100 failed with "TProtocolException: Invalid data" or counted a
day twice.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from gpuledger.query import Lake
from gpuledger.store.local_lock import REWRITE_LOCK, TURNSTILE, publishing, reading

REPO = Path(__file__).resolve().parents[2]

# Two versions of three days of gpu_samples: version v has ROWS[v] rows a day, each with util_gpu_pct = v + 1.
ROWS = (2000, 3000)
DAYS = 3
# (count(*), sum(util_gpu_pct)) of each version, by hand: 3 x 2000 x 1 and 3 x 3000 x 2.
ANSWERS = {(6000, 6000.0), (9000, 18000.0)}

_FRAME = """
import datetime as dt, sys
import polars as pl
from gpuledger.lake import LakeWriter

def frame(v, rows, days, node="n1", name="x"):
    day0 = dt.datetime(2026, 10, 1, tzinfo=dt.timezone.utc)
    ts = [day0 + dt.timedelta(days=d, seconds=s) for d in range(days) for s in range(rows)]
    return pl.DataFrame({
        "ts": ts, "cluster": ["c"] * len(ts), "node": [node] * len(ts),
        "gpu_uuid": [f"GPU-{i % 8}" for i in range(len(ts))], "util_gpu_pct": [float(v + 1)] * len(ts),
        "source": ["test"] * len(ts), "date": [t.date() for t in ts],
    })
"""


def _python(code: str, *args) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)], env=env, stdout=subprocess.PIPE, text=True
    )


def _query_while(writer: subprocess.Popen, lake: Path, sql: str) -> tuple[list, list[str]]:
    """Query `lake` in a loop until the writer exits (bounded by its writes); the answers and the errors."""
    answers, errors = [], []
    with Lake(lake) as db:  # one connection throughout, as the dashboards hold theirs
        while writer.poll() is None:
            try:
                answers.append(tuple(db.execute(sql).rows[0]))
            except Exception as e:  # counted: the assertion below names them
                errors.append(f"{type(e).__name__}: {e}")
    assert writer.wait() == 0
    return answers, errors


def test_queries_never_see_a_file_replaced(tmp_path):
    lake = tmp_path / "lake"
    writer = _python(
        _FRAME
        + """
root, n, days, *rows = sys.argv[1], *map(int, sys.argv[2:])
versions = [frame(v, r, days) for v, r in enumerate(rows)]
LakeWriter(root).write_partitions("gpu_samples", versions[0], "analytics")
print("ready", flush=True)
for i in range(1, n):
    LakeWriter(root).write_partitions("gpu_samples", versions[i % 2], "analytics")  # the same 3 files, rewritten
""",
        lake,
        300,
        DAYS,
        *ROWS,
    )
    assert writer.stdout.readline() == "ready\n"  # the first version is in; 299 rewrites follow
    answers, errors = _query_while(writer, lake, "SELECT count(*), sum(util_gpu_pct) FROM gpu_samples")
    assert answers, "no query ran while the writer did"
    torn = [a for a in answers if a not in ANSWERS]
    assert (errors, torn) == ([], []), (
        f"of {len(answers) + len(errors)} queries, {len(errors)} failed: {errors[:2]}; "
        f"{len(torn)} answered rows the lake never held: {torn[:2]}"
    )


def test_queries_never_see_a_compaction_half_done(tmp_path):
    """Compaction puts a day's merged file in place, then removes its inputs: a query between the two counted the
    day twice, and one that had listed an input found it gone."""
    lake = tmp_path / "lake"
    days, files, rows = 60, 4, 50
    setup = _python(
        _FRAME
        + """
root, days, files, rows = sys.argv[1], *map(int, sys.argv[2:])
for k in range(files):  # `files` files a day, each under its own name, as spool flushes write them
    LakeWriter(root).write_partitions("gpu_samples", frame(0, rows, days, node=f"n{k}"), f"w-{k}")
""",
        lake,
        days,
        files,
        rows,
    )
    assert setup.wait() == 0
    writer = _python(
        """
import datetime as dt, sys
from gpuledger.compaction import compact
report = compact(sys.argv[1], today=dt.date(2027, 1, 1))
assert report.partitions == int(sys.argv[2]), report
""",
        lake,
        days,
    )
    answers, errors = _query_while(writer, lake, "SELECT count(*) FROM gpu_samples")
    assert len(list(lake.glob("gpu_samples/date=*/*.parquet"))) == days  # one merged file a day
    # 60 days x 4 files x 50 rows = 12,000 at every moment, before, during and after the merge.
    torn = [a for a in answers if a != (days * files * rows,)]
    assert (errors, torn) == ([], []), (
        f"of {len(answers) + len(errors)} queries, {len(errors)} failed: {errors[:2]}; "
        f"{len(torn)} counted other than 12,000: {torn[:2]}"
    )


def test_a_writer_waits_for_a_reader_and_new_readers_wait_for_it(tmp_path):
    """The lock itself, probed without blocking: what `reading` holds, `publishing` cannot take, and back."""
    lake = tmp_path / "lake"
    lake.mkdir()

    def free(mode: int) -> bool:
        fd = os.open(lake, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        finally:
            os.close(fd)

    with reading(lake):
        assert not free(fcntl.LOCK_EX)  # a writer waits
        assert free(fcntl.LOCK_SH)  # other readers do not
        with reading(lake):  # re-entrant in one thread
            pass
        assert not free(fcntl.LOCK_EX)
    with publishing(lake):
        assert not free(fcntl.LOCK_SH)
        assert (lake / TURNSTILE).exists()  # made by the writer, so new readers queue behind a waiting one
    assert free(fcntl.LOCK_EX)


def test_reading_a_folder_that_does_not_exist_takes_no_lock(tmp_path):
    """A query on a lake not written yet: no error, no folder made for it, and nothing held that would keep the
    first writer out once it makes the lake."""
    lake = tmp_path / "none"
    published = threading.Event()

    def first_writer() -> None:
        with publishing(lake):
            published.set()

    with reading(lake):
        assert not lake.exists()
        lake.mkdir()
        writer = threading.Thread(target=first_writer)
        writer.start()
        writer.join(5)
        assert published.is_set()
    shutil.rmtree(lake)
    with reading(lake):
        pass
    assert not lake.exists()


def _rewrite_lock_is_held(lake: Path) -> bool:
    fd = os.open(lake / REWRITE_LOCK, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def test_analytics_and_compaction_take_turns(tmp_path, monkeypatch):
    """Compaction removes raw files an analytics run reads: each holds the lake's rewrite lock for its whole run."""
    import gpuledger.analytics.runner as analytics_runner
    import gpuledger.compaction

    lake = tmp_path / "lake"
    lake.mkdir()
    seen = []
    monkeypatch.setattr(analytics_runner, "_run", lambda *a: seen.append(_rewrite_lock_is_held(lake)) or [])
    monkeypatch.setattr(gpuledger.compaction, "plan", lambda *a: seen.append(_rewrite_lock_is_held(lake)) or [])
    analytics_runner.run(lake, until_s=0)
    gpuledger.compaction.compact(lake)
    assert seen[0] is True and set(seen[1:]) == {True}  # the run, then every table's plan
    assert not _rewrite_lock_is_held(lake)  # and let go after
