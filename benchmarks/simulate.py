"""Backfill throughput: `gpuledger simulate` at the issue's size, against a bare polars write of the same rows.

    python benchmarks/simulate.py [--nodes 125 --gpus-per-node 8 --days 7 --step-s 10] [--keep DIR] [--tiny]
        [--no-baseline]
    (--tiny: 2 nodes x 2 GPUs for 6 hours at 60 s, seconds in all, so the test suite runs this script)

Prints: wall time, samples/s, peak RSS of the whole process tree (parent + workers), and the baseline: one
`polars.DataFrame.write_parquet` call writing the same gpu_samples rows (read back from the lake first, not
timed) to a single file on the same disk. ratio = simulate time / baseline time. --no-baseline skips it: the
baseline holds every sample in memory, which a year or a 10,000-GPU week does not fit (simulate itself streams).
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

GB = 1e9


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=125)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--days", type=float, default=7)
    ap.add_argument("--step-s", type=int, default=10)
    ap.add_argument("--keep", type=Path, default=None, help="write the lake here and keep it")
    ap.add_argument("--tiny", action="store_true", help="2 nodes x 2 GPUs for 6 hours at 60 s: checks it runs")
    ap.add_argument("--no-baseline", action="store_true", help="skip the bare write (it holds every sample)")
    a = ap.parse_args()
    if a.tiny:
        a.nodes, a.gpus_per_node, a.days, a.step_s = 2, 2, 0.25, 60
    work = Path(tempfile.mkdtemp(prefix="gl-bench-", dir=a.keep.parent if a.keep else None))
    lake = a.keep or work / "lake"
    cmd = [
        sys.executable,
        "-m",
        "gpuledger.cli",
        "simulate",
        "--lake",
        str(lake),
        "--nodes",
        str(a.nodes),
        "--gpus-per-node",
        str(a.gpus_per_node),
        "--days",
        str(a.days),
        "--step-s",
        str(a.step_s),
        "--end",
        "2026-11-30T00:00:00Z",
    ]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with PeakRss(p.pid) as rss:
        out, err = p.communicate()
    sim_s = time.perf_counter() - t0
    if p.returncode:
        sys.exit(f"simulate failed: {out}{err[-3000:]}")
    import polars as pl

    from gpuledger.lake import scan

    base_s = None
    if a.no_baseline:
        n = scan(lake, "gpu_samples").select(pl.len()).collect().item()
    else:
        df = scan(lake, "gpu_samples").collect()
        n = df.height
        target = work / "baseline.parquet"
        t0 = time.perf_counter()
        df.write_parquet(target)
        base_s = time.perf_counter() - t0
        del df
    print(f"simulate --nodes {a.nodes} --gpus-per-node {a.gpus_per_node} --days {a.days:g} --step-s {a.step_s}")
    print(f"  samples              {n:,}")
    for line in out.strip().splitlines():  # simulate's own report: its generation time, then the merge of closed days
        print(f"  | {line}")
    print(f"  wall time            {sim_s:.1f} s (includes interpreter start-up and the job schedule)")
    print(f"  throughput           {n / sim_s:,.0f} samples/s")
    print(f"  peak RSS (tree)      {rss.peak / GB:.2f} GB (parent + workers)")
    if base_s is not None:
        bare = f"one polars write_parquet of the same {n:,} rows ({pl.__version__})"
        print(f"  baseline             {base_s:.1f} s: {bare}")
        print(
            f"  ratio                {sim_s / base_s:.2f}x the bare write (generation + partitioning + atomic "
            f"writes of every table included)"
        )
    print(f"  lake on disk         {sum(f.stat().st_size for f in lake.rglob('*.parquet')) / GB:.2f} GB")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
