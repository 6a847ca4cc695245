"""`gpuledger analyze` in this process against the same run through a 2-worker Dask LocalCluster: same output?

    python benchmarks/analytics_dask.py [--gpus N] [--step-s S] [--lake DIR] [--tiny]
    (default: 1 day of 1,000 GPUs at 10 s, 8.64M samples; the issue's figure is --gpus 10000, 86.4M samples and a
    lake of several GB. --tiny: 4 GPUs for a day at 60 s, seconds in all, so the test suite runs this script)

The lake is written by `gpuledger simulate` and hard-linked into two copies (a run replaces files, never writes
into one, so the copies stay apart). One is analysed in this process, the other with `--scheduler` pointing at
LocalCluster(n_workers=2, threads_per_worker=1, processes=True, protocol="tcp"), started before the clock (as a
standing cluster would be). Both runs are timed whole and for the pass over raw samples alone (gpu_5min,
gpu_hourly, job_5min: the part the cluster runs), and the two lakes are compared table by table (DuckDB EXCEPT ALL
both ways, every column). The ratio is the Dask run's time over the local one's: on one 2-core machine the
cluster adds serialisation, staging and a rename per file and takes no work off anyone, so it measures overhead.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _proc import gpuledger as gl  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpuledger import schema  # noqa: E402
from gpuledger.lake import table_files  # noqa: E402

END = "2026-11-30T00:00:00+00:00"
PASS = ("gpu_5min", "gpu_hourly", "job_5min")  # runner.TELEMETRY, the tables the cluster computes


def differing(a: Path, b: Path) -> list[str]:
    """Tables whose rows differ between lakes `a` and `b` (or that only one has)."""
    import duckdb

    con = duckdb.connect()
    out = []
    for t in schema.TABLES:
        fa, fb = table_files(a, t), table_files(b, t)
        if not fa and not fb:
            continue
        if [f.relative_to(a) for f in fa] != [f.relative_to(b) for f in fb]:
            out.append(f"{t} (files)")
            continue
        q = "SELECT count(*) FROM (SELECT * FROM read_parquet(?) EXCEPT ALL SELECT * FROM read_parquet(?))"
        x, y = [str(f) for f in fa], [str(f) for f in fb]
        if con.execute(q, [x, y]).fetchone()[0] or con.execute(q, [y, x]).fetchone()[0]:
            out.append(t)
    return out


def timed(lake: Path, until_s: float, scheduler: str | None) -> tuple[float, float]:
    """(whole run, the pass over raw samples) in seconds."""
    from gpuledger.analytics.runner import run

    t0 = time.perf_counter()
    reports = run(lake, until_s=until_s, scheduler=scheduler)
    return time.perf_counter() - t0, sum(r.seconds for r in reports if r.job in PASS)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=1000, help="fleet size (8 GPUs a node) [1000]")
    ap.add_argument("--step-s", type=int, default=10, help="sample interval [10]")
    ap.add_argument("--lake", type=Path, default=None, help="an existing lake to copy (1 day ending at END)")
    ap.add_argument("--tiny", action="store_true", help="4 GPUs for a day at 60 s: checks it runs")
    a = ap.parse_args()
    gpus, step_s = (4, 60) if a.tiny else (a.gpus, a.step_s)
    per_node = 2 if a.tiny else min(gpus, 8)
    tmp = Path(tempfile.mkdtemp(prefix="gl-dask-"))
    src = a.lake
    if src is None:
        src = tmp / "src"
        t0 = time.perf_counter()
        gl(
            "simulate",
            "--lake",
            str(src),
            "--nodes",
            str(gpus // per_node),
            "--gpus-per-node",
            str(per_node),
            "--days",
            "1",
            "--step-s",
            str(step_s),
            "--end",
            END,
        )
        print(f"simulated 1 day of {gpus:,} GPUs at {step_s} s in {time.perf_counter() - t0:.1f} s")
    local, remote = tmp / "local", tmp / "remote"
    for dst in (local, remote):
        shutil.copytree(src, dst, copy_function=os.link)
    samples = pl.scan_parquet(table_files(src, "gpu_samples")).select(pl.len()).collect().item()
    until_s = dt.datetime.fromisoformat(END).timestamp()

    from distributed import LocalCluster

    local_s, local_pass_s = timed(local, until_s, None)
    t0 = time.perf_counter()
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, protocol="tcp", dashboard_address=":0"
    ) as cluster:
        start_s = time.perf_counter() - t0
        dask_s, dask_pass_s = timed(remote, until_s, cluster.scheduler_address)
    diff = differing(local, remote)
    print(f"analyze over {samples:,} GPU samples (1 day, {gpus:,} GPUs at {step_s} s), {os.cpu_count()} cores")
    print(f"  local (this process)         whole run {local_s:7.1f} s   pass over samples {local_pass_s:7.1f} s")
    print(f"  Dask LocalCluster, 2 workers whole run {dask_s:7.1f} s   pass over samples {dask_pass_s:7.1f} s")
    print(f"  cluster start-up (not in the run) {start_s:.1f} s")
    ratio, pass_ratio = dask_s / local_s, dask_pass_s / local_pass_s
    print(f"  Dask overhead ratio: whole run {ratio:.2f}x   pass over samples {pass_ratio:.2f}x")
    print(f"  same output: {'yes, every table' if not diff else 'NO: ' + ', '.join(diff)}")
    shutil.rmtree(tmp, ignore_errors=True)
    if diff:
        sys.exit(1)


if __name__ == "__main__":
    main()
