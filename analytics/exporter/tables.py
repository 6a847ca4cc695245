"""The lake -> `Tables`: what the exporter's figures need, read off the analytics' latest tables.

One read per analytics commit (server.Exporter), never per scrape. Every question is SQL through gpuledger.query.Lake
(SELECT only, a time limit, UTC; either kind of store), and each is small: the latest run's rows of the tables the
analytics recompute whole (decisions, idle_holds, tenants), the last complete hour of the hourly ones, this month's
and the last 8 days' cost, and the whole of health_events (rare events; the counters are cumulative over it).

Each cluster is read at its own latest run (`runs`): one lake may hold several clusters, each analysed on its own
schedule. A cluster's "now" is that run's time (the `tenants` table, which every run rewrites), its last complete hour
the hour before the one `now` falls in.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, fields

import polars as pl

from gpuledger.lake import scan
from gpuledger.query import Lake
from gpuledger.store import LakeRef, open_store

QUERY_TIMEOUT_S = 120.0  # off the scrape path; a year of 1,000 GPUs reads in a few seconds (benchmarks/exporter.py)
BASELINE_DAYS = 7  # the spend-change baseline before the last complete day (Kubecost's spendChange: 7d)
INVENTORY_DAYS = 7  # a node seen this recently is in the inventory; one gone longer is taken as retired
WAIT_WINDOW_H = 24  # wait-time quantiles of jobs scheduled in the last 24 h
LOST_WINDOW_H = 24  # GPUs with a `lost` event in the last 24 h

# Each cluster's latest run, and its last complete hour (a run mid-hour has written the hour in progress too).
RUNS = (
    "WITH r AS (SELECT cluster, max(computed_at) AS now, date_trunc('hour', max(computed_at)) - INTERVAL 1 HOUR AS h "
    "FROM tenants GROUP BY 1) "
)
QUERIES = {
    "runs": RUNS + "SELECT cluster, now AS ran_at, h AS hour FROM r ORDER BY 1",
    "decisions": "SELECT cluster, tenant, gpu_model, quota_gpus, headroom_gpus, budget_usd, spent_usd, "
    "budget_used_pct, weight_share, usage_share, fairshare, computed_at FROM decisions d "
    "WHERE computed_at = (SELECT max(computed_at) FROM decisions l WHERE l.cluster = d.cluster)",
    "idle_holds": "SELECT cluster, tenant, gpu_model, share, idle_s FROM idle_holds d "
    "WHERE computed_at = (SELECT max(computed_at) FROM idle_holds l WHERE l.cluster = d.cluster)",
    # allocated GPU-hours of one hour = mean GPUs allocated over it
    "tenant_hour": RUNS + "SELECT j.cluster, j.tenant, j.gpu_model, sum(allocated_gpu_hours) AS allocated_gpus, "
    "sum(busy_gpu_hours) AS busy_gpus, sum(idle_gpu_hours) AS idle_gpus FROM job_hourly j JOIN r "
    "ON j.cluster = r.cluster AND j.hour = r.h WHERE j.date >= $since GROUP BY ALL",
    "tenant_days": "SELECT cluster, tenant, date, sum(allocated_gpu_hours) AS allocated_gpu_hours, "
    "sum(busy_gpu_hours) AS busy_gpu_hours FROM job_hourly WHERE date >= $since GROUP BY ALL",
    "cost_days": "SELECT cluster, tenant, gpu_model, date, sum(cost_usd) AS cost_usd, "
    "sum(idle_share_usd) AS idle_share_usd FROM cost_daily WHERE date >= $since GROUP BY ALL",
    "pending": "SELECT cluster, tenant, gpu_model, count(*) AS jobs, sum(gpus) AS gpus FROM job_stats "
    "WHERE status = 'pending' GROUP BY ALL",
    # the same percentile rule as sql/queue_stats.sql and analytics/queue_time.py (linear interpolation)
    "waits": RUNS + "SELECT j.cluster, j.gpu_model, count(*) AS jobs, quantile_cont(queue_s, 0.5) AS p50, "
    "quantile_cont(queue_s, 0.9) AS p90, quantile_cont(queue_s, 0.99) AS p99 FROM job_stats j JOIN r "
    f"ON j.cluster = r.cluster WHERE j.scheduled_at > r.now - INTERVAL {WAIT_WINDOW_H} HOUR "
    "AND j.scheduled_at <= r.now GROUP BY ALL",
    # per workload class: held, busy and idle GPUs of the last complete hour, this month's cost of the jobs (idle
    # capacity has no class), and waits of the last 24 h (the same percentile rule as "waits")
    "class_hour": RUNS + "SELECT j.cluster, j.tenant, j.workload_class, sum(allocated_gpu_hours) AS allocated_gpus, "
    "sum(busy_gpu_hours) AS busy_gpus, sum(idle_gpu_hours) AS idle_gpus FROM job_hourly j JOIN r "
    "ON j.cluster = r.cluster AND j.hour = r.h WHERE j.date >= $since GROUP BY ALL",
    "class_cost": RUNS + "SELECT a.cluster, s.tenant, s.workload_class, sum(a.cost_usd) AS cost_usd "
    "FROM cost_allocation a JOIN r ON a.cluster = r.cluster JOIN job_stats s ON s.cluster = a.cluster "
    "AND s.job_id = a.job_id WHERE a.date >= $since AND a.job_id IS NOT NULL "
    "AND a.period_start >= date_trunc('month', r.now) AND a.period_start <= r.now GROUP BY ALL",
    "class_waits": RUNS + "SELECT j.cluster, j.workload_class, count(*) AS jobs, quantile_cont(queue_s, 0.5) AS p50, "
    "quantile_cont(queue_s, 0.9) AS p90, quantile_cont(queue_s, 0.99) AS p99 FROM job_stats j JOIN r "
    f"ON j.cluster = r.cluster WHERE j.scheduled_at > r.now - INTERVAL {WAIT_WINDOW_H} HOUR "
    "AND j.scheduled_at <= r.now GROUP BY ALL",
    "fleet": RUNS
    + "SELECT f.cluster, f.gpu_model, f.gpus, f.allocated_gpus, f.busy_gpus, f.vendor FROM fleet_hourly f "
    "JOIN r ON f.cluster = r.cluster AND f.hour = r.h WHERE f.date >= $since",
    "fragmentation": RUNS + "SELECT f.cluster, f.gpu_model, f.free_gpus, f.frag_rate, f.stranded_1gpu, "
    "f.stranded_2gpu, f.stranded_4gpu, f.stranded_8gpu FROM fragmentation f JOIN r ON f.cluster = r.cluster "
    "WHERE f.date >= $since AND f.ts <= r.now QUALIFY f.ts = max(f.ts) OVER (PARTITION BY f.cluster, f.gpu_model)",
    "inventory": RUNS + "SELECT n.cluster, n.gpu_model, sum(n.gpu_count) AS gpus, max(n.gpu_mem_bytes) AS mem_bytes "
    f"FROM nodes n JOIN r ON n.cluster = r.cluster WHERE n.last_seen > r.now - INTERVAL {INVENTORY_DAYS} DAY "
    "GROUP BY ALL",
    # Whole table: the counters are cumulative over every event the lake holds.
    "health": "SELECT e.cluster, n.gpu_model, e.kind, e.code, count(*) AS events FROM health_events e "
    "LEFT JOIN nodes n ON e.cluster = n.cluster AND e.node = n.node WHERE e.kind IN ('xid', 'ecc', 'lost') "
    "GROUP BY ALL",
    "lost": RUNS + "SELECT e.cluster, n.gpu_model, count(DISTINCT coalesce(e.gpu_uuid, e.node)) AS gpus "
    "FROM health_events e JOIN r ON e.cluster = r.cluster LEFT JOIN nodes n ON e.cluster = n.cluster "
    f"AND e.node = n.node WHERE e.kind = 'lost' AND e.ts > r.now - INTERVAL {LOST_WINDOW_H} HOUR AND e.ts <= r.now "
    "AND e.date >= $since GROUP BY ALL",
}


@dataclass(frozen=True)
class Tables:
    """The frames the figures are built from (figures.build); every one empty on a lake with no analytics."""

    runs: pl.DataFrame  # cluster, ran_at, hour (its last complete hour)
    decisions: pl.DataFrame
    idle_holds: pl.DataFrame
    tenant_hour: pl.DataFrame
    tenant_days: pl.DataFrame
    cost_days: pl.DataFrame
    pending: pl.DataFrame
    waits: pl.DataFrame
    class_hour: pl.DataFrame
    class_cost: pl.DataFrame
    class_waits: pl.DataFrame
    fleet: pl.DataFrame
    fragmentation: pl.DataFrame
    inventory: pl.DataFrame
    health: pl.DataFrame
    lost: pl.DataFrame
    drivers: pl.DataFrame  # cluster, gpu_model, driver_version, mem_bytes (gpu_samples of the last complete hour)

    @classmethod
    def empty(cls) -> Tables:
        return cls(**{f.name: pl.DataFrame() for f in fields(cls)})


def _earliest(runs: pl.DataFrame) -> tuple[dt.date, dt.date]:
    """(the first date any cluster's month-to-date or spend baseline reads, the first date of a last hour)."""
    first_hour = min(runs["hour"].to_list())
    first_run = min(runs["ran_at"].to_list())
    month = first_run.date().replace(day=1)
    baseline = first_run.date() - dt.timedelta(days=BASELINE_DAYS + 1)
    return min(month, baseline), min(first_hour.date(), (first_run - dt.timedelta(days=INVENTORY_DAYS)).date())


def _drivers(lake, runs: pl.DataFrame) -> pl.DataFrame:
    """Driver version and memory per model, from the raw samples of each cluster's last complete hour: one date's
    folder listed and read (polars, lake.scan), never the year's files a view over gpu_samples would bind."""
    frames = []
    for day in sorted({h.date() for h in runs["hour"].to_list()}):
        s = scan(lake, "gpu_samples", day).join(runs.lazy().select("cluster", "hour"), on="cluster")
        frames.append(
            s.filter((pl.col("ts") >= pl.col("hour")) & (pl.col("ts") < pl.col("hour") + pl.duration(hours=1)))
            .group_by("cluster", pl.col("model").alias("gpu_model"), "driver_version")
            .agg(pl.col("mem_total_bytes").max().alias("mem_bytes"))
            .collect()
        )
    return pl.concat(frames).unique() if frames else pl.DataFrame()


def read(lake: LakeRef) -> Tables:
    """The lake's figures as of each cluster's latest analytics run; `Tables.empty()` when none has run."""
    store = open_store(lake)
    with store.reading(), Lake(store) as q:  # the analytics replace these files only between reads
        runs = q.execute(QUERIES["runs"], timeout_s=QUERY_TIMEOUT_S).frame
        if runs.is_empty():
            return Tables.empty()
        since, recent = _earliest(runs)
        out = {"runs": runs}
        for name, sql in QUERIES.items():
            if name == "runs":
                continue
            params = (
                {"since": since if name in ("cost_days", "tenant_days", "class_cost") else recent}
                if "$since" in sql
                else None
            )
            out[name] = q.execute(sql, params, timeout_s=QUERY_TIMEOUT_S).frame
    out["drivers"] = _drivers(store, runs)
    return Tables(**out)
