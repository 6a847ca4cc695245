"""What counting each sample once costs the pass over raw samples: gpu_5min of one day, with and without it.

    python benchmarks/samples_once.py [--nodes 125] [--gpus-per-node 8] [--step-s 10] [--rounds 3]
    python benchmarks/samples_once.py --tiny   (2 nodes x 2 GPUs at 60 s, one round: checks it runs)

One simulated day (2026-11-29), then per round, back to back in this process: the baseline, the 5-minute rollup
alone (analytics.gpu_hourly.rollup_5min: the pass before issue 22), and gpu_5min (the rollup with its count of
distinct times per bucket, which finds no sample written twice here and so rolls nothing up again). Then the
same day with a twelfth of its GPUs' samples written twice (a replayed spool), where gpu_5min takes its slow path
for those GPUs. Prints each round, the median ratio, and checks the rows equal the baseline's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _proc import gpuledger as gl  # noqa: E402

DAY = dt.date(2026, 11, 29)
KEY = ["cluster", "node", "gpu_uuid", "bucket_start"]


def _timed(f):
    t0 = time.perf_counter()
    out = f()
    return time.perf_counter() - t0, out


def main() -> None:
    import polars as pl
    from polars.testing import assert_frame_equal

    from gpuledger.analytics.gpu_hourly import gpu_5min, rollup_5min
    from gpuledger.lake import LakeWriter, scan

    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=125)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--step-s", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    if a.tiny:
        a.nodes, a.gpus_per_node, a.step_s, a.rounds = 2, 2, 60, 1
    tmp = Path(tempfile.mkdtemp(prefix="gl-once-"))
    try:
        lake = tmp / "lake"
        fleet = ("--nodes", str(a.nodes), "--gpus-per-node", str(a.gpus_per_node), "--step-s", str(a.step_s))
        gl("simulate", "--lake", str(lake), *fleet, "--days", "1", "--end", "2026-11-30T00:00:00Z", "--no-compact")
        day = lambda: scan(lake, "gpu_samples", date=DAY)  # noqa: E731
        rows = day().select(pl.len()).collect().item()
        rounds = []
        for _ in range(a.rounds):
            base_s, base = _timed(lambda: rollup_5min(day()).collect())
            once_s, once = _timed(lambda: gpu_5min(day()).collect())
            rounds.append((base_s, once_s))
        assert_frame_equal(base.sort(KEY), once.sort(KEY))
        # A twelfth of the GPUs' samples land twice, under another writer's name (a spool replayed elsewhere).
        gpus = day().select(pl.col("gpu_uuid").unique().sort()).collect()["gpu_uuid"]
        twice = day().filter(pl.col("gpu_uuid").is_in(gpus[::12].implode())).collect()
        LakeWriter(lake).write_partitions("gpu_samples", twice, "replayed")
        dup_s, dup = _timed(lambda: gpu_5min(day()).collect())
        assert_frame_equal(base.sort(KEY), dup.sort(KEY))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"gpu_5min of one day: {rows:,} samples, {a.nodes * a.gpus_per_node:,} GPUs at {a.step_s} s")
    for k, (b, o) in enumerate(rounds, 1):
        print(f"  round {k}: baseline (rollup alone) {b:6.2f} s   counted once {o:6.2f} s   ratio {o / b:.2f}x")
    print(f"  median ratio {statistics.median(o / b for b, o in rounds):.2f}x")
    print(f"  with {twice.height:,} samples written twice: {dup_s:.2f} s, same rows as the baseline")
    print(f"  load average: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")


if __name__ == "__main__":
    main()
