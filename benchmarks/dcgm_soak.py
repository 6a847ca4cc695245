"""The real collector, running: scrape, spool and flush to the lake against many dcgm-exporter endpoints.

    python benchmarks/dcgm_soak.py [--endpoints 10000] [--minutes 10] [--interval-s 10] [--flush-interval-s 30]
    (--tiny: 4 endpoints for 4 s at 0.5 s, flushing every 1 s, so the test suite runs this script)

The page servers are benchmarks/dcgm_fleet.py's (8 GPUs x 40 fields a page, keep-alive, in their own processes on
the same cores). The collector is the one `gpuledger collect --source dcgm` runs: collector/runner.py's Collector
over a DcgmSource built as collector/sources.py builds it (its default timeout, deadline and worker processes), a
fsynced Spool and a LakeWriter on local disk, driven by apscheduler (scrape every interval, flush every flush
interval, coalesced) for the whole duration, then stopped as SIGTERM stops it (a last flush).

Printed: every round's time (p50, max: the first round reads every page in full, later ones replay its plan), the
largest spool between two flushes, the flushes' times, and the rows in the lake against the rows acknowledged (the
spool's fsync done): they must be equal. Baseline: the interval, the time a round has; the ratio is p50 / interval.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import dcgm_fleet  # noqa: E402  (the page servers)


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoints", type=int, default=10_000)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--interval-s", type=float, default=10.0)
    ap.add_argument("--flush-interval-s", type=float, default=30.0)
    ap.add_argument("--dir", type=Path, help="spool and lake here (default: a new temporary folder)")
    ap.add_argument("--tiny", action="store_true", help="4 endpoints for 4 s: checks it runs")
    a = ap.parse_args()
    if a.tiny:
        a.endpoints, a.minutes, a.interval_s, a.flush_interval_s = 4, 4 / 60, 0.5, 1.0
    dcgm_fleet.raise_nofile(a.endpoints, 128)
    import polars as pl

    from gpuledger.collector.dcgm_source import DcgmSource
    from gpuledger.collector.runner import Collector, run_until_stopped
    from gpuledger.config import Config
    from gpuledger.lake import LakeWriter, scan
    from gpuledger.spool import Spool

    base = a.dir or Path(tempfile.mkdtemp(prefix="dcgm-soak-"))
    lake, spool_dir = base / "lake", base / "spool"
    cfg = Config()
    cfg = dataclasses.replace(cfg, collector=dataclasses.replace(cfg.collector, interval_s=a.interval_s))
    servers, urls = dcgm_fleet.start_servers(a.endpoints)
    acked: Counter[str] = Counter()
    rounds: list[tuple[float, float]] = []  # (start, seconds) of each scrape
    flushes: list[tuple[float, int]] = []  # (seconds, spool bytes just before) of each flush
    largest = [0]

    def ack(batch) -> None:  # called once the batch is fsynced in the spool
        acked[batch.table] += batch.rows

    src = DcgmSource(cfg, urls)
    col = Collector([src], Spool(spool_dir, "soak"), LakeWriter(lake), cfg.cluster, "soak", on_ack=ack)
    col.start()
    scrape, flush = col.scrape_logged, col.flush_logged

    def timed_scrape() -> None:
        t0 = time.perf_counter()
        scrape()
        rounds.append((t0, time.perf_counter() - t0))
        largest[0] = max(largest[0], col.spool.depth()[1])

    def timed_flush() -> None:
        size = col.spool.depth()[1]
        t0 = time.perf_counter()
        flush()
        flushes.append((time.perf_counter() - t0, size))

    col.scrape_logged, col.flush_logged = timed_scrape, timed_flush  # the scheduler runs these
    stop = threading.Event()
    threading.Timer(a.minutes * 60, stop.set).start()
    load0, cpu0, t0 = load(), os.times(), time.perf_counter()
    run_until_stopped(lambda sch: col.schedule(sch, a.interval_s, a.flush_interval_s), stop)
    workers_cpu = dcgm_fleet.cpu_s(dcgm_fleet.worker_pids(src))  # before close ends them
    servers_cpu = dcgm_fleet.cpu_s([p.pid for p in servers])
    t_close = time.perf_counter()
    col.close()  # the last flush, as on SIGTERM; raises unless every acknowledged row is in the lake
    close_s, wall_s, cpu1 = time.perf_counter() - t_close, time.perf_counter() - t0, os.times()
    load1 = load()
    for p in servers:
        p.terminate()
    in_lake = {t: scan(lake, t).select(pl.len()).collect().item() for t in acked}
    times = sorted(s for _, s in rounds)
    p50 = statistics.median(times)
    own_cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    errors = scan(lake, "health_events").filter(pl.col("kind") == "scrape_error").select(pl.len()).collect().item()
    print(
        f"soak: the collector against {a.endpoints:,} dcgm-exporter endpoints (8 GPUs x 40 fields), every "
        f"{a.interval_s:g} s for {a.minutes * 60:.0f} s, flush every {a.flush_interval_s:g} s, spool fsynced "
        f"({src.workers} worker process{'es' if src.workers > 1 else ''})"
    )
    print(f"  load average                    {load0} before, {load1} after")
    print(
        f"  rounds                          {len(times)} in {wall_s:.0f} s (a round longer than the interval skips one)"
    )
    print(f"  round time                      p50 {p50:.2f} s   max {times[-1]:.2f} s   first {rounds[0][1]:.2f} s")
    print(f"  baseline: the interval          {a.interval_s:g} s; ratio p50 / interval {p50 / a.interval_s:.2f}x")
    fl = sorted(s for s, _ in flushes) or [0.0]
    print(f"  flushes                         {len(flushes)}, p50 {statistics.median(fl):.2f} s, max {fl[-1]:.2f} s")
    print(f"  largest spool between flushes   {largest[0] / 1e6:.1f} MB; the last flush on stop {close_s:.2f} s")
    print(
        f"  CPU                             collector {own_cpu:.0f} s, its workers {workers_cpu:.0f} s, "
        f"page servers {servers_cpu:.0f} s, in {wall_s:.0f} s on {os.cpu_count()} cores"
    )
    pages = acked["gpu_samples"] / 8 / max(1, len(times))  # 8 GPUs a page: 8 gpu_samples rows
    print(f"  pages read a round              {pages:,.0f} of {a.endpoints:,} on average (the rest past the deadline)")
    print(f"  scrape_error rows               {errors:,} (targets a round could not read before its deadline)")
    for t in sorted(acked):
        print(f"  rows {t:<27} acknowledged {acked[t]:,}   in the lake {in_lake[t]:,}")
    same = in_lake == dict(acked)
    print(f"  rows in the lake = rows acknowledged: {'yes' if same else 'NO'}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
