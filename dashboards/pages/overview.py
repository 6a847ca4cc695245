"""Overview: the fleet now and over the range: capacity, allocated and busy GPUs, health, waiting work, cost."""

from __future__ import annotations

import datetime as dt

import polars as pl
from dash import html

from gpuledger.dashboards import figures
from gpuledger.dashboards import format as fmt
from gpuledger.dashboards.classes import by_class
from gpuledger.dashboards.filters import BOTH_SQL, CLUSTER_SQL, MODEL_SQL
from gpuledger.dashboards.ui import graph, kpi, no_data, note, section, table
from gpuledger.dashboards.vendors import by_vendor

PATH = "/"
NAME = "Overview"


def fleet_series(data, f) -> pl.DataFrame:
    """GPUs in the fleet, allocated and busy, per hour (ranges over two weeks: per day), summed over models."""
    grain = "hour" if f.days <= 14 else "day"
    return data.frame(
        f"SELECT date_trunc('{grain}', hour) AS t, sum(gpus) / count(DISTINCT hour) AS gpus, "
        "sum(allocated_gpus) / count(DISTINCT hour) AS allocated_gpus, "
        "sum(busy_gpus) / count(DISTINCT hour) AS busy_gpus, "
        "sum(demand_gpus) / count(DISTINCT hour) AS demand_gpus "
        f"FROM fleet_hourly WHERE date BETWEEN ? AND ? AND {MODEL_SQL} GROUP BY 1 ORDER BY 1",
        [f.start, f.end, *f.model_args],
    )


def now_by_model(data, f) -> pl.DataFrame:
    """The latest hour of the range, per cluster and model (each cluster's own latest: one may be analysed later)."""
    return data.frame(
        "SELECT cluster, gpu_model, gpus, allocated_gpus, busy_gpus, pending_gpus, pending_jobs_max "
        "FROM fleet_hourly h WHERE hour = "
        "(SELECT max(hour) FROM fleet_hourly l WHERE l.cluster = h.cluster AND l.date BETWEEN ? AND ?) "
        f"AND {MODEL_SQL} ORDER BY 1, 2",
        [f.start, f.end, *f.model_args],
    )


def month_cost(data, f, month_start: dt.date) -> float:
    nxt = (month_start.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
    (v,) = data.frame(
        "SELECT coalesce(sum(cost_usd + coalesce(idle_share_usd, 0)), 0) FROM cost_daily "
        f"WHERE date >= ? AND date < ? AND {BOTH_SQL}",
        [month_start, nxt, *f.both_args],
    ).row(0)
    return float(v)


def layout(ctx, f):
    data = ctx.data
    if not data.has("fleet_hourly"):
        return [no_data(data)]
    now = now_by_model(data, f)
    series = fleet_series(data, f)
    this_month = f.end.replace(day=1)
    last_month = (this_month - dt.timedelta(days=1)).replace(day=1)
    cost_now, cost_before = month_cost(data, f, this_month), month_cost(data, f, last_month)
    data_to, first_day = data.freshness()[0], (data.bounds() or (None,))[0]
    health = (
        data.frame(
            "SELECT kind, count(*) AS events, count(DISTINCT gpu_uuid) AS gpus, count(DISTINCT node) AS nodes "
            f"FROM health_events WHERE date BETWEEN ? AND ? AND {CLUSTER_SQL} GROUP BY 1 ORDER BY 2 DESC",
            [f.start, f.end, *f.cluster_args],
        )
        if data.has("health_events")
        else pl.DataFrame(schema={"kind": pl.String, "events": pl.Int64, "gpus": pl.Int64, "nodes": pl.Int64})
    )
    lost = int(health.filter(pl.col("kind") == "lost")["gpus"].sum() or 0)
    pending = data.frame(
        "SELECT cluster, job_id, tenant, gpu_model, gpus, submitted_at, queue_s FROM job_stats "
        f"WHERE status = 'pending' AND {BOTH_SQL} ORDER BY submitted_at, cluster, job_id LIMIT 200",
        [*f.both_args],
    )
    classes = by_class(data, f)
    tot = (
        now.select(pl.col("gpus", "allocated_gpus", "busy_gpus", "pending_gpus").sum()).row(0)
        if now.height
        else (0,) * 4
    )
    return [
        html.Div(
            [
                kpi("ov-gpus", "GPUs in the fleet (latest hour)", tot[0], "GPUs"),
                kpi("ov-allocated", "allocated", tot[1], "GPUs", 1),
                kpi("ov-busy", "busy", tot[2], "GPUs", 1),
                kpi("ov-pending", "waiting jobs ask for", tot[3], "GPUs", 1),
                # The whole fleet's cost: every tenant's jobs and all idle capacity, shared out or not (the
                # tenants page's figures are per tenant: its own jobs, and with its share of the idle).
                kpi(
                    "ov-cost-month",
                    f"fleet cost {fmt.month(this_month, data_to, first_day)}: jobs + idle capacity",
                    cost_now,
                    "USD",
                    2,
                ),
                kpi("ov-cost-last", f"fleet cost {fmt.month(last_month, data_to, first_day)}", cost_before, "USD", 2),
                kpi("ov-lost", "GPUs lost in range", lost, "GPUs"),
            ],
            className="kpis",
        ),
        section(
            "Capacity, allocation and activity",
            graph(
                "ov-fleet",
                figures.lines(
                    series,
                    "t",
                    {
                        "gpus": "in the fleet",
                        "allocated_gpus": "allocated",
                        "busy_gpus": "busy",
                        "demand_gpus": "asked for",
                    },
                    "GPUs over the range",
                    "GPUs",
                    dash={"demand_gpus": "dot"},
                ),
            ),
        ),
        section("Now, by cluster and GPU model", table("ov-now", now)),
        section(
            "By vendor (in the range)",
            note("A mixed fleet side by side: NVIDIA, AMD Instinct, Huawei Ascend (docs/accelerators.md)."),
            table("ov-vendor", by_vendor(data, f)),
        ),
        section(
            "By workload class (in the range)",
            note(
                "How busy each kind of work keeps the GPUs it holds, and what it costs at each tenant's own price per "
                "GPU-hour; policies per class: docs/workload-classes.md."
            ),
            graph(
                "ov-class",
                figures.bars(
                    classes,
                    "workload_class",
                    {"allocated_gpu_hours": "allocated", "busy_gpu_hours": "busy"},
                    "GPU-hours held and busy, by workload class",
                    "GPU-h",
                    "workload class",
                ),
            ),
            table("ov-class-table", classes),
        ),
        html.Div(
            [
                section("Health events in the range (Xid, ECC, lost GPUs, ...)", table("ov-health", health)),
                section(f"Pending workloads ({pending.height})", table("ov-pending-jobs", pending)),
            ],
            className="row",
        ),
    ]
