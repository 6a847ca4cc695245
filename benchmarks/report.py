"""The monthly report's build time for one month of a lake, against the views' queries alone in the same run.

    python benchmarks/report.py --lake DIR [--month 2026-11] [--rounds 3]
    python benchmarks/report.py --tiny      (2 nodes x 2 GPUs for 3 days, simulated and analysed here; one round)

Each round times, on a fresh Lake each (views bound, files listed, as a new `gpuledger report` process does):
- baseline: the report's queries over the sql/ views alone (gpuledger.report.month.gather), what any reader of those
  figures pays;
- report: write_report, the same queries plus the HTML with its SVG figures and the atomic write.
The ratio report / baseline is what rendering and writing add. Then each query alone once (the slowest first), and
`gpuledger report` as a whole process, start-up included.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpuledger.config import defaults  # noqa: E402
from gpuledger.query import Lake  # noqa: E402
from gpuledger.report import month as report_month  # noqa: E402
from gpuledger.report import write_report  # noqa: E402

TINY_END = "2026-11-03T00:00:00Z"


def build_tiny(root: Path) -> Path:
    lake = root / "lake"
    env = {**os.environ, "GPULEDGER_LAKE": str(lake)}
    cli = [sys.executable, "-m", "gpuledger.cli"]
    sim = ["simulate", "--nodes", "2", "--gpus-per-node", "2", "--days", "3", "--step-s", "600", "--end", TINY_END]
    subprocess.run([*cli, *sim], check=True, env=env, capture_output=True, cwd=root)
    subprocess.run([*cli, "analyze", "--to", TINY_END], check=True, env=env, capture_output=True, cwd=root)
    return lake


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lake", type=Path, help="an analysed lake (e.g. the year of 1,000 GPUs)")
    ap.add_argument("--month", default="2026-11")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tiny", action="store_true", help="a 4-GPU lake of 3 days, one round: checks it runs")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gl-report-"))
    try:
        if a.tiny:
            a.lake, a.month, a.rounds = build_tiny(tmp), "2026-11", 1
        elif a.lake is None:
            ap.error("--lake is needed (or --tiny)")
        cfg = defaults()
        idle = (cfg.analytics.idle_policy, cfg.analytics.platform_tenant)
        with Lake(a.lake) as lake:
            gpus = lake.execute("SELECT CAST(sum(gpu_count) AS BIGINT) FROM nodes").rows[0][0]
            days = lake.execute(
                "SELECT count(DISTINCT date) FROM cost_daily WHERE strftime(date, '%Y-%m') = $m", {"m": a.month}
            ).rows[0][0]
        print(f"report of {a.month} over {a.lake}: {gpus:,} GPUs, {days} day(s) of cost")
        out = tmp / "report.html"
        best_q = best_r = float("inf")

        def queries():
            with Lake(a.lake) as lake:
                return report_month.gather(lake, a.month, None, *idle)

        queries()  # warm: imports, DuckDB's first query, the OS's file cache
        for i in range(1, a.rounds + 1):
            tq, _ = timed(queries)
            tr, summary = timed(lambda: write_report(a.lake, cfg, a.month, out))
            best_q, best_r = min(best_q, tq), min(best_r, tr)
            print(
                f"round {i}: views' queries alone {tq:.2f} s   report (queries + HTML + write) {tr:.2f} s   "
                f"ratio {tr / tq:.2f}x"
            )
        print(
            f"best of {a.rounds}: queries {best_q:.2f} s   report {best_r:.2f} s   ratio {best_r / best_q:.2f}x   "
            f"file {out.stat().st_size / 1024:,.0f} KB   reconciles: {'yes' if summary.reconciles else 'NO'}"
        )
        # Each query alone, on one Lake whose views are bound: where the time goes.
        names = [
            "TOTALS",
            "TENANTS",
            "IDLE_LINE",
            "DAILY",
            "CAPACITY",
            "LOST",
            "TOP_IDLE_JOBS",
            "QUEUE",
            "FORECAST",
            "FORECAST_SERIES",
            "RATES",
        ]
        with Lake(a.lake) as lake:
            r = report_month.gather(lake, a.month, None, *idle)  # binds the views; gives the parameters' values
            values = dict(
                start=r.start,
                end=r.end,
                prev=r.prev,
                cluster=None,
                days=r.days,
                prev_days=r.prev_days,
                last_day=r.last_day,
                data_from=r.data_from or r.generated_at,
                data_to=r.data_to or r.generated_at,
            )
            values |= dict(
                start_ts=report_month._ts(r.start),
                end_ts=report_month._ts(r.end),
                prev_ts=report_month._ts(r.prev),
                w7=r.last_day - report_month.dt.timedelta(days=6),
                w14=r.last_day - report_month.dt.timedelta(days=13),
            )
            run = report_month._Runner(lake, values)
            each = sorted(((timed(lambda n=n: run.frame(getattr(report_month, n)))[0], n) for n in names), reverse=True)
        from gpuledger.report.html import render

        t_html, _ = timed(lambda: render(r))
        print(f"HTML and its SVG figures alone: {1000 * t_html:.0f} ms")
        print("each query once: " + ", ".join(f"{n} {t:.2f} s" for t, n in each[:4]))
        env = {**os.environ, "GPULEDGER_LAKE": str(a.lake)}
        cmd = [sys.executable, "-m", "gpuledger.cli", "report", "--month", a.month, "--out", str(tmp / "cli.html")]
        tc, p = timed(lambda: subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp))
        if p.returncode != 0:
            sys.exit(p.stderr)
        print(f"gpuledger report, a whole process: {tc:.2f} s")
        print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
