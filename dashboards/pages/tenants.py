"""Tenants: quota against allocation and use, budget burn-down, cost with and without idle share, efficiency."""

from __future__ import annotations

import polars as pl
from dash import html

from gpuledger.dashboards import figures, links
from gpuledger.dashboards import format as fmt
from gpuledger.dashboards.classes import by_class
from gpuledger.dashboards.filters import BOTH_SQL, TENANT_SQL, by_cluster
from gpuledger.dashboards.ui import graph, kpi, no_data, note, section, table

PATH = "/tenants"
NAME = "Tenants"
# A tenant is a tenant of one cluster (each cluster's config names its own tenants, quotas and budgets): every table
# here is per cluster and tenant, and a figure of several clusters draws one bar or line per cluster and tenant.


def use(data, f) -> pl.DataFrame:
    """Per tenant and model over the range: mean GPUs allocated and busy, efficiency, idle GPU-hours."""
    hours = f.days * 24
    return data.frame(
        f"SELECT cluster, tenant, gpu_model, sum(allocated_gpu_hours) / {hours} AS allocated_gpus_mean, "
        f"sum(busy_gpu_hours) / {hours} AS busy_gpus_mean, "
        "100 * sum(busy_gpu_hours) / nullif(sum(allocated_gpu_hours), 0) AS efficiency_pct, "
        "sum(idle_gpu_hours) AS idle_gpu_hours FROM job_daily "
        f"WHERE date BETWEEN ? AND ? AND tenant IS NOT NULL AND {BOTH_SQL} GROUP BY ALL ORDER BY 1, 2, 3",
        [f.start, f.end, *f.both_args],
    )


def quotas(data, f) -> pl.DataFrame:
    if not data.has("decisions"):
        return pl.DataFrame()
    return data.frame(
        "SELECT cluster, tenant, coalesce(gpu_model, 'all models') AS gpu_model, quota_gpus, "
        "allocated_gpus AS allocated_gpus_now, "
        "allocated_gpus > quota_gpus AS over_quota, fairshare, idle_gpus_now FROM decisions d "
        "WHERE computed_at = (SELECT max(computed_at) FROM decisions l WHERE l.cluster = d.cluster) "
        f"AND {TENANT_SQL} AND (CAST(? AS VARCHAR) IS NULL OR gpu_model = ? OR gpu_model IS NULL) ORDER BY 1, 2, 3",
        [*f.tenant_args, f.model, f.model],
    )


def quota_view(q: pl.DataFrame) -> tuple[pl.DataFrame, str]:
    """The quotas as a reader weighs them: the share of each quota in use (a bar in the grid), the fullest first
    (over quota on top), rows without a quota last; and one sentence: which are over, or that all are within."""
    if q.is_empty():
        return q, ""
    view = (
        q.with_columns(
            (100 * pl.col("allocated_gpus_now") / pl.col("quota_gpus")).alias("quota_used_pct"),
            (pl.col("quota_gpus") - pl.col("allocated_gpus_now")).alias("headroom_gpus"),
        )
        .sort(
            ["quota_used_pct", "cluster", "tenant", "gpu_model"],
            descending=[True, False, False, False],
            nulls_last=True,
        )
        .select(
            "cluster", "tenant", "gpu_model", "quota_used_pct", "allocated_gpus_now", "quota_gpus", "headroom_gpus",
            "fairshare", "idle_gpus_now",
        )
    )  # fmt: skip
    quotas = view.filter(pl.col("quota_gpus").is_not_null())
    over = quotas.filter(pl.col("headroom_gpus") < 0)

    def who(r: dict) -> str:
        return f"{r['tenant']} on {r['gpu_model']} ({r['allocated_gpus_now']:,.1f} of {r['quota_gpus']:,.1f} GPUs)"

    if quotas.is_empty():
        said = "No tenant has a quota in the config: the table shows allocation and fair share only."
    elif over.height:
        said = f"{over.height} of {quotas.height} quotas exceeded now: " + "; ".join(map(who, over.head(5).to_dicts()))
        said += "." if over.height <= 5 else f"; and {over.height - 5} more (first rows below)."
    else:
        top = quotas.row(0, named=True)
        said = (
            f"All {quotas.height} quotas are within their limits now; the fullest: {who(top)}, "
            f"{top['quota_used_pct']:.0f} %."
        )
    return view, said


def cost(data, f) -> pl.DataFrame:
    return data.frame(
        "SELECT cluster, tenant, sum(cost_usd) AS cost_usd, sum(idle_share_usd) AS idle_share_usd, "
        "sum(cost_usd + idle_share_usd) AS total_usd FROM cost_daily "
        f"WHERE date BETWEEN ? AND ? AND tenant IS NOT NULL AND {BOTH_SQL} GROUP BY 1, 2 ORDER BY 5 DESC, 1, 2",
        [f.start, f.end, *f.both_args],
    )


def burn_down(data, f) -> pl.DataFrame:
    """The month of the range's end: each tenant's cumulative cost as a share of its monthly budget, day by day."""
    month = f.end.replace(day=1)
    return data.frame(
        "WITH d AS (SELECT cluster, tenant, date AS day, sum(cost_usd + idle_share_usd) AS usd FROM cost_daily "
        f"WHERE date >= ? AND date <= ? AND tenant IS NOT NULL AND {TENANT_SQL} GROUP BY ALL), "
        # Each cluster's budgets as its own latest analysis said them.
        "t AS (SELECT * FROM tenants x WHERE computed_at = "
        "(SELECT max(computed_at) FROM tenants l WHERE l.cluster = x.cluster)) "
        "SELECT d.cluster, d.tenant, d.day, "
        "sum(usd) OVER (PARTITION BY d.cluster, d.tenant ORDER BY d.day) AS spent_usd, "
        "t.budget_usd_per_month AS budget_usd, 100 * sum(usd) OVER (PARTITION BY d.cluster, d.tenant ORDER BY d.day) "
        "/ t.budget_usd_per_month AS budget_used_pct "
        "FROM d JOIN t USING (cluster, tenant) WHERE t.budget_usd_per_month > 0 ORDER BY 1, 2, 3",
        [month, f.end, *f.tenant_args],
    )


def layout(ctx, f):
    data = ctx.data
    if not data.has("cost_daily"):
        return [no_data(data)]
    c = cost(data, f)
    burn = by_cluster(burn_down(data, f), "tenant")
    q, quota_said = quota_view(quotas(data, f))
    period = fmt.period(f.start, f.end, data.freshness()[0])
    out = [
        html.Div(
            [
                kpi("ten-cost-total", f"tenants' own jobs, {period}", c["cost_usd"].sum(), "USD", 2),
                kpi("ten-cost-with-idle", "with their share of idle capacity", c["total_usd"].sum(), "USD", 2),
            ],
            className="kpis",
        ),
        note(
            "Own jobs: GPU-hours of each tenant's jobs at the rate card. With the idle share: plus the idle capacity "
            "the cost policy shares out to tenants. The overview's fleet cost is the whole fleet's: all jobs and all "
            "idle capacity, shared out or not."
        ),
        section(
            "Quota, allocation and use",
            *(
                [note(quota_said, "ten-quota-said"), table("ten-quota", q)]
                if q.height
                else [note("No quotas: the config names no [[tenants]] quota.")]
            ),
            table("ten-use", use(data, f)),
        ),
        section(
            f"Budget burn-down, {f.end:%Y-%m}",
            graph(
                "ten-burn",
                figures.lines(
                    burn,
                    "day",
                    {"budget_used_pct": "budget used"},
                    "Cumulative cost as % of the monthly budget",
                    "% of monthly budget",
                    by="tenant",
                    x_title="day (UTC)",
                )
                if burn.height
                else figures.empty("Budget burn-down", "no tenant has a monthly budget in the config"),
            ),
        ),
        section(
            "Cost with and without the shared idle capacity",
            graph(
                "ten-cost",
                figures.bars(
                    by_cluster(c, "tenant"),
                    "tenant",
                    {"cost_usd": "own jobs", "idle_share_usd": "idle share"},
                    "Cost in the range",
                    "USD",
                    "tenant",
                    stacked=True,
                ),
            ),
            table("ten-cost-table", c),
        ),
        section(
            "By workload class",
            note(
                "Each tenant's GPU time by the kind of work it did, at its own price per GPU-hour: how busy it kept "
                "what it held, and what the idle part cost."
            ),
            table("ten-class", by_class(data, f, per_tenant=True)),
        ),
    ]
    if f.tenant:
        jobs = data.frame(
            "SELECT cluster, job_id, workload_class, gpu_model, gpus, status, submitted_at, queue_s, run_s, gpu_hours, "
            "efficiency, "
            f"cost_usd FROM job_stats WHERE date BETWEEN ? AND ? AND {TENANT_SQL} "
            "ORDER BY cost_usd DESC NULLS LAST LIMIT 500",
            [f.start, f.end, *f.tenant_args],
            lake=True,
        )
        out.append(
            section(
                f"Jobs of {f.tenant} submitted in the range (top 500 by cost)",
                table("ten-jobs", jobs, links={"job_id": links.to_job(f)}),
            )
        )
        out.append(note("A job's id opens its page: the GPUs it held, each linked to its telemetry."))
    else:
        out.append(note("Pick a tenant in the filter bar for its jobs."))
    return out
