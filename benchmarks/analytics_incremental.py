"""The analytics run after one new hour, on lakes of growing history: its cost should not grow with the history.

    python benchmarks/analytics_incremental.py [--days 7,30,90] [--nodes 125] [--gpus-per-node 8] [--step-s 3600]
    python benchmarks/analytics_incremental.py --tiny   (2 nodes x 2 GPUs, 1 and 2 days: checks it runs)

For each history length: `gpuledger simulate` writes the lake (ending 2026-11-30), a first `gpuledger analyze`
builds every table, one more simulated hour lands, and `gpuledger analyze` runs again: that run's wall time and
peak RSS (its whole process tree, interpreter start-up included) are the figure. The baseline is the shortest
history's run: the issue asks the longest within 1.5x of it. With --check (on with --tiny) the incremental lake's
job-level tables are compared with a run from scratch over a copy of its raw tables (EXCEPT ALL, both ways).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _proc import differing_rows  # noqa: E402
from _proc import gpuledger as gl  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpuledger.schema import DERIVED_TABLES  # noqa: E402

END, NEXT = "2026-11-30T00:00:00Z", "2026-11-30T01:00:00Z"
# --day-closing: the hour that completes a UTC day, whose run refits the demand forecast (analytics/forecast.py)
CLOSING_END, CLOSING_NEXT = "2026-11-29T23:00:00Z", "2026-11-30T00:00:00Z"
JOB_TABLES = ("gpu_allocations", "job_hourly", "cost_allocation", "cost_daily", "job_stats", "queue_depth")
JOB_TABLES += ("fleet_hourly",)


def sim(lake: Path, a, days: float, end: str) -> None:
    args = ("--nodes", str(a.nodes), "--gpus-per-node", str(a.gpus_per_node), "--step-s", str(a.step_s))
    gl("simulate", "--lake", str(lake), *args, "--days", str(days), "--end", end, "--workers", "1")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", default="7,30", help="history lengths in days, comma-separated [7,30]")
    ap.add_argument("--nodes", type=int, default=125)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--step-s", type=int, default=3600)
    ap.add_argument("--check", action="store_true", help="compare with a run from scratch (on with --tiny)")
    ap.add_argument("--tiny", action="store_true", help="2 nodes x 2 GPUs, 1 and 2 days: checks it runs")
    ap.add_argument(
        "--day-closing",
        action="store_true",
        help="time the run of the hour that completes a UTC day (it refits the demand forecast) [the hour after]",
    )
    a = ap.parse_args()
    end, nxt = (CLOSING_END, CLOSING_NEXT) if a.day_closing else (END, NEXT)
    if a.tiny:
        a.days, a.nodes, a.gpus_per_node, a.check = "1,2", 2, 2, True
    tmp = Path(tempfile.mkdtemp(prefix="gl-incremental-"))
    rows = []
    try:
        for days in (float(d) for d in a.days.split(",")):
            lake = tmp / f"lake-{days:g}"
            sim(lake, a, days, end)
            first_s, first_rss, _ = gl("analyze", "--lake", str(lake), "--to", end)
            sim(lake, a, 1 / 24, nxt)
            inc_s, inc_rss, _ = gl("analyze", "--lake", str(lake), "--to", nxt)
            same = None
            if a.check:
                scratch = tmp / f"scratch-{days:g}"
                shutil.copytree(lake, scratch)
                for t in DERIVED_TABLES:
                    shutil.rmtree(scratch / t.name, ignore_errors=True)
                shutil.rmtree(scratch / "_state" / "analytics", ignore_errors=True)
                gl("analyze", "--lake", str(scratch), "--to", nxt)
                same = differing_rows(lake, scratch, JOB_TABLES)
            rows.append((days, first_s, first_rss, inc_s, inc_rss, same))
            shutil.rmtree(lake, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    gpus = a.nodes * a.gpus_per_node
    which = "the hour that closes a UTC day" if a.day_closing else "one new hour"
    print(f"analytics run after {which}, {gpus:,} GPUs at {a.step_s} s (whole processes, start-up included)")
    print("  history   first run           timed run                rows differing from a run from scratch")
    for days, first_s, first_rss, inc_s, inc_rss, same in rows:
        check = "not checked" if same is None else f"{same:,}"
        print(
            f"  {days:5g} d   {first_s:6.1f} s {first_rss / 1e9:5.2f} GB   {inc_s:6.1f} s {inc_rss / 1e9:5.2f} GB"
            f"        {check}"
        )
    base, last = rows[0], rows[-1]  # (days, first_s, first_rss, inc_s, inc_rss, ...)
    print(f"  baseline: the {base[0]:g}-day lake's run after one new hour, {base[3]:.1f} s")
    print(f"  ratio, {last[0]:g} days to {base[0]:g}: {last[3] / base[3]:.2f}x time, {last[4] / base[4]:.2f}x RSS")


if __name__ == "__main__":
    main()
