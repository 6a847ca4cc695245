"""`gpuledger sql` writing a large result: peak memory and time per output format, against DuckDB's own COPY of the
same rows in the same run.

    python benchmarks/sql_output.py [--rows 50000000] [--formats csv,json,parquet] [--tiny]
    (--tiny: 200,000 rows, so the test suite runs this script)

The query is the one issue 22's probe ran, two BIGINT columns: `SELECT range AS n, range * 2 AS m FROM range(ROWS)`
(50M rows are 883 MB of csv). Each run is a fresh process (start-up included) writing a file in a temp folder, and its
peak RSS is the kernel's for that one process (os.wait4), not a sample. The baseline is DuckDB alone in a fresh Python
process: COPY (the query) TO the same kind of file, DuckDB's own streaming writer, without gpuledger, polars or Arrow.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASELINE = "import duckdb, sys; duckdb.connect().execute(f\"COPY ({sys.argv[1]}) TO '{sys.argv[2]}' ({sys.argv[3]})\")"
COPY_OPTIONS = {"csv": "FORMAT csv", "json": "FORMAT json, ARRAY true", "parquet": "FORMAT parquet"}


def run(args: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS bytes) of `args` as a fresh process; exits the benchmark if it fails."""
    t0 = time.perf_counter()
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall_s = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status):
        sys.exit(f"{' '.join(args[:4])} ... failed:\n{p.stderr.read().decode()[-2000:]}")
    return wall_s, usage.ru_maxrss * 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=50_000_000)
    ap.add_argument("--formats", default="csv,json,parquet")
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    rows = 200_000 if a.tiny else a.rows
    query = f"SELECT range AS n, range * 2 AS m FROM range({rows})"
    work = Path(tempfile.mkdtemp(prefix="gl-sqlout-"))
    lake = work / "lake"
    lake.mkdir()  # an empty lake: the query reads no table
    for fmt in a.formats.split(","):
        out = work / f"out.{fmt}"
        cmd = [sys.executable, "-m", "gpuledger.cli", "sql", "--lake", str(lake), "--format", fmt, "--out", str(out)]
        wall_s, peak = run([*cmd, "--timeout-s", "3600", query])
        size = out.stat().st_size
        out.unlink()
        base_s, base_peak = run([sys.executable, "-c", BASELINE, query, str(out), COPY_OPTIONS[fmt]])
        base_size = out.stat().st_size
        out.unlink()
        line = "{:<32} {:>12,} rows {:>15,} bytes {:8.1f} s  peak RSS {:.2f} GB"
        print(line.format(f"gpuledger sql --format {fmt}", rows, size, wall_s, peak / 1e9))
        print(line.format(f"baseline: DuckDB COPY, {fmt}", rows, base_size, base_s, base_peak / 1e9))
        print(f"ratio {fmt}: {wall_s / base_s:.2f}x time, {peak / base_peak:.2f}x peak RSS")
    print("load average (1, 5, 15 min): " + " ".join(Path("/proc/loadavg").read_text().split()[:3]))


if __name__ == "__main__":
    main()
