"""The analytics run after one new hour at 00:30 and at 12:30, over yesterday's merged file in each layout.

    python benchmarks/analytics_midnight.py [--nodes 1250] [--gpus-per-node 8] [--step-s 10] [--repeat 3]
    python benchmarks/analytics_midnight.py --tiny   (2 nodes x 2 GPUs at 60 s, one repeat: checks it runs)

docs/scale.md's figures (9.1 s in the first two hours after midnight against 5.7 s mid-day at 10,000 GPUs) came
from `gpuledger simulate` continuing a lake by an hour and `gpuledger analyze --to` that hour. This script does the
same for two lakes that differ only in how yesterday (2026-11-29) was merged:
  node: the layout before gpuledger/day_layout.py, the inputs concatenated in file order (so sorted by node);
  hour: gpuledger.compaction as it is, rows in hour order (day_layout.hours).
One staging lake is simulated window by window (yesterday, then 00:00-01:00, 01:00-12:00, 12:00-13:00, each
with --no-compact); each window's new files land in both lakes (hard links) when the story reaches it. Per lake:
yesterday compacted (timed, with its peak RSS), `analyze --to 00:00`, the hour to 01:00 lands, and the run
`analyze --to 01:00` is timed --repeat times, the derived tables and state restored before each (the two lakes
alternate, so load drifts hit both); then the lake is analysed to 12:00, the hour to 13:00 lands and
`analyze --to 13:00` is timed the same way. Figures are whole processes (interpreter start-up included): the
median and the spread of wall time, and the median CPU seconds (user + system, from getrusage of the child), which
a loaded shared machine moves far less. The two lakes' derived tables after each timed run must hold the same
rows (DuckDB EXCEPT ALL both ways): the layout changes the cost, never the answer.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _proc import PeakRss, differing_rows  # noqa: E402
from _proc import gpuledger as gl  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpuledger.schema import DERIVED_TABLES  # noqa: E402

DAY = dt.date(2026, 11, 29)
# (end of the window, its length in hours): yesterday, the hour after midnight, up to noon, the hour after noon
WINDOWS = (("2026-11-30T00:00:00Z", 24), ("2026-11-30T01:00:00Z", 1), ("2026-11-30T12:00:00Z", 11))
WINDOWS += (("2026-11-30T13:00:00Z", 1),)
LAYOUTS = ("node", "hour")
CHECKED = ("gpu_5min", "gpu_hourly", "job_5min", "job_hourly", "cost_daily")


def simulate(lake: Path, a, end: str, hours: int) -> set[Path]:
    """Simulate the window into `lake`; the files it added (relative paths)."""
    before = _files(lake)
    args = ("--nodes", str(a.nodes), "--gpus-per-node", str(a.gpus_per_node), "--step-s", str(a.step_s))
    gl("simulate", "--lake", str(lake), *args, "--days", repr(hours / 24), "--end", end, "--no-compact")
    return _files(lake) - before


def _files(lake: Path) -> set[Path]:
    return {p.relative_to(lake) for p in lake.rglob("*.parquet")} if lake.exists() else set()


def land(src: Path, files: set[Path], dst: Path) -> None:
    for f in sorted(files):
        (dst / f).parent.mkdir(parents=True, exist_ok=True)
        os.link(src / f, dst / f)


def compact(lake: Path, layout: str) -> tuple[float, int]:
    """Merge yesterday in `layout`, in a fresh process: (wall seconds, peak RSS)."""
    cmd = [sys.executable, __file__, "--compact-only", str(lake), "--layout", layout]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd)
    with PeakRss(p.pid, every_s=0.05) as rss:
        p.wait()
    if p.returncode:
        sys.exit(f"compacting {lake} ({layout}) failed")
    return time.perf_counter() - t0, rss.peak


def _compact_only(lake: Path, layout: str) -> None:
    from gpuledger import compaction

    if layout == "node":  # the layout before day_layout: the inputs' rows concatenated, file after file

        @contextlib.contextmanager
        def concatenated(rows, table):
            yield [rows]

        compaction.day_layout.hours = concatenated
    compaction.compact(lake, today=DAY + dt.timedelta(days=1), grace_days=1)


def snapshot(lake: Path, to: Path) -> None:
    shutil.rmtree(to, ignore_errors=True)
    for name in [t.name for t in DERIVED_TABLES] + ["_state"]:
        if (lake / name).exists():
            shutil.copytree(lake / name, to / name)


def restore(lake: Path, frm: Path) -> None:
    for name in [t.name for t in DERIVED_TABLES] + ["_state"]:
        shutil.rmtree(lake / name, ignore_errors=True)
        if (frm / name).exists():
            shutil.copytree(frm / name, lake / name)


def timed_runs(lakes: dict[str, Path], tmp: Path, to: str, repeat: int) -> dict[str, list[tuple[float, int, float]]]:
    for layout, lake in lakes.items():
        snapshot(lake, tmp / f"snap-{layout}")
    runs: dict[str, list[tuple[float, int, float]]] = {layout: [] for layout in lakes}
    for _ in range(repeat):
        for layout, lake in lakes.items():
            restore(lake, tmp / f"snap-{layout}")
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            s, rss, _ = gl("analyze", "--lake", str(lake), "--to", to)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            runs[layout].append((s, rss, cpu))
    return runs


def _line(label: str, runs: list[tuple[float, int, float]]) -> str:
    secs, cpus = [s for s, _, _ in runs], [c for _, _, c in runs]
    peak = max(r for _, r, _ in runs)
    return (
        f"  {label:<34} median {statistics.median(secs):6.2f} s  (runs {', '.join(f'{s:.2f}' for s in secs)})"
        f"  CPU median {statistics.median(cpus):6.2f} s  peak RSS {peak / 1e9:.2f} GB"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1250)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--step-s", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tiny", action="store_true", help="2 nodes x 2 GPUs at 60 s, one repeat: checks it runs")
    ap.add_argument("--compact-only", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--layout", choices=LAYOUTS, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.compact_only:
        _compact_only(a.compact_only, a.layout)
        return
    if a.tiny:
        a.nodes, a.gpus_per_node, a.step_s, a.repeat = 2, 2, 60, 1
    tmp = Path(tempfile.mkdtemp(prefix="gl-midnight-"))
    try:
        stage = tmp / "staging"
        landed = [simulate(stage, a, end, hours) for end, hours in WINDOWS]
        lakes = {layout: tmp / f"lake-{layout}" for layout in LAYOUTS}
        merged = {}
        for layout, lake in lakes.items():
            land(stage, landed[0], lake)
            merged[layout] = compact(lake, layout)
            gl("analyze", "--lake", str(lake), "--to", WINDOWS[0][0])
            land(stage, landed[1], lake)
        night = timed_runs(lakes, tmp, WINDOWS[1][0], a.repeat)
        same_night = differing_rows(*lakes.values(), CHECKED)
        for lake in lakes.values():
            gl("analyze", "--lake", str(lake), "--to", WINDOWS[1][0])
            land(stage, landed[2], lake)
            gl("analyze", "--lake", str(lake), "--to", WINDOWS[2][0])
            land(stage, landed[3], lake)
        noon = timed_runs(lakes, tmp, WINDOWS[3][0], a.repeat)
        same_noon = differing_rows(*lakes.values(), CHECKED)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    gpus = a.nodes * a.gpus_per_node
    print(f"analytics run after one new hour, {gpus:,} GPUs at {a.step_s} s, yesterday merged by node or by hour")
    print(f"  load average at the end: {Path('/proc/loadavg').read_text().split(' ', 3)[:3]}")
    for layout in LAYOUTS:
        s, rss = merged[layout]
        print(f"  compaction of yesterday, {layout:<4} layout   {s:6.2f} s  peak RSS {rss / 1e9:.2f} GB")
    for layout in LAYOUTS:
        print(_line(f"00:30 (to 01:00), {layout} layout", night[layout]))
        print(_line(f"12:30 (to 13:00), {layout} layout", noon[layout]))
    base, new = (statistics.median(s for s, _, _ in night[k]) for k in LAYOUTS)
    print(f"  baseline: the node layout's run to 01:00, {base:.2f} s; ratio, hour layout to it: {new / base:.2f}x")
    base_cpu, new_cpu = (statistics.median(c for _, _, c in night[k]) for k in LAYOUTS)
    print(f"  the same in CPU seconds: {base_cpu:.2f} s against {new_cpu:.2f} s, {new_cpu / base_cpu:.2f}x")
    noon_new = statistics.median(s for s, _, _ in noon["hour"])
    noon_cpu = statistics.median(c for _, _, c in noon["hour"])
    print(f"  hour layout, 00:30 against 12:30: {new / noon_new:.2f}x wall, {new_cpu / noon_cpu:.2f}x CPU")
    print(f"  rows differing between the layouts' derived tables: {same_night + same_noon:,}")


if __name__ == "__main__":
    main()
