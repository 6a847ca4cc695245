"""`gpuledger sql` over an object-store lake against the same lake on local disk, same run: the three slowest FinOps
views (benchmarks/RESULTS.md, FinOps: tenant_daily, queue_stats, focus_cost), each with finops_views.py's analyst
question.

    python benchmarks/objectstore_views.py [--nodes 16] [--gpus 8] [--days 60] [--rounds 3] [--tiny]
    (--tiny: 2 nodes x 2 GPUs for 3 days, one round, so the test suite runs this script)

The lake is built locally (`gpuledger simulate`, then `gpuledger analyze`: the analytics write local lakes only yet)
and uploaded as it is to moto's S3 server on loopback (tests/s3_server.py). Each figure is the median of `--rounds`
runs of `gpuledger sql --format csv` as a fresh process (start-up included, as a user runs it), local and S3
alternating so the shared host's load hits both; the question alone inside one process (`Lake.execute`) is printed
beside it. The S3 side lists the tables' objects and reads them through polars scans (gpuledger/query.py); moto is a
single Python process, so it bounds the S3 figure, and a real store adds network round trips instead.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

from _proc import gpuledger as gl  # noqa: E402
from finops_views import END, QUERIES  # noqa: E402

from gpuledger.query import Lake  # noqa: E402
from gpuledger.store import open_store  # noqa: E402

from s3_server import MotoServer, upload  # noqa: E402

VIEWS = ("tenant_daily", "queue_stats", "focus_cost")


def median_s(f, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--days", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    if a.tiny:
        a.nodes, a.gpus, a.days, a.rounds = 2, 2, 3, 1
    local = Path(tempfile.mkdtemp(prefix="gl-s3views-")) / "lake"
    sim = ["--nodes", str(a.nodes), "--gpus-per-node", str(a.gpus), "--days", str(a.days), "--step-s", "3600"]
    print(f"simulate: {gl('simulate', '--lake', str(local), *sim, '--end', END)[0]:.0f} s", flush=True)
    print(f"analyze: {gl('analyze', '--lake', str(local), '--to', END)[0]:.0f} s", flush=True)
    with MotoServer() as srv:
        srv.create_bucket("lake-bench")
        os.environ.update(srv.env())
        s3 = open_store("s3://lake-bench/lake")
        t0 = time.perf_counter()
        n = upload(local, s3)
        print(f"uploaded {n} lake files in {time.perf_counter() - t0:.1f} s; median of {a.rounds} round(s)")
        head = ("view", "rows", "local", "s3", "s3/local", "query local", "query s3")
        print("{:14s} {:>8s} {:>8s} {:>8s} {:>9s} {:>12s} {:>9s}".format(*head))
        for view in VIEWS:
            q = QUERIES[view]
            with Lake(local) as lq, Lake(s3) as sq:
                rows = lq.execute(f"SELECT count(*) FROM {view}", timeout_s=None).rows[0][0]
                want = lq.execute(q + " ORDER BY ALL", timeout_s=None).frame
                got = sq.execute(q + " ORDER BY ALL", timeout_s=None).frame
                if got.shape != want.shape:
                    sys.exit(f"{view}: {got.shape} rows x columns on s3, {want.shape} on the local lake")
                t_lq = median_s(lambda lq=lq, q=q: lq.execute(q, timeout_s=None), a.rounds)
                t_sq = median_s(lambda sq=sq, q=q: sq.execute(q, timeout_s=None), a.rounds)
            times = {"local": [], "s3": []}
            for _ in range(a.rounds):
                for name, lake in (("local", str(local)), ("s3", str(s3))):
                    times[name].append(gl("sql", "--lake", lake, "--format", "csv", q)[0])
            t_l, t_s = statistics.median(times["local"]), statistics.median(times["s3"])
            print(
                f"{view:14s} {rows:>8,} {t_l:>7.2f}s {t_s:>7.2f}s {t_s / t_l:>8.2f}x {t_lq:>11.3f}s {t_sq:>8.3f}s",
                flush=True,
            )
    print("load average (1, 5, 15 min): {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
