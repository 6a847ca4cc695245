"""`gpuledger reclaim` (a dry run) over a year of a 1,000-GPU fleet: its time, and the GPU-hours a day it would free.

    python benchmarks/reclaim.py --lake DIR [--at T] [--repeat 5]
    (DIR: `gpuledger simulate --nodes 125 --gpus-per-node 8 --days 365 --step-s 3600`, then `gpuledger analyze`;
    read only)
    python benchmarks/reclaim.py --tiny
    (2 nodes x 4 GPUs for 2 days, built and analysed in a temp dir: seconds, so the suite runs it)

`--at`: the pass's "now"; by default the lake's last analysis (the end of its open allocations), where its samples
stop. The simulated lake samples once an hour (`--step-s`), so `[reclaim] max_gap_s` is set just above the step:
each hourly sample stands for the windows up to the next (docs/reclaim.md). Its jobs predate workload classes, so
every job counts as `other`, which the default policies never reclaim: the figure is printed with the defaults
(nothing) and with `[class_policy.other] reclaim = true` (the 2 h rule on every job), which is the one to read.

Time: the pass in this process (read the lake's open jobs and their samples, count the idle windows, plan),
median of `--repeat`, and once as the command a user runs (a fresh process, interpreter start-up included).
Baseline in the same run: reading the open jobs alone (gpu_allocations and jobs, what any reclaimer needs before it
looks at a sample), so ratio = what counting the windows and planning add on top.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _proc import gpuledger  # noqa: E402

TINY_END = "2026-12-01T00:00:00Z"


def at_of(lake) -> dt.datetime:
    import polars as pl

    from gpuledger.lake import scan

    # open allocations end at the analysis time; every allocation's latest end is no later
    end = scan(lake, "gpu_allocations").select(pl.col("end").max()).collect().item()
    if end is None:
        sys.exit(f"{lake}: no allocations (run `gpuledger analyze` first)")
    return end


def median_s(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def run(lake: Path, at: dt.datetime | None, repeat: int, step_s: float, tmp: Path) -> None:
    from gpuledger import config as config_mod
    from gpuledger.enforcer.reclaim.run import open_jobs, run_once
    from gpuledger.store import open_store

    store = open_store(lake)
    at = at or at_of(store)
    base = config_mod.defaults()
    gap = step_s + 100  # just above the lake's step: each sample holds until the next
    default = dataclasses.replace(base, reclaim=dataclasses.replace(base.reclaim, max_gap_s=gap))
    policies = dict(default.class_policy)
    policies["other"] = dataclasses.replace(policies["other"], reclaim=True)
    other = dataclasses.replace(default, class_policy=policies)

    allocs, jobs = open_jobs(store, other)
    print(f"reclaim dry run at {at:%Y-%m-%dT%H:%M:%SZ} over {jobs.height:,} open jobs holding {allocs.height:,} GPUs")
    p = run_once(store, default, at)
    print(
        f"default class policies: would free {p.gpu_hours_per_day():,.1f} GPU-hours a day "
        f"({p.usd_per_day():,.2f} USD a day) from {len(p.freeing()):,} jobs"
    )
    t_pass, p = median_s(lambda: run_once(store, other, at), repeat)
    print(
        f"other reclaimable after 2 h: would free {p.gpu_hours_per_day():,.1f} GPU-hours a day "
        f"({p.usd_per_day():,.2f} USD a day) from {len(p.freeing()):,} jobs"
    )
    t_base, _ = median_s(lambda: open_jobs(store, other), repeat)
    print(f"pass, median of {repeat}: {t_pass:.3f} s; baseline (reading the open jobs alone) {t_base:.3f} s")
    print(f"ratio {t_pass / t_base:.2f}x")
    cfg = tmp / "reclaim.toml"
    cfg.write_text(f"[reclaim]\nmax_gap_s = {gap}\n[class_policy.other]\nreclaim = true\n")
    wall, rss, out = gpuledger(
        "reclaim", "--lake", str(lake), "--config", str(cfg), "--at", at.strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    print(f"command (fresh process): {wall:.2f} s, peak RSS {rss / 2**20:,.0f} MiB; it says: {out.splitlines()[-1]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lake", type=Path)
    ap.add_argument("--at", default=None, help="the pass's now, ISO-8601 UTC [the lake's last analysis]")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--step-s", type=float, default=3600.0, help="the lake's sample step [3600: the year lake]")
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    at = None if a.at is None else dt.datetime.fromisoformat(a.at.replace("Z", "+00:00"))
    with tempfile.TemporaryDirectory() as tmp:
        if a.tiny:
            lake = Path(tmp) / "lake"
            sim = ["--nodes", "2", "--gpus-per-node", "4", "--days", "2", "--step-s", "600", "--end", TINY_END]
            gpuledger("simulate", "--lake", str(lake), *sim, "--workers", "1")
            gpuledger("analyze", "--lake", str(lake), "--to", TINY_END)
            run(lake, at, 1, 600.0, Path(tmp))
        elif a.lake is None:
            ap.error("--lake DIR or --tiny")
        else:
            run(a.lake, at, a.repeat, a.step_s, Path(tmp))


if __name__ == "__main__":
    os.environ.setdefault("POLARS_MAX_THREADS", str(os.cpu_count() or 1))
    main()
