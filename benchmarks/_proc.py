"""Peak resident memory of a process and all its descendants, sampled from /proc (Linux)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d.name))
    return kids


def tree_rss_bytes(pid: int) -> int:
    kids = _children()
    total, stack = 0, [pid]
    page = os.sysconf("SC_PAGE_SIZE")
    while stack:
        p = stack.pop()
        try:
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            pass
        stack.extend(kids.get(p, []))
    return total


class PeakRss:
    """Samples the tree's RSS every `every_s` seconds in a thread until stopped."""

    def __init__(self, pid: int, every_s: float = 0.1):
        self.pid, self.every_s, self.peak = pid, every_s, 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.peak = max(self.peak, tree_rss_bytes(self.pid))

    def __enter__(self) -> "PeakRss":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


def gpuledger(*args: str) -> tuple[float, int, str]:
    """Run `gpuledger ARGS` as a fresh process: (wall seconds, peak RSS of its process tree, stdout).

    Exits the benchmark with gpuledger's error output when it fails."""
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-m", "gpuledger.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    with PeakRss(p.pid, every_s=0.05) as rss:
        out, err = p.communicate()
    if p.returncode:
        sys.exit(f"gpuledger {' '.join(args)} failed:\n{err[-2000:]}")
    return time.perf_counter() - t0, rss.peak, out


def differing_rows(a, b, tables) -> int:
    """Rows of `tables` in one local lake and not the other, both ways (DuckDB EXCEPT ALL over each table's files;
    a table with files in only one lake counts its files)."""
    from pathlib import Path

    import duckdb

    from gpuledger.lake import table_files

    con, n = duckdb.connect(), 0
    q = "SELECT count(*) FROM (SELECT * FROM read_parquet(?, hive_partitioning=true) EXCEPT ALL "
    q += "SELECT * FROM read_parquet(?, hive_partitioning=true))"
    for t in tables:
        fa, fb = ([str(Path(x, k)) for k in table_files(x, t)] for x in (a, b))
        if fa and fb:
            n += con.execute(q, [fa, fb]).fetchone()[0] + con.execute(q, [fb, fa]).fetchone()[0]
        else:
            n += abs(len(fa) - len(fb))
    return n
