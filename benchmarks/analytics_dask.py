"""`gpuledger analyze` with the pass in its own process against the same run through a 2-worker Dask LocalCluster.

    python benchmarks/analytics_dask.py [--gpus N] [--step-s S] [--lake DIR] [--work DIR] [--max-rss-gb G] [--tiny]
    (default: 1 day of 1,000 GPUs at 10 s, 8.64M samples; the issue's figure is --gpus 10000, 86.4M samples. --lake:
    an existing lake of that day to copy instead of simulating one. --tiny: 4 GPUs for a day at 60 s, seconds in
    all, so the test suite runs this script)

The lake is written by `gpuledger simulate` and hard-linked into two copies (a run replaces files, never writes
into one, so the copies stay apart). Each is analysed by a fresh `gpuledger analyze` process, one after the other,
never both at once: "local (this process)" computes the pass over raw samples in that process, the other is given
`--scheduler` pointing at LocalCluster(n_workers=2, threads_per_worker=1, processes=True, protocol="tcp"), started
before the clock (as a standing cluster would be). Per run: wall time, the pass over raw samples (gpu_5min,
gpu_hourly, job_5min: the part the cluster runs, from analyze's own report lines), CPU seconds of the analyze
process and of the cluster's processes, peak RSS of each (sampled from /proc every 0.1 s), and the load average
before and after. Then the two lakes are compared table by table: DuckDB EXCEPT ALL both ways over every column of
every table analyze wrote; the raw tables are the same hard-linked files in both, which is checked instead. The
ratio is the Dask run's time over the local one's: on one 2-core machine the cluster adds serialisation, staging
and a rename per file and takes no work off anyone, so it measures overhead.

--max-rss-gb (default 12) guards a shared machine: when this process and its children together pass it, the run
in progress is killed and the script stops, saying so.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import polars as pl
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _proc import gpuledger as gl  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpuledger import schema  # noqa: E402
from gpuledger.lake import table_files  # noqa: E402

END = "2026-11-30T00:00:00+00:00"
PASS = ("gpu_5min", "gpu_hourly", "job_5min")  # runner.TELEMETRY, the tables the cluster computes
GB = 1e9
REPORT = re.compile(r"^(\w+): [\d,]+ rows over \d+ day\(s\) in ([\d.]+) s$", re.M)  # cli.analyze's line per job


def differing(a: Path, b: Path, work: Path) -> tuple[list[str], int, int]:
    """(tables whose rows differ between lakes `a` and `b` or that only one has, tables compared row by row, tables
    whose files are the same hard links in both)."""
    import duckdb

    con = duckdb.connect()
    # A derived table of a 10,000-GPU day is a few million rows; bounded so the check cannot crowd the machine out.
    con.execute("SET memory_limit = '4GB'")
    con.execute("SET temp_directory = ?", [str(work / "duckdb_tmp")])
    out, compared, linked = [], 0, 0
    for t in schema.TABLES:
        fa, fb = ([Path(x, k) for k in table_files(x, t)] for x in (a, b))
        if not fa and not fb:
            continue
        if [f.relative_to(a) for f in fa] != [f.relative_to(b) for f in fb]:
            out.append(f"{t} (files)")
            continue
        if all(x.samefile(y) for x, y in zip(fa, fb, strict=True)):
            linked += 1  # a raw table neither run rewrote: the same inode in both copies
            continue
        q = "SELECT count(*) FROM (SELECT * FROM read_parquet(?) EXCEPT ALL SELECT * FROM read_parquet(?))"
        x, y = [str(f) for f in fa], [str(f) for f in fb]
        compared += 1
        if con.execute(q, [x, y]).fetchone()[0] or con.execute(q, [y, x]).fetchone()[0]:
            out.append(t)
    return out, compared, linked


def _cpu_s(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        try:
            c = p.cpu_times()
            total += c.user + c.system
        except psutil.Error:
            pass
    return total


class Watch:
    """Peak RSS of the analyze process and of the cluster's processes, sampled every 0.1 s; kills the analyze
    process when this whole process tree passes `limit_bytes` (then `.over` is set)."""

    def __init__(self, analyze: subprocess.Popen, cluster: list[psutil.Process], limit_bytes: float):
        self.analyze, self.cluster, self.limit = analyze, cluster, limit_bytes
        self.peak_analyze = self.peak_cluster = self.peak_tree = 0
        self.over = False
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _rss(procs) -> int:
        total = 0
        for p in procs:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        return total

    def _run(self) -> None:
        me, a = psutil.Process(), psutil.Process(self.analyze.pid)
        while not self._stop.wait(0.1):
            try:
                mine = [a, *a.children(recursive=True)]
            except psutil.Error:
                mine = []
            ra, rc = self._rss(mine), self._rss(self.cluster)
            tree = self._rss([me]) + ra + rc
            self.peak_analyze, self.peak_cluster = max(self.peak_analyze, ra), max(self.peak_cluster, rc)
            self.peak_tree = max(self.peak_tree, tree)
            if tree > self.limit and not self.over:
                self.over = True
                self.analyze.kill()

    def __enter__(self) -> Watch:
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


def analyze(lake: Path, scheduler: str | None, cluster: list[psutil.Process], limit_gb: float) -> dict:
    """One `gpuledger analyze` process over `lake`: its figures, or exits naming the failure."""
    cmd = [sys.executable, "-m", "gpuledger.cli", "analyze", "--lake", str(lake), "--to", END]
    if scheduler:
        cmd += ["--scheduler", scheduler]
    load0 = os.getloadavg()[0]
    cpu0, ru0 = _cpu_s(cluster), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with Watch(p, cluster, limit_gb * GB) as w:
        out, err = p.communicate()
    wall_s = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # only the analyze process was reaped in between
    if w.over:
        sys.exit(f"stopped: this process tree passed --max-rss-gb {limit_gb:g} during `{' '.join(cmd[2:])}`")
    if p.returncode:
        sys.exit(f"`{' '.join(cmd[2:])}` failed:\n{err[-2000:]}")
    jobs = {job: float(s) for job, s in REPORT.findall(out)}
    return {
        "wall_s": wall_s,
        "pass_s": sum(jobs.get(j, 0.0) for j in PASS),
        "cpu_s": (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime),
        "cluster_cpu_s": _cpu_s(cluster) - cpu0,
        "rss_analyze": w.peak_analyze,
        "rss_cluster": w.peak_cluster,
        "rss_tree": w.peak_tree,
        "load": (load0, os.getloadavg()[0]),
    }


def _line(name: str, r: dict) -> str:
    extra = f" + cluster {r['cluster_cpu_s']:.1f} s" if r["cluster_cpu_s"] else ""
    rss = f"analyze {r['rss_analyze'] / GB:.2f} GB" + (
        f", cluster {r['rss_cluster'] / GB:.2f} GB" if r["rss_cluster"] else ""
    )
    return (
        f"  {name:<28} whole run {r['wall_s']:7.1f} s   pass over samples {r['pass_s']:7.1f} s\n"
        f"  {'':<28} CPU: analyze {r['cpu_s']:.1f} s{extra}   peak RSS: {rss} (tree {r['rss_tree'] / GB:.2f} GB)   "
        f"load average {r['load'][0]:.1f} -> {r['load'][1]:.1f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=1000, help="fleet size (8 GPUs a node) [1000]")
    ap.add_argument("--step-s", type=int, default=10, help="sample interval [10]")
    ap.add_argument("--lake", type=Path, default=None, help="an existing lake to copy (1 day ending at END)")
    ap.add_argument("--work", type=Path, default=None, help="put the copies here and keep them [a temporary folder]")
    ap.add_argument("--max-rss-gb", type=float, default=12.0, help="stop when this process tree passes it [12]")
    ap.add_argument("--tiny", action="store_true", help="4 GPUs for a day at 60 s: checks it runs")
    a = ap.parse_args()
    gpus, step_s = (4, 60) if a.tiny else (a.gpus, a.step_s)
    per_node = 2 if a.tiny else min(gpus, 8)
    tmp = a.work or Path(tempfile.mkdtemp(prefix="gl-dask-"))
    tmp.mkdir(parents=True, exist_ok=True)
    src = a.lake
    if src is None:
        src = tmp / "src"
        sim_s, sim_rss, _ = gl(
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
        print(f"simulated 1 day of {gpus:,} GPUs at {step_s} s in {sim_s:.1f} s (peak RSS {sim_rss / GB:.2f} GB)")
    local, remote = tmp / "local", tmp / "remote"
    for dst in (local, remote):
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst, copy_function=os.link, ignore=shutil.ignore_patterns("_state"))
    samples = pl.scan_parquet([Path(src, k) for k in table_files(src, "gpu_samples")]).select(pl.len()).collect().item()

    from distributed import LocalCluster

    loc = analyze(local, None, [], a.max_rss_gb)
    t0 = time.perf_counter()
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, protocol="tcp", dashboard_address=":0"
    ) as cluster:
        start_s = time.perf_counter() - t0
        limit = next(iter(cluster.scheduler_info["workers"].values()))["memory_limit"]
        workers = psutil.Process().children(recursive=True)
        das = analyze(remote, cluster.scheduler_address, workers, a.max_rss_gb)
    diff, compared, linked = differing(local, remote, tmp)
    print(f"analyze over {samples:,} GPU samples (1 day, {gpus:,} GPUs at {step_s} s), {os.cpu_count()} cores")
    print(_line("local (this process)", loc))
    print(_line("Dask LocalCluster, 2 workers", das))
    print(f"  cluster start-up (not in the run) {start_s:.1f} s; memory limit per worker {limit / GB:.1f} GB")
    ratio, pass_ratio = das["wall_s"] / loc["wall_s"], das["pass_s"] / max(loc["pass_s"], 1e-9)
    print(f"  Dask overhead ratio: whole run {ratio:.2f}x   pass over samples {pass_ratio:.2f}x")
    cpu_ratio = (das["cpu_s"] + das["cluster_cpu_s"]) / loc["cpu_s"]
    print(f"  CPU, Dask run (analyze + cluster) over local: {cpu_ratio:.2f}x")
    what = f"{compared} tables compared row by row, {linked} raw tables the same files"
    print(f"  same output: {'yes, every table' if not diff else 'NO: ' + ', '.join(diff)} ({what})")
    if a.work is None:
        shutil.rmtree(tmp, ignore_errors=True)
    if diff:
        sys.exit(1)


if __name__ == "__main__":
    main()
