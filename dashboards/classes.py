"""Figures per workload class (training, inference, notebook, evaluation, other; docs/workload-classes.md), shared
by the pages that break down by class: how busy each kind of work keeps what it holds, what it wastes, and what it
costs. A job recorded before classes existed reads as "unclassified", never dropped.

Cost is each class's allocated GPU-hours at its tenant's own price per GPU-hour for that model in the range (the
waste page's rule), so a class's cost and its idle cost are on one footing; idle capacity nobody holds has no class.
"""

from __future__ import annotations

import polars as pl

from gpuledger.dashboards.filters import BOTH_SQL

UNCLASSIFIED = "unclassified"


def by_class(data, f, per_tenant: bool = False) -> pl.DataFrame:
    """Per workload class (and tenant, with `per_tenant`) over the range and filters: allocated, busy and idle
    GPU-hours, the busy share, the cost and the cost of the idle hours."""
    keys = "cluster, tenant, workload_class" if per_tenant else "workload_class"
    p = [f.start, f.end, *f.both_args]
    return data.frame(
        f"WITH held AS (SELECT cluster, tenant, gpu_model, coalesce(workload_class, '{UNCLASSIFIED}') AS "
        "workload_class, sum(allocated_gpu_hours) AS a, sum(busy_gpu_hours) AS b, sum(idle_gpu_hours) AS i "
        f"FROM job_daily WHERE date BETWEEN ? AND ? AND tenant IS NOT NULL AND {BOTH_SQL} GROUP BY ALL), "
        "price AS (SELECT cluster, tenant, gpu_model, sum(cost_usd) / nullif(sum(gpu_hours), 0) AS usd "
        f"FROM cost_daily WHERE date BETWEEN ? AND ? AND {BOTH_SQL} GROUP BY ALL) "
        f"SELECT {keys}, sum(a) AS allocated_gpu_hours, sum(b) AS busy_gpu_hours, "
        "100 * sum(b) / nullif(sum(a), 0) AS efficiency_pct, sum(i) AS idle_gpu_hours, "
        "100 * sum(i) / nullif(sum(a), 0) AS idle_pct_of_allocated, sum(a * usd) AS cost_usd, "
        "sum(i * usd) AS idle_cost_usd FROM held LEFT JOIN price USING (cluster, tenant, gpu_model) "
        f"GROUP BY ALL ORDER BY allocated_gpu_hours DESC, {keys}",
        p + p,
    )
