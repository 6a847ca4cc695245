"""The FinOps SQL layer over one year of a 1,000-GPU fleet: every view, and the FOCUS export of one month.

    python benchmarks/finops_views.py [--lake DIR] [--rounds 3] [--tiny]
    (default: builds the year in a temp dir with `gpuledger simulate --days 365 --step-s 3600` on 125 nodes x 8 GPUs,
    one sample per GPU-hour, then `gpuledger analyze`; give --lake to reuse one. --tiny: 2 nodes x 2 GPUs for 3 days
    and one round, seconds in all, so the test suite runs this script)

For every view of sql/ it times, best of `--rounds`, through the same DuckDB helper `gpuledger sql` uses:
- `scan`: the whole view, every row and column, into Arrow (what an export or a dashboard load does);
- `query`: one analyst question over it (a GROUP BY a month or a tenant, below), which is what the < 1 s target
  is about;
and, as the baseline in the same run, DuckDB reading the view's own Parquet files with `read_parquet` and no view
(for views over other views: the files of the tables they read), the files as `gpuledger.lake.table_files` lists
them, so the baseline follows the lake's layout. Raw telemetry tables, and node_claims (a view over gpu_samples,
whose baseline reads gpu_samples' files), are asked about their last week
(`WHERE date >= ...`, which prunes partitions), as one reads raw samples; one whole-year question over gpu_samples
is timed once apart.
Then `gpuledger export focus` for one month (a whole process, start-up included) against a bare
`COPY (SELECT * FROM read_parquet(<cost_allocation files>) WHERE <that month>) TO` a Parquet file.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import duckdb  # noqa: E402
from _proc import gpuledger as gl  # noqa: E402

from gpuledger.lake import table_files  # noqa: E402
from gpuledger.query import Lake, sql_files  # noqa: E402

END = "2026-12-01T00:00:00Z"
MONTH = "2026-11"
LAST_WEEK = "2026-11-24"
RAW = {
    "gpu_samples",
    "gpu_processes",
    "gpu_fields",
    "jobs",
    "nodes",
    "health_events",
    "admission_decisions",
    "reclaim_actions",
    "quota_events",
}
# Views over raw telemetry: asked about the last week like the tables they read (a year of samples is the cost the
# whole-year gpu_samples line already shows; node_claims' own header says to filter on `date`).
RAW_VIEWS = {"node_claims"}

# One analyst question per view: each groups the year by month, day, tenant or model. Months come from `date` (every
# table's UTC day, a DATE), as docs/finops.md advises: date_trunc on a TIMESTAMPTZ goes through ICU's calendar
# (gpu_hourly: 0.98 s against 0.26 s), and the same query on the timestamp is timed once below for the record.
QUERIES = {
    "gpu_samples": "SELECT model, date_trunc('month', date) m, avg(util_gpu_pct) FROM gpu_samples GROUP BY ALL",
    "gpu_processes": "SELECT date_trunc('month', date) m, count(*) FROM gpu_processes GROUP BY ALL",
    "gpu_fields": "SELECT field, count(*) FROM gpu_fields GROUP BY ALL",
    "jobs": "SELECT tenant, status, count(*) FROM jobs GROUP BY ALL",
    "nodes": "SELECT gpu_model, sum(gpu_count) FROM nodes GROUP BY ALL",
    "health_events": "SELECT kind, count(*) FROM health_events GROUP BY ALL",
    "admission_decisions": "SELECT tenant, decision, count(*) FROM admission_decisions GROUP BY ALL",
    "quarantined_files": "SELECT table_name, found_by, count(*) FROM quarantined_files GROUP BY ALL",
    "gpu_hourly": "SELECT model, date_trunc('month', date) m, avg(busy_ratio), sum(energy_wh) FROM gpu_hourly "
    "GROUP BY ALL",
    "gpu_5min": "SELECT model, date_trunc('month', date) m, avg(util_gpu_pct_mean) FROM gpu_5min GROUP BY ALL",
    "job_hourly": "SELECT tenant, date_trunc('month', date) m, sum(allocated_gpu_hours), sum(idle_gpu_hours) "
    "FROM job_hourly GROUP BY ALL",
    "job_5min": "SELECT tenant, date_trunc('month', date) m, sum(busy_gpu_hours) FROM job_5min GROUP BY ALL",
    "job_stats": "SELECT tenant, date_trunc('month', date) m, sum(cost_usd), "
    "sum(busy_gpu_hours) / sum(allocated_gpu_hours) FROM job_stats GROUP BY ALL",
    "gpu_allocations": "SELECT tenant, sum(share) FROM gpu_allocations GROUP BY ALL",
    "cost_daily": "SELECT tenant, date_trunc('month', date) m, sum(cost_usd + idle_share_usd) FROM cost_daily "
    "GROUP BY ALL",
    "cost_allocation": "SELECT tenant, date_trunc('month', date) m, sum(cost_usd) FROM cost_allocation GROUP BY ALL",
    "decisions": "SELECT tenant, sum(allocated_gpus) FROM decisions GROUP BY ALL",
    "fragmentation": "SELECT gpu_model, date_trunc('month', date) m, avg(frag_rate), sum(fragmented_gpus) "
    "FROM fragmentation GROUP BY ALL",
    "queue_depth": "SELECT gpu_model, max(pending_jobs) FROM queue_depth GROUP BY ALL",
    "tenants": "SELECT tenant, budget_usd_per_month FROM tenants",
    "chargeback_monthly": "SELECT tenant, month, total_usd, budget_used_pct FROM chargeback_monthly",
    "focus_cost": "SELECT x_Tenant, BillingPeriodStart, sum(BilledCost) FROM focus_cost GROUP BY ALL",
    "queue_stats": "SELECT * FROM queue_stats",
    "tenant_daily": "SELECT tenant, date_trunc('month', day) m, sum(cost_usd), sum(busy_gpu_hours) FROM tenant_daily "
    "GROUP BY ALL",
    "fleet_hourly": "SELECT gpu_model, date_trunc('month', date) m, avg(allocated_gpus), max(demand_gpus) "
    "FROM fleet_hourly GROUP BY ALL",
    "demand_forecast": "SELECT gpu_model, kind, avg(demand_gpus), avg(actual_gpus) FROM demand_forecast GROUP BY ALL",
    "idle_holds": "SELECT tenant, sum(share), max(idle_s) FROM idle_holds GROUP BY ALL",
    "pod_shapes": "SELECT workload, sum(pods) FROM pod_shapes GROUP BY ALL",
    # Which node names two machines claimed, on how many days and for how long (5-minute buckets).
    "node_claims": "SELECT cluster, node, count(*) AS days, sum(buckets) FROM node_claims GROUP BY ALL",
    "reclaim_actions": "SELECT tenant, action, result, count(*) FROM reclaim_actions GROUP BY ALL",
    "reclaim_savings": "SELECT tenant, month, sum(gpu_hours_freed_per_day) FROM reclaim_savings GROUP BY ALL",
    "class_daily": "SELECT workload_class, date_trunc('month', day) m, sum(idle_gpu_hours), sum(cost_usd), "
    "max(wait_p95_s) FROM class_daily GROUP BY ALL",
    "quota_events": "SELECT tenant, action, count(*) FROM quota_events GROUP BY ALL",
    "quota_requests": "SELECT tenant, state, sum(gpus) FROM quota_requests GROUP BY ALL",
}
# Views over other views: the tables whose files they read (the baseline reads those).
SOURCES = {
    "chargeback_monthly": ("cost_daily", "tenants"),
    "focus_cost": ("cost_allocation",),
    "queue_stats": ("job_stats",),
    "tenant_daily": ("cost_daily", "job_hourly"),
    "node_claims": ("gpu_samples",),
    "reclaim_savings": ("reclaim_actions",),
    "class_daily": ("job_hourly", "cost_allocation", "job_stats"),
    "quota_requests": ("quota_events",),
}


def best(f, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def files(lake: Path, table: str) -> list[str]:
    """The table's Parquet files as the lake lists them (empty when it has none)."""
    return [str(Path(lake, k)) for k in table_files(lake, table)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lake", type=Path, default=None)
    ap.add_argument("--rounds", type=int, default=None, help="[3; 1 with --tiny]")
    ap.add_argument("--tiny", action="store_true", help="2 nodes x 2 GPUs for 3 days, one round: checks it runs")
    a = ap.parse_args()
    a.rounds = a.rounds or (1 if a.tiny else 3)
    tmp = None
    lake = a.lake
    if lake is None:
        tmp = Path(tempfile.mkdtemp(prefix="gl-finops-"))
        lake = tmp / "lake"
        nodes, gpus, days = ("2", "2", "3") if a.tiny else ("125", "8", "365")
        sim = ["--nodes", nodes, "--gpus-per-node", gpus, "--days", days, "--step-s", "3600", "--end", END]
        print(f"simulate: {gl('simulate', '--lake', str(lake), *sim)[0]:.0f} s", flush=True)
        print(f"analyze: {gl('analyze', '--lake', str(lake), '--to', END)[0]:.0f} s", flush=True)
    with Lake(lake) as q:
        (hours,) = q.execute("SELECT count(*) FROM gpu_hourly").rows[0]
        (gpus,) = q.execute("SELECT count(DISTINCT gpu_uuid) FROM gpu_hourly").rows[0]
        print(f"{hours:,} hourly rollup rows for {gpus:,} GPUs; best of {a.rounds} rounds")
        print(f"{'view':30s} {'rows':>11s} {'query':>8s} {'scan':>8s} {'baseline':>9s} {'scan/baseline':>14s}")
        worst = 0.0
        if missing := sorted(set(sql_files()) - set(QUERIES)):
            sys.exit(f"benchmarks/finops_views.py: no analyst question in QUERIES for the view(s) {', '.join(missing)}")
        for name in sql_files():
            week = f" WHERE date >= DATE '{LAST_WEEK}'" if name in RAW | RAW_VIEWS else ""
            rows = q.execute(f"SELECT count(*) FROM {name}{week}", timeout_s=None).rows[0][0]
            query = QUERIES[name].replace(" GROUP BY", f"{week} GROUP BY") if week else QUERIES[name]
            # Raw tables: one round (each read lists and opens tens of thousands of files; see the docstring).
            rounds = 1 if week else a.rounds
            t_query = best(lambda s=query: q.execute(s, timeout_s=None), rounds)
            scan = f"SELECT * FROM {name}{week}"
            t_scan = best(lambda s=scan: q.con.sql(s).to_arrow_table(), rounds)
            lists = {f"f{k}": files(lake, t) for k, t in enumerate(SOURCES.get(name, (name,)))}
            if all(lists.values()):
                base = " UNION ALL BY NAME ".join(
                    f"SELECT * FROM read_parquet(${k}, hive_partitioning = true, union_by_name = true){week}"
                    for k in lists
                )
                t_base = best(lambda b=base, p=lists: q.con.sql(b, params=p).to_arrow_table(), rounds)
                ratio = f"{t_scan / t_base:13.2f}x"
                base_txt = f"{t_base:8.3f}s"
            else:
                ratio, base_txt = f"{'(no files)':>14s}", f"{'-':>9s}"
            if not week:
                worst = max(worst, t_query)
            label = f"{name} (last week)" if week else name
            print(f"{label:30s} {rows:11,d} {t_query:7.3f}s {t_scan:7.3f}s {base_txt} {ratio}")
        print(f"slowest analyst query over a view of the analytics tables: {worst:.3f} s (target < 1 s)")
        t0 = time.perf_counter()
        q.execute(QUERIES["gpu_samples"], timeout_s=None)
        print(f"gpu_samples, the whole year (one round): {time.perf_counter() - t0:.1f} s")
        tz = QUERIES["gpu_hourly"].replace("date_trunc('month', date)", "date_trunc('month', hour)")
        print(f"gpu_hourly by month of the TIMESTAMPTZ instead of date: {best(lambda: q.execute(tz), a.rounds):.3f} s")
        cost_files = files(lake, "cost_allocation")
        out_dir = Path(tempfile.mkdtemp(prefix="gl-focus-"))
        # A connection of its own: the lake's refuses to write files (`gpuledger sql` is read-only).
        bare = duckdb.connect()
        copy_s = best(
            lambda: bare.execute(
                f"COPY (SELECT * FROM read_parquet(?) WHERE period_start >= TIMESTAMPTZ '{MONTH}-01' AND "
                f"period_start < TIMESTAMPTZ '{MONTH}-01' + INTERVAL 1 MONTH) TO '{out_dir / 'bare.parquet'}'",
                [cost_files],
            ),
            a.rounds,
        )
        bare.close()
    export_s = min(
        gl("export", "focus", "--lake", str(lake), "--period", MONTH, "--out", str(out_dir / "focus.parquet"))[0]
        for _ in range(a.rounds)
    )
    import polars as pl

    n = pl.scan_parquet(out_dir / "focus.parquet").select(pl.len()).collect().item()
    print(f"export focus --period {MONTH}: {n:,} charges in {export_s:.2f} s (a whole process; target < 10 s)")
    print(
        f"  baseline: COPY of that month's cost_allocation rows to Parquet {copy_s:.2f} s; "
        f"ratio {export_s / copy_s:.1f}x"
    )
    shutil.rmtree(out_dir, ignore_errors=True)
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
