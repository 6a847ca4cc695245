"""Waste: GPUs allocated but idle, what they cost, who holds them, the trend, and what reclaim gave back."""

from __future__ import annotations

import datetime as dt

from gpuledger.dashboards import figures, links
from gpuledger.dashboards.classes import by_class
from gpuledger.dashboards.filters import BOTH_SQL, TENANT_SQL, by_cluster
from gpuledger.dashboards.ui import graph, kpi, no_data, note, section, table

PATH = "/waste"
NAME = "Waste"


def by_tenant(data, f):
    """Idle allocated GPU-hours per cluster and tenant, priced at the tenant's own cost per GPU-hour in the range."""
    p = [f.start, f.end, *f.both_args]
    return data.frame(
        "WITH idle AS (SELECT cluster, tenant, gpu_model, sum(idle_gpu_hours) AS idle_gpu_hours, "
        "sum(allocated_gpu_hours) AS allocated_gpu_hours FROM job_daily "
        f"WHERE date BETWEEN ? AND ? AND tenant IS NOT NULL AND {BOTH_SQL} GROUP BY ALL), "
        "price AS (SELECT cluster, tenant, gpu_model, sum(cost_usd) / nullif(sum(gpu_hours), 0) AS usd_per_gpu_hour "
        f"FROM cost_daily WHERE date BETWEEN ? AND ? AND {BOTH_SQL} GROUP BY ALL) "
        "SELECT cluster, tenant, sum(idle_gpu_hours) AS idle_gpu_hours, "
        "100 * sum(idle_gpu_hours) / nullif(sum(allocated_gpu_hours), 0) AS idle_pct_of_allocated, "
        "sum(idle_gpu_hours * usd_per_gpu_hour) AS idle_cost_usd "
        "FROM idle LEFT JOIN price USING (cluster, tenant, gpu_model) GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2",
        p + p,
    )


def idle_now(data, f):
    """Pods idle now, at the last analysis: what the enforcer's idle-hog gate weighs (tenant and model filters only;
    "now" has no date range)."""
    return data.frame(
        "SELECT cluster, tenant, namespace, pod, gpu_model, sum(share) AS idle_gpus, min(idle_since) AS idle_since, "
        "max(idle_s) / 3600 AS idle_h FROM idle_holds "
        f"WHERE {BOTH_SQL} GROUP BY ALL ORDER BY idle_gpus DESC, idle_h DESC, pod LIMIT 200",
        f.both_args,
    )


# The what-if replays at most this many days (analytics.whatif.MAX_WINDOW_DAYS): the range's last month.
STRICTER_DAYS = 31


def reclaimed(data, f):
    """reclaim_savings per tenant and month for the months the range touches (tenant filter and scope; the actions
    have no GPU model filter: a job's GPUs are one model, the row names it, the savings view sums across)."""
    if not data.has("reclaim_actions"):
        return None
    start = f.start.replace(day=1)
    return data.frame(
        "SELECT cluster, tenant, month, actions, jobs, gpus, gpu_hours_freed_per_day, usd_per_day FROM reclaim_savings "
        f"WHERE month BETWEEN ? AND ? AND {TENANT_SQL} ORDER BY month DESC, gpu_hours_freed_per_day DESC, tenant",
        [start, f.end, *f.tenant_args],
        lake=True,  # written by `gpuledger reclaim`, not the analytics: the snapshot would not see new rows
    )


def stricter(ctx, f):
    """What the capacity what-if's idle rule (analytics.whatif.idle_rule_freed) would have freed over the range's
    last STRICTER_DAYS days, per rule and tenant; None when the app has no analytics wired."""
    if ctx.idle_rule is None:
        return None
    end = f.end_ts
    start = max(f.start_ts, end - dt.timedelta(days=STRICTER_DAYS))
    stats = ctx.data.frame(
        "SELECT job_id, tenant, gpu_model, gpus, submitted_at, scheduled_at, held_s, efficiency FROM job_stats "
        f"WHERE submitted_at >= ? AND submitted_at < ? AND {BOTH_SQL}",
        [start, end, *f.both_args],
    )
    return ctx.idle_rule(stats, start, end)


def reclaim_section(ctx, f):
    saved = reclaimed(ctx.data, f)
    parts = [
        note(
            "GPUs `gpuledger reclaim` gave back (docs/reclaim.md): per tenant and month, the jobs deactivated, "
            "suspended or deleted after a warning, the GPU-hours a day they held and their cost a day at the rate card."
        ),
        table("ws-reclaimed", saved) if saved is not None else note("Nothing reclaimed yet (no reclaim_actions)."),
    ]
    rules = stricter(ctx, f)
    if rules is not None:
        parts += [
            note(
                "What a stricter rule would have freed: jobs under 5 % busy cut off after each time, as the capacity "
                "what-if replays it, over the range's last 31 days (GPU-hours held beyond the rule)."
            ),
            table("ws-stricter", rules),
        ]
    return section("Reclaimed", *parts)


def layout(ctx, f):
    data = ctx.data
    if not data.has("job_hourly"):
        return [no_data(data)]
    t = by_tenant(data, f)
    classes = by_class(data, f)
    p = [f.start, f.end, *f.both_args]
    trend = data.frame(
        "SELECT CAST(date AS TIMESTAMP) AS day, cluster, tenant, sum(idle_gpu_hours) AS idle_gpu_hours FROM job_daily "
        f"WHERE date BETWEEN ? AND ? AND tenant IS NOT NULL AND {BOTH_SQL} GROUP BY ALL ORDER BY 2, 3, 1",
        p,
    )
    trend = by_cluster(trend, "tenant")
    jobs = data.frame(
        "SELECT cluster, job_id, tenant, gpu_model, gpus, status, allocated_gpu_hours, idle_gpu_hours, efficiency, "
        "cost_usd * idle_gpu_hours / nullif(allocated_gpu_hours, 0) AS idle_cost_usd FROM job_stats "
        f"WHERE date BETWEEN ? AND ? AND idle_gpu_hours > 0 AND {BOTH_SQL} ORDER BY idle_gpu_hours DESC LIMIT 20",
        p,
    )
    return [
        kpi("ws-idle-h", "idle allocated GPU-hours in the range", t["idle_gpu_hours"].sum(), "GPU-h", 1),
        kpi("ws-idle-usd", "their cost (at each tenant's own price per GPU-hour)", t["idle_cost_usd"].sum(), "USD", 2),
        note(
            "Idle: an allocated GPU-hour below the waste threshold inside a long enough idle run "
            "(analytics.waste_threshold_pct, waste_window_h)."
        ),
        section(
            "By tenant",
            graph(
                "ws-tenant",
                figures.bars(
                    by_cluster(t, "tenant"),
                    "tenant",
                    {"idle_gpu_hours": "idle GPU-hours"},
                    "Idle allocated GPU-hours",
                    "GPU-h",
                    "tenant",
                ),
            ),
            table("ws-tenant-table", t),
        ),
        section(
            "By workload class",
            note(
                "Idle hours by the kind of work that held them: a parked notebook and an inference service idle at "
                "night are judged by their class's rule ([class_policy.<class>], docs/workload-classes.md)."
            ),
            graph(
                "ws-class",
                figures.bars(
                    classes,
                    "workload_class",
                    {"idle_gpu_hours": "idle GPU-hours"},
                    "Idle allocated GPU-hours by workload class",
                    "GPU-h",
                    "workload class",
                ),
            ),
            table(
                "ws-class-table",
                classes.select(
                    "workload_class", "idle_gpu_hours", "idle_pct_of_allocated", "idle_cost_usd", "allocated_gpu_hours"
                ),
            ),
        ),
        section(
            "Top offending jobs (submitted in the range)", table("ws-jobs", jobs, links={"job_id": links.to_job(f)})
        ),
        section(
            "Idle now (at the last analysis)",
            note(
                "Pods holding GPUs idle through the last complete hour, and for how long: the enforcer's idle-hog "
                "gate counts those idle for [enforcer] idle_min_h hours or more."
            ),
            table("ws-idle-now", idle_now(data, f)),
        ),
        reclaim_section(ctx, f),
        section(
            "Trend",
            graph(
                "ws-trend",
                figures.lines(
                    trend,
                    "day",
                    {"idle_gpu_hours": "idle"},
                    "Idle allocated GPU-hours per day",
                    "GPU-h",
                    by="tenant",
                    x_title="day (UTC)",
                ),
            ),
        ),
    ]
