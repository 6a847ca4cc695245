"""Figures per accelerator vendor (nvidia, amd, huawei; docs/accelerators.md), shared by the overview and the
capacity page: a mixed fleet's capacity, allocation, activity, energy and cost, side by side.

The vendor is fleet_hourly's `vendor` column, which the analytics write by the one rule
(gpuledger/vendors.py: the samples' own vendor, else the model name's). Hours analysed before the column existed
read it as null, shown as "unknown" until the analytics run over them again, never dropped.
"""

from __future__ import annotations

import polars as pl

from gpuledger.dashboards.filters import MODEL_SQL

UNKNOWN = "unknown"


def by_vendor(data, f) -> pl.DataFrame:
    """Per vendor over the range and filters: mean GPUs in the fleet, allocated and busy, the busy share of the
    allocated, energy, and the fleet's cost of them (jobs and idle capacity, cost_daily, as the overview's fleet cost
    counts it). A model's vendor is the one fleet_hourly names it with: the rule is applied once, in the analytics."""
    p = [f.start, f.end, *f.model_args]
    cost = data.has("cost_daily")
    costs = (
        "models AS (SELECT DISTINCT cluster, gpu_model, vendor FROM fleet_hourly WHERE date BETWEEN ? AND ?), "
        f"costs AS (SELECT coalesce(m.vendor, '{UNKNOWN}') AS vendor, "
        "sum(c.cost_usd + coalesce(c.idle_share_usd, 0)) AS total_usd "
        f"FROM (SELECT * FROM cost_daily WHERE date BETWEEN ? AND ? AND {MODEL_SQL}) c "
        "LEFT JOIN models m USING (cluster, gpu_model) GROUP BY 1)"
        if cost
        else f"costs AS (SELECT '{UNKNOWN}' AS vendor, CAST(NULL AS DOUBLE) AS total_usd WHERE false)"
    )
    return data.frame(
        f"WITH hours AS (SELECT hour, coalesce(vendor, '{UNKNOWN}') AS vendor, sum(gpus) AS gpus, "
        "sum(allocated_gpus) AS allocated_gpus, sum(busy_gpus) AS busy_gpus, sum(energy_kwh) AS energy_kwh "
        f"FROM fleet_hourly WHERE date BETWEEN ? AND ? AND {MODEL_SQL} GROUP BY 1, 2), "
        f"{costs} "
        "SELECT vendor, avg(gpus) AS gpus_mean, avg(allocated_gpus) AS allocated_gpus_mean, "
        "avg(busy_gpus) AS busy_gpus_mean, 100 * sum(busy_gpus) / nullif(sum(allocated_gpus), 0) "
        "AS busy_pct_of_allocated, sum(energy_kwh) AS energy_kwh, any_value(total_usd) AS total_usd "
        "FROM hours LEFT JOIN costs USING (vendor) GROUP BY vendor ORDER BY gpus_mean DESC, vendor",
        p + ([f.start, f.end, *p] if cost else []),
    )
