"""Every analytics job over a simulated fleet, against one DuckDB GROUP BY gpu_uuid, hour over the same Parquet.

    python benchmarks/analytics.py [--lake DIR]   (default: builds 7 days x 1,000 GPUs at 10 s in a temp dir)

Prints: the baseline (one DuckDB group-by over every gpu_samples file, same run), the full analytics run
(`gpuledger analyze`, a fresh process, peak RSS of the process), and an incremental run after one more hour
of samples lands in the lake.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _proc import PeakRss  # noqa: E402

END = "2026-11-30T00:00:00Z"
DERIVED = ("gpu_hourly", "gpu_5min", "job_hourly", "job_stats", "gpu_allocations", "cost_daily", "decisions", "_state")


def gl(*args: str) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-m", "gpuledger.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    with PeakRss(p.pid, every_s=0.05) as rss:
        out, err = p.communicate()
    if p.returncode:
        sys.exit(f"gpuledger {' '.join(args)} failed:\n{err[-2000:]}")
    return time.perf_counter() - t0, rss.peak, out


def simulate(lake: Path, days: float, end: str) -> None:
    """The benchmark fleet (125 nodes x 8 GPUs at 10 s) over `days` ending at `end`."""
    gl(
        "simulate",
        "--lake",
        str(lake),
        "--nodes",
        "125",
        "--gpus-per-node",
        "8",
        "--days",
        str(days),
        "--step-s",
        "10",
        "--end",
        end,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lake", type=Path, default=None)
    a = ap.parse_args()
    tmp = None
    lake = a.lake
    if lake is None:
        tmp = Path(tempfile.mkdtemp(prefix="gl-analytics-"))
        lake = tmp / "lake"
        simulate(lake, 7, END)
    for d in DERIVED:
        shutil.rmtree(lake / d, ignore_errors=True)
    import duckdb

    con = duckdb.connect()
    t0 = time.perf_counter()
    groups, samples = con.execute(
        "SELECT count(*), sum(n) FROM (SELECT gpu_uuid, date_trunc('hour', ts) AS h, avg(util_gpu_pct), "
        "count(*) AS n FROM read_parquet(?, hive_partitioning = true) GROUP BY 1, 2)",
        [str(lake / "gpu_samples" / "*" / "*" / "*.parquet")],
    ).fetchone()
    base_s = time.perf_counter() - t0
    full_s, full_rss, out = gl("analyze", "--lake", str(lake), "--to", END)
    # One more hour arrives (a simulated hour written after END), then the incremental run.
    simulate(lake, 1 / 24, "2026-11-30T01:00:00Z")
    inc_s, inc_rss, _ = gl("analyze", "--lake", str(lake), "--to", "2026-11-30T01:00:00Z")
    print(f"analytics over {samples:,} GPU samples ({groups:,} GPU-hours), 7 days x 1,000 GPUs at 10 s")
    print(f"  baseline: one DuckDB GROUP BY gpu_uuid, hour      {base_s:.1f} s ({duckdb.__version__})")
    print(f"  all analytics jobs (gpuledger analyze)           {full_s:.1f} s, peak RSS {full_rss / 1e9:.2f} GB")
    print(f"  ratio                                            {full_s / base_s:.2f}x the baseline")
    print(f"  incremental run, one new hour                    {inc_s:.1f} s, peak RSS {inc_rss / 1e9:.2f} GB")
    print("  (both runs are whole processes: interpreter start-up and imports included)")
    for line in out.splitlines():
        print("   ", line)
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
