"""One month of the lake, as the report shows it: every figure a query over the sql/ views, through one Lake.

Nothing here computes a figure the views do not give: the queries sum and divide view columns, and the report
renders their results as they come (gpuledger/report/html.py). A test runs its own SQL over the same views and
finds the same numbers in the HTML (tests/report/test_report.py).

The month is a calendar month in UTC, [start, end). Where a figure needs a baseline:
- previous month: the calendar month before, compared as spend per day with data (so a partial month, or a lake
  that starts mid-month, compares like with like);
- last 7 days: the month's last 7 days with data against the 7 days before them (Kubecost's spendChange, with a
  7-day window and a 7-day baseline), which reach into the previous month early in a month.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

import polars as pl

from gpuledger.errors import UsageError
from gpuledger.focus_export import parse_period
from gpuledger.query import Lake

UTC = dt.timezone.utc
TOP_IDLE = 10  # jobs in the top idle holders table
FORECAST_HISTORY_DAYS = 42  # history drawn before the forecast in its figure


def cluster_filter(col: str = "cluster") -> str:
    return f"(CAST($cluster AS VARCHAR) IS NULL OR {col} = CAST($cluster AS VARCHAR))"


CL = cluster_filter()
IN_MONTH = f"date >= $start AND date < $end AND {CL}"

COVERAGE = f"""
SELECT min(hour) AS data_from, max(hour) + INTERVAL 1 HOUR AS data_to FROM fleet_hourly WHERE {IN_MONTH}
"""
COST_DAYS = f"""
SELECT count(DISTINCT date) FILTER (WHERE date >= $start) AS days,
       count(DISTINCT date) FILTER (WHERE date < $start) AS prev_days,
       max(date) FILTER (WHERE date >= $start) AS last_day
FROM cost_daily WHERE date >= $prev AND date < $end AND {CL}
"""
LAKE_SPAN = """
SELECT cluster, min(date) AS first_day, max(date) AS last_day FROM cost_daily GROUP BY cluster ORDER BY cluster
"""

# The invoice total (FOCUS BilledCost, exact decimals) and its split: tenants (own jobs + idle share), jobs of no
# tenant, and idle capacity nobody was charged for. The parts come from chargeback_monthly and cost_daily.
TOTALS = f"""
SELECT
    (SELECT CAST(sum(BilledCost) AS DOUBLE) FROM focus_cost WHERE ChargePeriodStart >= $start_ts
        AND ChargePeriodStart < $end_ts AND {cluster_filter("BillingAccountId")}) AS total_usd,
    (SELECT CAST(sum(BilledCost) AS DOUBLE) FROM focus_cost WHERE ChargePeriodStart >= $prev_ts
        AND ChargePeriodStart < $start_ts AND {cluster_filter("BillingAccountId")}) AS prev_total_usd,
    (SELECT sum(total_usd) FROM chargeback_monthly WHERE month = $start AND tenant IS NOT NULL AND {CL})
        AS tenants_usd,
    (SELECT sum(total_usd) FROM chargeback_monthly WHERE month = $start AND tenant IS NULL AND {CL}) AS unclaimed_usd,
    (SELECT sum(idle_share_usd) FROM cost_daily WHERE {IN_MONTH} AND tenant IS NULL AND gpu_hours = 0)
        AS idle_unshared_usd,
    (SELECT sum(idle_share_usd) FROM cost_daily WHERE {IN_MONTH} AND (tenant IS NOT NULL OR gpu_hours > 0))
        AS idle_shared_usd,
    (SELECT sum(gpu_hours) FROM cost_daily WHERE {IN_MONTH} AND cost_usd IS NULL) AS unpriced_gpu_hours
"""

# Per tenant (null: jobs nobody claimed): chargeback_monthly's figures, its budget, spend per day against the
# previous month and the last 7 days against the 7 before, and the GPU-hours behind it.
TENANTS = f"""
WITH cb AS (
    SELECT tenant, month, sum(cost_usd) AS cost_usd, sum(idle_share_usd) AS idle_share_usd,
           sum(total_usd) AS total_usd, sum(budget_used_pct) AS budget_used_pct
    FROM chargeback_monthly WHERE month IN ($start, $prev) AND {CL} GROUP BY tenant, month
),
budgets AS (SELECT tenant, max(budget_usd_per_month) AS budget_usd FROM tenants WHERE {CL} GROUP BY tenant),
windows AS (
    SELECT tenant,
           sum(cost_usd) FILTER (WHERE date >= $w7) + sum(idle_share_usd) FILTER (WHERE date >= $w7) AS last7_usd,
           sum(cost_usd) FILTER (WHERE date < $w7) + sum(idle_share_usd) FILTER (WHERE date < $w7) AS prior7_usd
    FROM cost_daily
    WHERE date >= $w14 AND date <= $last_day AND {CL} AND (tenant IS NOT NULL OR gpu_hours > 0)
    GROUP BY tenant
),
charged AS (
    SELECT tenant, sum(gpu_hours) AS charged_gpu_hours FROM cost_daily
    WHERE {IN_MONTH} AND (tenant IS NOT NULL OR gpu_hours > 0) GROUP BY tenant
),
use AS (
    SELECT tenant, sum(allocated_gpu_hours) AS allocated_gpu_hours, sum(busy_gpu_hours) AS active_gpu_hours,
           sum(idle_gpu_hours) AS idle_gpu_hours
    FROM job_hourly WHERE {IN_MONTH} GROUP BY tenant
),
keys AS (SELECT tenant FROM cb UNION SELECT tenant FROM budgets UNION SELECT tenant FROM use)
SELECT
    k.tenant,
    coalesce(c.cost_usd, 0) AS cost_usd,
    coalesce(c.idle_share_usd, 0) AS idle_share_usd,
    coalesce(c.total_usd, 0) AS total_usd,
    b.budget_usd,
    CASE WHEN b.budget_usd IS NOT NULL THEN coalesce(c.budget_used_pct, 0) END AS budget_used_pct,
    p.total_usd AS prev_total_usd,
    coalesce(c.total_usd, 0) / nullif($days, 0) AS daily_usd,
    p.total_usd / nullif($prev_days, 0) AS prev_daily_usd,
    100 * (coalesce(c.total_usd, 0) / nullif($days, 0) - p.total_usd / nullif($prev_days, 0))
        / nullif(p.total_usd / nullif($prev_days, 0), 0) AS daily_change_pct,
    w.last7_usd,
    w.prior7_usd,
    100 * (w.last7_usd - w.prior7_usd) / nullif(w.prior7_usd, 0) AS last7_change_pct,
    coalesce(g.charged_gpu_hours, 0) AS charged_gpu_hours,
    coalesce(u.allocated_gpu_hours, 0) AS allocated_gpu_hours,
    coalesce(u.active_gpu_hours, 0) AS active_gpu_hours,
    coalesce(u.idle_gpu_hours, 0) AS idle_gpu_hours,
    100 * u.active_gpu_hours / nullif(u.allocated_gpu_hours, 0) AS active_pct
FROM keys k
LEFT JOIN cb c ON c.tenant IS NOT DISTINCT FROM k.tenant AND c.month = $start
LEFT JOIN cb p ON p.tenant IS NOT DISTINCT FROM k.tenant AND p.month = $prev
LEFT JOIN budgets b ON b.tenant IS NOT DISTINCT FROM k.tenant
LEFT JOIN windows w ON w.tenant IS NOT DISTINCT FROM k.tenant
LEFT JOIN charged g ON g.tenant IS NOT DISTINCT FROM k.tenant
LEFT JOIN use u ON u.tenant IS NOT DISTINCT FROM k.tenant
ORDER BY k.tenant IS NULL, coalesce(c.total_usd, 0) DESC, k.tenant
"""

# The idle capacity nobody was charged for (idle_policy none, or a day and model no job held at all).
IDLE_LINE = f"""
SELECT
    sum(idle_share_usd) FILTER (WHERE date >= $start) AS total_usd,
    sum(idle_share_usd) FILTER (WHERE date < $start) AS prev_total_usd,
    sum(idle_share_usd) FILTER (WHERE date >= $start) / nullif($days, 0) AS daily_usd,
    sum(idle_share_usd) FILTER (WHERE date < $start) / nullif($prev_days, 0) AS prev_daily_usd,
    sum(idle_share_usd) FILTER (WHERE date >= $w7 AND date <= $last_day) AS last7_usd,
    sum(idle_share_usd) FILTER (WHERE date >= $w14 AND date < $w7) AS prior7_usd
FROM cost_daily WHERE date >= $prev AND date < $end AND {CL} AND tenant IS NULL AND gpu_hours = 0
"""

DAILY = f"""
SELECT date AS day,
       CASE WHEN tenant IS NOT NULL THEN tenant WHEN gpu_hours > 0 THEN '(no tenant)' ELSE '(idle, not shared)' END
           AS line,
       sum(cost_usd) + sum(idle_share_usd) AS usd
FROM cost_daily WHERE {IN_MONTH} GROUP BY ALL ORDER BY day, line
"""

# Capacity states per hour, summed: active (busy, at most what was allocated), allocated but idle, up but not
# allocated, and down (the inventory's GPUs that did not report). They add up to the capacity.
CAPACITY = f"""
WITH hourly AS (
    SELECT cluster, gpu_model, gpus, least(allocated_gpus, gpus) AS alloc, busy_gpus, allocated_gpus
    FROM fleet_hourly WHERE {IN_MONTH}
),
f AS (
    SELECT cluster, gpu_model, sum(gpus) AS reported_gpu_hours, sum(allocated_gpus) AS allocated_gpu_hours,
           sum(busy_gpus) AS busy_gpu_hours, sum(least(busy_gpus, alloc)) AS active_gpu_hours,
           sum(alloc - least(busy_gpus, alloc)) AS allocated_idle_gpu_hours,
           sum(gpus - alloc) AS unallocated_gpu_hours, max(gpus) AS peak_gpus
    FROM hourly GROUP BY ALL
),
inv AS (
    SELECT cluster, gpu_model, sum(gpu_count) AS inventory_gpus,
           sum(gpu_count * epoch(CAST($data_to AS TIMESTAMPTZ)
               - greatest(date_trunc('hour', first_seen), CAST($data_from AS TIMESTAMPTZ))) / 3600)
               AS inventory_gpu_hours
    FROM nodes
    WHERE first_seen < CAST($data_to AS TIMESTAMPTZ) AND last_seen >= CAST($data_from AS TIMESTAMPTZ) AND {CL}
    GROUP BY ALL
)
SELECT f.cluster, f.gpu_model, f.peak_gpus, i.inventory_gpus,
       f.active_gpu_hours, f.allocated_idle_gpu_hours, f.unallocated_gpu_hours,
       greatest(coalesce(i.inventory_gpu_hours, 0) - f.reported_gpu_hours, 0) AS down_gpu_hours,
       f.reported_gpu_hours + greatest(coalesce(i.inventory_gpu_hours, 0) - f.reported_gpu_hours, 0)
           AS capacity_gpu_hours,
       f.reported_gpu_hours, f.allocated_gpu_hours, f.busy_gpu_hours,
       100 * f.active_gpu_hours / nullif(f.active_gpu_hours + f.allocated_idle_gpu_hours, 0) AS active_pct
FROM f LEFT JOIN inv i ON i.cluster = f.cluster AND i.gpu_model IS NOT DISTINCT FROM f.gpu_model
ORDER BY f.cluster, f.gpu_model
"""
LOST = f"""
SELECT count(DISTINCT coalesce(gpu_uuid, node)) AS lost FROM health_events WHERE {IN_MONTH} AND kind = 'lost'
"""

TOP_IDLE_JOBS = f"""
SELECT cluster, tenant, job_id, gpu_model, sum(idle_gpu_hours) AS idle_gpu_hours,
       sum(allocated_gpu_hours) AS allocated_gpu_hours,
       100 * sum(idle_gpu_hours) / nullif(sum(allocated_gpu_hours), 0) AS idle_pct
FROM job_hourly WHERE {IN_MONTH}
GROUP BY ALL HAVING sum(idle_gpu_hours) > 0
ORDER BY idle_gpu_hours DESC, cluster, job_id LIMIT {TOP_IDLE}
"""

# Waits of the jobs submitted in the month (the percentiles as queue_stats computes them), with the demand waiting.
QUEUE = f"""
WITH w AS (
    SELECT cluster, gpu_model, count(*) AS jobs, count(scheduled_at) AS scheduled,
           quantile_cont(queue_s, 0.5) FILTER (WHERE scheduled_at IS NOT NULL) AS wait_p50_s,
           quantile_cont(queue_s, 0.9) FILTER (WHERE scheduled_at IS NOT NULL) AS wait_p90_s,
           quantile_cont(queue_s, 0.99) FILTER (WHERE scheduled_at IS NOT NULL) AS wait_p99_s,
           max(queue_s) FILTER (WHERE scheduled_at IS NOT NULL) AS wait_max_s
    FROM job_stats WHERE {IN_MONTH} GROUP BY ALL
),
p AS (
    SELECT cluster, gpu_model, avg(pending_gpus) AS pending_gpus_mean, max(pending_gpus_max) AS pending_gpus_peak,
           max(pending_jobs_max) AS pending_jobs_peak
    FROM fleet_hourly WHERE {IN_MONTH} GROUP BY ALL
),
fr AS (
    SELECT cluster, gpu_model, avg(free_gpus) AS free_gpus_mean, avg(fragmented_gpus) AS fragmented_gpus_mean,
           100 * sum(fragmented_gpus) / nullif(sum(free_gpus), 0) AS frag_pct, avg(stranded_8gpu) AS stranded_8gpu_mean
    FROM fragmentation WHERE {IN_MONTH} GROUP BY ALL
),
k AS (SELECT cluster, gpu_model FROM w UNION SELECT cluster, gpu_model FROM p UNION SELECT cluster, gpu_model FROM fr)
SELECT k.cluster, k.gpu_model, coalesce(w.jobs, 0) AS jobs, coalesce(w.scheduled, 0) AS scheduled,
       w.wait_p50_s, w.wait_p90_s, w.wait_p99_s, w.wait_max_s,
       p.pending_gpus_mean, p.pending_gpus_peak, p.pending_jobs_peak,
       fr.free_gpus_mean, fr.fragmented_gpus_mean, fr.frag_pct, fr.stranded_8gpu_mean
FROM k
LEFT JOIN w ON w.cluster = k.cluster AND w.gpu_model IS NOT DISTINCT FROM k.gpu_model
LEFT JOIN p ON p.cluster = k.cluster AND p.gpu_model IS NOT DISTINCT FROM k.gpu_model
LEFT JOIN fr ON fr.cluster = k.cluster AND fr.gpu_model IS NOT DISTINCT FROM k.gpu_model
ORDER BY k.cluster, k.gpu_model
"""

# Each cluster's latest forecast run (the clusters are analysed apart, at their own times), in one scan of the table.
LATEST_FORECAST = f"""latest AS (
    SELECT * FROM demand_forecast WHERE {CL} QUALIFY computed_at = max(computed_at) OVER (PARTITION BY cluster)
)"""
FORECAST = f"""
WITH {LATEST_FORECAST}
SELECT cluster, gpu_model, any_value(kind) AS kind, any_value(method) AS method, any_value(computed_at) AS computed_at,
       any_value(history_days) AS history_days,
       any_value(backtest_mape_pct) AS backtest_mape_pct, any_value(baseline_mape_pct) AS baseline_mape_pct,
       any_value(backtest_mase) AS backtest_mase, any_value(baseline_mase) AS baseline_mase,
       min(day) AS first_day, max(day) AS last_day,
       any_value(exceeds_supply_day) AS exceeds_supply_day,
       any_value(exceeds_supply_earliest_day) AS exceeds_supply_earliest_day,
       any_value(exceeds_supply_latest_day) AS exceeds_supply_latest_day
FROM latest WHERE kind IN ('forecast', 'too_short')
GROUP BY cluster, gpu_model ORDER BY cluster, gpu_model
"""
FORECAST_SERIES = f"""
WITH {LATEST_FORECAST},
ends AS (SELECT cluster, max(day) AS last_history FROM latest WHERE kind = 'history' GROUP BY cluster)
SELECT cluster, gpu_model, day, kind, actual_gpus, supply_gpus, demand_gpus, lo80_gpus, hi80_gpus
FROM latest JOIN ends USING (cluster)
WHERE kind = 'forecast' OR (kind = 'history' AND day >= last_history - INTERVAL {FORECAST_HISTORY_DAYS} DAY)
ORDER BY cluster, gpu_model, day
"""

RATES = f"""
SELECT coalesce(rate_model, gpu_model) AS rate_model, usd_per_gpu_hour, min(period_start) AS from_ts,
       max(period_end) AS to_ts, any_value(method) AS method
FROM cost_allocation WHERE {IN_MONTH} AND usd_per_gpu_hour IS NOT NULL
GROUP BY ALL ORDER BY rate_model, from_ts
"""


@dataclass
class MonthReport:
    """Every figure of one month's report, as the queries gave it."""

    month: str
    start: dt.date
    end: dt.date  # exclusive
    prev: dt.date
    cluster: str | None
    lake: str
    generated_at: dt.datetime
    idle_policy: str
    platform_tenant: str
    data_from: dt.datetime | None
    data_to: dt.datetime | None
    days: int
    prev_days: int
    last_day: dt.date | None
    partial: bool
    totals: dict
    tenants: pl.DataFrame
    idle_line: dict
    daily: pl.DataFrame
    capacity: pl.DataFrame
    lost_gpus: int
    top_idle: pl.DataFrame
    queue: pl.DataFrame
    forecast: pl.DataFrame
    forecast_series: pl.DataFrame
    rates: pl.DataFrame
    clusters: list[str] = field(default_factory=list)

    @property
    def parts_usd(self) -> float:
        t = self.totals
        return (t["tenants_usd"] or 0.0) + (t["unclaimed_usd"] or 0.0) + (t["idle_unshared_usd"] or 0.0)

    @property
    def reconciles(self) -> bool:
        """tenants + jobs of no tenant + idle not shared = the invoice total, to the cent."""
        return abs(self.parts_usd - (self.totals["total_usd"] or 0.0)) < 0.005


def parse_month(text: str) -> tuple[dt.date, dt.date, dt.date]:
    """'2026-11' -> (2026-11-01, 2026-12-01, 2026-10-01): the month, its end (exclusive), the month before."""
    start, end = (t.date() for t in parse_period(text, "--month"))  # the FOCUS export's billing period, parsed once
    prev = dt.date(start.year - (start.month == 1), (start.month - 2) % 12 + 1, 1)
    return start, end, prev


def _ts(d: dt.date) -> dt.datetime:
    return dt.datetime.combine(d, dt.time(), UTC)


class _Runner:
    """Each query with the parameters it names, and no others."""

    def __init__(self, lake: Lake, values: dict):
        self.lake, self.values = lake, values

    def frame(self, sql: str) -> pl.DataFrame:
        names = set(re.findall(r"\$(\w+)", sql))
        return self.lake.execute(sql, {n: self.values[n] for n in names}, timeout_s=None).frame

    def row(self, sql: str) -> dict:
        return self.frame(sql).row(0, named=True)


def gather(
    lake: Lake, month: str, cluster: str | None, idle_policy: str, platform_tenant: str, now: dt.datetime | None = None
) -> MonthReport:
    """Run every query of the report for `month` (YYYY-MM, UTC) over `lake`, on one cluster or all of them."""
    start, end, prev = parse_month(month)
    now = now or dt.datetime.now(UTC)
    values = dict(
        start=start, end=end, prev=prev, cluster=cluster, start_ts=_ts(start), end_ts=_ts(end), prev_ts=_ts(prev)
    )
    q = _Runner(lake, values)
    span = q.frame(LAKE_SPAN)
    clusters = span["cluster"].to_list()
    if cluster is not None and cluster not in clusters:
        known = ", ".join(clusters) or "none yet"
        raise UsageError(f"--cluster {cluster!r}: no cost in the lake for that cluster (clusters: {known})")
    cov = q.row(COVERAGE)
    days = q.row(COST_DAYS)
    if not days["days"] and cov["data_from"] is None:
        if span.height:
            have = f"its cost covers {span['first_day'].min()} to {span['last_day'].max()}"
        else:
            have = "it has no cost yet"
        raise UsageError(
            f"--month {month}: no data for that month in the lake at {lake.root} ({have}; `gpuledger analyze` "
            "computes the cost of the telemetry there)"
        )
    last_day = days["last_day"] or (cov["data_to"] - dt.timedelta(hours=1)).date()
    data_from = cov["data_from"] or _ts(start)
    data_to = cov["data_to"] or _ts(last_day + dt.timedelta(days=1))
    values.update(
        days=days["days"],
        prev_days=days["prev_days"],
        last_day=last_day,
        w7=last_day - dt.timedelta(days=6),
        w14=last_day - dt.timedelta(days=13),
        data_from=data_from,
        data_to=data_to,
    )
    return MonthReport(
        month=month,
        start=start,
        end=end,
        prev=prev,
        cluster=cluster,
        lake=str(lake.root),
        generated_at=now,
        idle_policy=idle_policy,
        platform_tenant=platform_tenant,
        data_from=cov["data_from"],
        data_to=cov["data_to"],
        days=days["days"],
        prev_days=days["prev_days"],
        last_day=last_day,
        partial=data_to < _ts(end),
        totals=q.row(TOTALS),
        tenants=q.frame(TENANTS),
        idle_line=q.row(IDLE_LINE),
        daily=q.frame(DAILY),
        capacity=q.frame(CAPACITY),
        lost_gpus=q.row(LOST)["lost"],
        top_idle=q.frame(TOP_IDLE_JOBS),
        queue=q.frame(QUEUE),
        forecast=q.frame(FORECAST),
        forecast_series=q.frame(FORECAST_SERIES),
        rates=q.frame(RATES),
        clusters=clusters if cluster is None else [cluster],
    )
