"""`Tables` -> Prometheus metric families: pure, frames in and prometheus_client families out, no IO.

Every metric is declared once in METRICS (name, type, labels, HELP with its unit, and the label set that bounds
its series); the families, docs/exporter.md's table and `series_bound` all derive from it.

Labels are bounded: cluster, tenant, gpu_model, and small fixed sets (quantile, job_gpus, xid). Never a job, pod,
node or GPU UUID. A value the lake leaves null is exported as "unknown" (a job in no tenant's namespace, a node
missing from the inventory), and a tenant or model the config does not name is exported under its own name: the
lake's figures are never dropped for not being in the config. Rows whose labels fall together once nulls are named
are summed (additive figures) so no series is exported twice.

No stale figures: a table with no rows for the latest run gives no series (absent, never a zero that looks like data),
and a lake with no analytics gives none of these families at all.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, field

import polars as pl
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.metrics_core import Metric

from gpuledger.analytics.exporter.tables import BASELINE_DAYS, Tables
from gpuledger.vendors import vendor_of

UNKNOWN = "unknown"  # the label value of a null in the lake
ALL_MODELS = "*"  # gpu_model of a tenant's all-models quota row (the config's quota key for all models)
QUANTILES = (("0.5", "p50"), ("0.9", "p90"), ("0.99", "p99"))
STRANDED = ("1", "2", "4", "8")  # job sizes of fragmentation's stranded_<n>gpu columns

C, T, TM = ("cluster",), ("cluster", "tenant"), ("cluster", "tenant", "gpu_model")
M = ("cluster", "gpu_model")
TK, K = ("cluster", "tenant", "workload_class"), ("cluster", "workload_class")


@dataclass(frozen=True)
class Spec:
    kind: str  # gauge, counter or info
    labels: tuple[str, ...]
    help: str
    # The label set's bound in clusters C, tenants T, models M and Xid codes X: what series_bound multiplies.
    per: str


METRICS: dict[str, Spec] = {
    # -- per tenant and GPU model ------------------------------------------------------------------------------
    "gpuledger_tenant_allocated_gpus": Spec(
        "gauge", TM, "GPUs the tenant's jobs held, mean over the last complete hour (GPUs; shares summed)", "C*T*M"
    ),
    "gpuledger_tenant_busy_gpus": Spec(
        "gauge",
        TM,
        "Of those, GPUs busy: allocated x the GPU's duty cycle, mean over the last complete hour (GPUs)",
        "C*T*M",
    ),
    "gpuledger_tenant_idle_gpus": Spec(
        "gauge",
        TM,
        "Of those, GPUs allocated but idle by the waste rule (analytics.waste_*), the same hour (GPUs)",
        "C*T*M",
    ),
    "gpuledger_tenant_idle_held_gpus": Spec(
        "gauge",
        TM,
        "GPUs the tenant's open jobs hold that have been idle for at least [enforcer] idle_min_h (GPUs)",
        "C*T*M",
    ),
    "gpuledger_tenant_cost_usd": Spec(
        "gauge", TM, "Cost of the tenant's own GPU time this month (UTC) to the last analytics run (USD)", "C*T*M"
    ),
    "gpuledger_tenant_idle_share_usd": Spec(
        "gauge", TM, "Idle capacity cost shared to the tenant this month (analytics.idle_policy) (USD)", "C*T*M"
    ),
    "gpuledger_tenant_pending_jobs": Spec("gauge", TM, "The tenant's jobs waiting for GPUs (jobs)", "C*T*M"),
    "gpuledger_tenant_pending_gpus": Spec("gauge", TM, "GPUs the tenant's waiting jobs ask for (GPUs)", "C*T*M"),
    "gpuledger_tenant_quota_gpus": Spec(
        "gauge", TM, 'Quota of the tenant for the model; gpu_model="*" is its quota over all models (GPUs)', "C*T*(M+1)"
    ),
    "gpuledger_tenant_quota_headroom_gpus": Spec(
        "gauge", TM, "Quota minus what the quota caps now; 0 or less is at the limit (GPUs)", "C*T*(M+1)"
    ),
    # -- per tenant ---------------------------------------------------------------------------------------------
    "gpuledger_tenant_budget_usd": Spec("gauge", T, "The tenant's monthly budget (USD)", "C*T"),
    "gpuledger_tenant_budget_spent_usd": Spec(
        "gauge", T, "Spent this month against the budget: own cost plus idle share, across clusters (USD)", "C*T"
    ),
    "gpuledger_tenant_budget_used_ratio": Spec("gauge", T, "Spent / budget this month (ratio; 1 = all spent)", "C*T"),
    "gpuledger_tenant_budget_projected_ratio": Spec(
        "gauge",
        T,
        "Projected month-end spend / budget: spent plus the last 7 days' burn rate to the month's end (ratio)",
        "C*T",
    ),
    "gpuledger_tenant_fairshare_factor": Spec(
        "gauge", T, "Fair-share factor 2^(-U/S): 1 unused, 0.5 at its share, towards 0 above (0-1, unitless)", "C*T"
    ),
    "gpuledger_tenant_usage_share_ratio": Spec(
        "gauge", T, "The tenant's share of all decayed GPU usage, U (ratio)", "C*T"
    ),
    "gpuledger_tenant_weight_share_ratio": Spec(
        "gauge", T, "The tenant's share of all fair-share weights, S (ratio)", "C*T"
    ),
    "gpuledger_tenant_spend_last_day_usd": Spec(
        "gauge", T, "The tenant's spend (cost plus idle share) on the last complete UTC day (USD)", "C*T"
    ),
    "gpuledger_tenant_spend_baseline_usd": Spec(
        "gauge", T, "Its mean daily spend over the 7 UTC days before that day (USD per day)", "C*T"
    ),
    "gpuledger_tenant_efficiency_ratio": Spec(
        "gauge", T, "Busy / allocated GPU-hours of the tenant's jobs on the last complete UTC day (ratio)", "C*T"
    ),
    # -- per workload class (5 classes, and "unknown" for jobs recorded before classes: 6) ------------------------
    "gpuledger_class_allocated_gpus": Spec(
        "gauge", TK, "GPUs the tenant's jobs of the class held, mean over the last complete hour (GPUs)", "C*T*6"
    ),
    "gpuledger_class_busy_gpus": Spec(
        "gauge", TK, "Of those, GPUs busy (allocated x duty cycle), mean over the last complete hour (GPUs)", "C*T*6"
    ),
    "gpuledger_class_idle_gpus": Spec(
        "gauge", TK, "Of those, GPUs idle by the waste rule, mean over the last complete hour (GPUs)", "C*T*6"
    ),
    "gpuledger_class_cost_usd": Spec(
        "gauge", TK, "Cost of the tenant's jobs of the class this calendar month, UTC (USD; no idle share)", "C*T*6"
    ),
    "gpuledger_class_queue_wait_seconds": Spec(
        "gauge",
        (*K, "quantile"),
        "Wait from submission to scheduling of the class's jobs scheduled in the last 24 h, by quantile (seconds)",
        "C*6*3",
    ),
    # -- per GPU model --------------------------------------------------------------------------------------------
    "gpuledger_fleet_gpus": Spec("gauge", M, "GPUs that reported in the last complete hour (GPUs)", "C*M"),
    "gpuledger_fleet_inventory_gpus": Spec(
        "gauge", M, "GPUs of the nodes seen in the last 7 days, by their latest GPU count (GPUs)", "C*M"
    ),
    "gpuledger_fleet_allocated_gpus": Spec(
        "gauge", M, "GPUs held by a pod, mean over the last complete hour (GPUs)", "C*M"
    ),
    "gpuledger_fleet_busy_gpus": Spec(
        "gauge", M, "GPUs with utilization above 0, mean over the last complete hour (GPUs)", "C*M"
    ),
    "gpuledger_fleet_lost_gpus": Spec(
        "gauge", M, "GPUs with a `lost` health event (fallen off the bus) in the last 24 h (GPUs)", "C*M"
    ),
    "gpuledger_fleet_pending_jobs": Spec("gauge", M, "Jobs waiting for GPUs of the model (jobs)", "C*M"),
    "gpuledger_fleet_pending_gpus": Spec("gauge", M, "GPUs the waiting jobs ask for (GPUs)", "C*M"),
    "gpuledger_queue_wait_seconds": Spec(
        "gauge",
        (*M, "quantile"),
        "Wait from submission to scheduling of the jobs scheduled in the last 24 h, by quantile (seconds)",
        "C*M*3",
    ),
    "gpuledger_queue_wait_jobs": Spec(
        "gauge", M, "Jobs scheduled in the last 24 h, which the wait quantiles are over (jobs)", "C*M"
    ),
    "gpuledger_fragmentation_ratio": Spec(
        "gauge", M, "FGD fragmentation rate: free capacity the model's typical jobs cannot use / free (ratio)", "C*M"
    ),
    "gpuledger_fragmentation_free_gpus": Spec("gauge", M, "Unallocated GPU capacity at the latest hour (GPUs)", "C*M"),
    "gpuledger_fragmentation_stranded_gpus": Spec(
        "gauge",
        (*M, "job_gpus"),
        "Whole free GPUs no job of job_gpus GPUs can use on one node, at the latest hour (GPUs)",
        "C*M*4",
    ),
    "gpuledger_gpu_model": Spec(
        "info",
        M,
        "Static attributes of the model: vendor (nvidia, amd, huawei), memory_bytes of one GPU, driver_version(s) seen",
        "C*M",
    ),
    # -- health: counters over every event the lake holds -----------------------------------------------------------
    "gpuledger_gpu_xid_events": Spec(
        "counter", (*M, "xid"), "Xid events in the lake, by Xid code (events; monotone)", "C*M*X"
    ),
    "gpuledger_gpu_ecc_events": Spec("counter", M, "ECC error events in the lake (events; monotone)", "C*M"),
    "gpuledger_gpu_lost_events": Spec(
        "counter", M, "GPU lost events (fallen off the bus) in the lake (events; monotone)", "C*M"
    ),
    # -- per cluster --------------------------------------------------------------------------------------------------
    "gpuledger_analytics_last_run_timestamp_seconds": Spec(
        "gauge", C, "When the cluster's analytics last ran (Unix time, seconds)", "C"
    ),
    "gpuledger_analytics_last_run_age_seconds": Spec(
        "gauge", C, "Seconds since the cluster's analytics last ran, at scrape time (seconds)", "C"
    ),
}
# The exporter's own, always served (server.Exporter): up, the snapshot's age and build time, failed rebuilds.
OWN_SERIES = 4


def series_bound(clusters: int, tenants: int, models: int, xids: int) -> int:
    """The most series the figures can have: each metric's label-set bound (Spec.per), summed, plus the
    exporter's own. Every (cluster, tenant, model) present is the worst case."""
    env = {"C": clusters, "T": tenants, "M": models, "X": xids}
    return sum(eval(s.per, {}, env) for s in METRICS.values()) + OWN_SERIES  # noqa: S307 (our own constants)


@dataclass(frozen=True)
class Snapshot:
    """The figures as of one read of the lake: built off the scrape path, served as they are."""

    families: tuple[Metric, ...] = ()
    runs: dict[str, float] = field(default_factory=dict)  # cluster -> its last run (Unix s), for the age gauge
    # Health counters as exported: (metric, label values) -> value. The next build starts from them.
    counters: dict[tuple[str, tuple[str, ...]], float] = field(default_factory=dict)

    def scrape(self, now_s: float) -> Iterator[Metric]:
        """The families, with each cluster's run age as of `now_s` (the scrape's time)."""
        yield from self.families
        if self.runs:
            name = "gpuledger_analytics_last_run_age_seconds"
            age = GaugeMetricFamily(name, METRICS[name].help, labels=list(C))
            for cluster, ran in sorted(self.runs.items()):
                age.add_metric([cluster], max(0.0, now_s - ran))
            yield age


# -- helpers --------------------------------------------------------------------------------------------------------
def _named(frame: pl.DataFrame, labels: tuple[str, ...]) -> pl.DataFrame:
    """Labels as strings, a null (or empty) one named UNKNOWN."""
    return frame.with_columns(
        pl.col(c).cast(pl.String).replace("", None).fill_null(UNKNOWN) for c in labels if c in frame.columns
    )


def _gauge(name: str, frame: pl.DataFrame, value: str | pl.Expr, additive: bool = True) -> GaugeMetricFamily | None:
    """A gauge of `frame`'s rows (labels: the spec's columns), null values left out; None when no row has one."""
    spec = METRICS[name]
    if frame.is_empty():
        return None
    v = pl.col(value) if isinstance(value, str) else value
    rows = _named(frame, spec.labels).select(*spec.labels, v.cast(pl.Float64).alias("_v")).drop_nulls("_v")
    rows = rows.filter(pl.col("_v").is_finite())
    rows = rows.group_by(spec.labels).agg(pl.col("_v").sum() if additive else pl.col("_v").first())
    if rows.is_empty():
        return None
    g = GaugeMetricFamily(name, spec.help, labels=list(spec.labels))
    for *labels, x in rows.sort(spec.labels).iter_rows():
        g.add_metric(labels, x)
    return g


def _ts(frame: pl.DataFrame, *cols: str) -> pl.DataFrame:
    """Time columns in UTC (DuckDB may say Etc/UTC)."""
    return frame.with_columns(pl.col(c).dt.convert_time_zone("UTC") for c in cols if c in frame.columns)


def _month_end(t: dt.datetime) -> dt.datetime:
    first = t.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return (first + dt.timedelta(days=32)).replace(day=1)


# -- the figures ----------------------------------------------------------------------------------------------------
def _tenant_model(t: Tables, idle_min_s: float) -> Iterator[GaugeMetricFamily | None]:
    th = t.tenant_hour
    yield _gauge("gpuledger_tenant_allocated_gpus", th, "allocated_gpus")
    yield _gauge("gpuledger_tenant_busy_gpus", th, "busy_gpus")
    yield _gauge("gpuledger_tenant_idle_gpus", th, "idle_gpus")
    holds = t.idle_holds
    if not holds.is_empty():
        holds = holds.filter(pl.col("idle_s") >= idle_min_s)
    yield _gauge("gpuledger_tenant_idle_held_gpus", holds, "share")
    cost = t.cost_days
    if not cost.is_empty():
        # This month of each cluster's latest run; a null tenant is capacity nobody was charged for, not a tenant.
        months = t.runs.select("cluster", pl.col("ran_at").dt.convert_time_zone("UTC").dt.truncate("1mo").dt.date())
        cost = cost.join(months.rename({"ran_at": "month"}), on="cluster")
        cost = cost.filter((pl.col("date") >= pl.col("month")) & pl.col("tenant").is_not_null())
    yield _gauge("gpuledger_tenant_cost_usd", cost, pl.col("cost_usd").fill_null(0))
    yield _gauge("gpuledger_tenant_idle_share_usd", cost, pl.col("idle_share_usd").fill_null(0))
    yield _gauge("gpuledger_tenant_pending_jobs", t.pending, "jobs")
    yield _gauge("gpuledger_tenant_pending_gpus", t.pending, "gpus")
    d = t.decisions
    if not d.is_empty():
        d = d.with_columns(pl.col("gpu_model").fill_null(ALL_MODELS))
    yield _gauge("gpuledger_tenant_quota_gpus", d, "quota_gpus", additive=False)
    yield _gauge("gpuledger_tenant_quota_headroom_gpus", d, "headroom_gpus", additive=False)


def _daily_spend(t: Tables) -> pl.DataFrame:
    """cluster, tenant, date, usd (cost plus idle share) for the days read."""
    if t.cost_days.is_empty():
        return pl.DataFrame(schema={"cluster": pl.String, "tenant": pl.String, "date": pl.Date, "usd": pl.Float64})
    return (
        t.cost_days.drop_nulls("tenant")
        .group_by("cluster", "tenant", "date")
        .agg((pl.col("cost_usd").fill_null(0) + pl.col("idle_share_usd").fill_null(0)).sum().alias("usd"))
    )


def _budget(t: Tables, spend: pl.DataFrame) -> pl.DataFrame:
    """Per (cluster, tenant) of the decisions' all-models rows: budget, spent, used and projected ratios.

    Projection: spent + burn x the time left in the month, where burn is the tenant's spend (every cluster's, as
    `spent` is) per day over the complete UTC days of the last 7 before the run that the lake has cost for; with
    none (a lake younger than a day), the month so far's spend per day."""
    d = t.decisions
    if d.is_empty():
        return pl.DataFrame()
    d = _ts(d.filter(pl.col("gpu_model").is_null()), "computed_at")
    days = set(t.cost_days["date"].to_list()) if not t.cost_days.is_empty() else set()
    rows = []
    for r in d.iter_rows(named=True):
        now = r["computed_at"]
        today = now.date()
        window = [today - dt.timedelta(days=i) for i in range(1, BASELINE_DAYS + 1)]
        have = [x for x in window if x in days]
        spent, budget = r["spent_usd"] or 0.0, r["budget_usd"]
        if have:
            mine = spend.filter((pl.col("tenant") == r["tenant"]) & pl.col("date").is_in(have))
            burn = float(mine["usd"].sum()) / len(have)
        else:
            month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
            elapsed_d = (now - month_start).total_seconds() / 86400
            burn = spent / elapsed_d if elapsed_d > 0 else 0.0
        left_d = (_month_end(now) - now).total_seconds() / 86400
        projected = spent + burn * left_d
        rows.append(
            {
                "cluster": r["cluster"],
                "tenant": r["tenant"],
                "budget_usd": budget,
                "spent_usd": spent,
                "used_ratio": None if not budget else r["budget_used_pct"] / 100.0,
                "projected_ratio": None if not budget else projected / budget,
                "fairshare": r["fairshare"],
                "usage_share": r["usage_share"],
                "weight_share": r["weight_share"],
            }
        )
    return pl.DataFrame(rows, infer_schema_length=None)


def _spend_change(t: Tables, spend: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(last complete day's spend, mean daily spend over the 7 days before it) per cluster and tenant. The baseline
    is over the days of the 7 the cluster has cost for (a young lake's is not diluted by days it never saw)."""
    if spend.is_empty() or t.runs.is_empty():
        return pl.DataFrame(), pl.DataFrame()
    runs = t.runs.select("cluster", pl.col("ran_at").dt.convert_time_zone("UTC").dt.date().alias("today"))
    s = spend.join(runs, on="cluster").with_columns(last=pl.col("today") - pl.duration(days=1))
    last = s.filter(pl.col("date") == pl.col("last")).group_by("cluster", "tenant").agg(pl.col("usd").sum())
    before = s.filter(
        (pl.col("date") < pl.col("last")) & (pl.col("date") >= pl.col("last") - pl.duration(days=BASELINE_DAYS))
    )
    covered = t.cost_days.join(runs, on="cluster").with_columns(last=pl.col("today") - pl.duration(days=1))
    covered = (
        covered.filter(
            (pl.col("date") < pl.col("last")) & (pl.col("date") >= pl.col("last") - pl.duration(days=BASELINE_DAYS))
        )
        .group_by("cluster")
        .agg(pl.col("date").n_unique().alias("days"))
    )
    base = (
        before.group_by("cluster", "tenant")
        .agg(pl.col("usd").sum())
        .join(covered, on="cluster")
        .with_columns(pl.col("usd") / pl.col("days"))
    )
    return last, base


def _efficiency(t: Tables) -> pl.DataFrame:
    if t.tenant_days.is_empty():
        return pl.DataFrame()
    runs = t.runs.select("cluster", pl.col("ran_at").dt.convert_time_zone("UTC").dt.date().alias("today"))
    day = t.tenant_days.join(runs, on="cluster").filter(pl.col("date") == pl.col("today") - pl.duration(days=1))
    day = _named(day, ("tenant",)).group_by("cluster", "tenant")
    day = day.agg(pl.col("allocated_gpu_hours", "busy_gpu_hours").sum())
    return day.filter(pl.col("allocated_gpu_hours") > 0).with_columns(
        ratio=pl.col("busy_gpu_hours") / pl.col("allocated_gpu_hours")
    )


def _tenant(t: Tables) -> Iterator[GaugeMetricFamily | None]:
    spend = _daily_spend(t)
    b = _budget(t, spend)
    yield _gauge("gpuledger_tenant_budget_usd", b, "budget_usd", additive=False)
    with_budget = b.filter(pl.col("budget_usd").is_not_null()) if not b.is_empty() else b
    yield _gauge("gpuledger_tenant_budget_spent_usd", with_budget, "spent_usd", additive=False)
    yield _gauge("gpuledger_tenant_budget_used_ratio", b, "used_ratio", additive=False)
    yield _gauge("gpuledger_tenant_budget_projected_ratio", b, "projected_ratio", additive=False)
    yield _gauge("gpuledger_tenant_fairshare_factor", b, "fairshare", additive=False)
    yield _gauge("gpuledger_tenant_usage_share_ratio", b, "usage_share", additive=False)
    yield _gauge("gpuledger_tenant_weight_share_ratio", b, "weight_share", additive=False)
    last, base = _spend_change(t, spend)
    yield _gauge("gpuledger_tenant_spend_last_day_usd", last, "usd")
    yield _gauge("gpuledger_tenant_spend_baseline_usd", base, "usd")
    yield _gauge("gpuledger_tenant_efficiency_ratio", _efficiency(t), "ratio", additive=False)


def _long(frame: pl.DataFrame, columns: dict[str, str], label: str, by: tuple[str, ...] = M) -> pl.DataFrame:
    """Wide value columns as rows of one `label` (e.g. p50/p90/p99 -> quantile 0.5/0.9/0.99)."""
    if frame.is_empty():
        return frame
    return pl.concat(
        frame.select(*by, pl.lit(k).alias(label), pl.col(c).cast(pl.Float64).alias("_v")) for k, c in columns.items()
    )


def _class(t: Tables) -> Iterator[GaugeMetricFamily | None]:
    yield _gauge("gpuledger_class_allocated_gpus", t.class_hour, "allocated_gpus")
    yield _gauge("gpuledger_class_busy_gpus", t.class_hour, "busy_gpus")
    yield _gauge("gpuledger_class_idle_gpus", t.class_hour, "idle_gpus")
    yield _gauge("gpuledger_class_cost_usd", t.class_cost, pl.col("cost_usd").fill_null(0))
    waits = _long(t.class_waits, {q: c for q, c in QUANTILES}, "quantile", K)
    # Two null classes would be one "unknown" series: not additive, and the quantiles of a merged group are not
    # known, so they only fall together where the lake has one such group per cluster (it does: one null class).
    yield _gauge("gpuledger_class_queue_wait_seconds", waits, "_v", additive=False)


def _known_zeros(frame: pl.DataFrame, fleet: pl.DataFrame, *values: str) -> pl.DataFrame:
    """`frame` summed per cluster and model, with 0 for each model of the fleet it has no row for: the analytics
    know that no job waits and no GPU was lost there, and a series that vanishes would read as "no data"."""
    if fleet.is_empty():
        return frame
    keys = fleet.select("cluster", "gpu_model").unique()
    sums = frame.group_by("cluster", "gpu_model").agg(pl.col(v).sum() for v in values) if frame.height else None
    if sums is None:
        return keys.with_columns(pl.lit(0.0).alias(v) for v in values)
    full = keys.join(sums, on=["cluster", "gpu_model"], how="full", coalesce=True, nulls_equal=True)
    return full.with_columns(pl.col(v).cast(pl.Float64).fill_null(0.0) for v in values)


def _model(t: Tables) -> Iterator[Metric | None]:
    yield _gauge("gpuledger_fleet_gpus", t.fleet, "gpus")
    yield _gauge("gpuledger_fleet_inventory_gpus", t.inventory, "gpus")
    yield _gauge("gpuledger_fleet_allocated_gpus", t.fleet, "allocated_gpus")
    yield _gauge("gpuledger_fleet_busy_gpus", t.fleet, "busy_gpus")
    yield _gauge("gpuledger_fleet_lost_gpus", _known_zeros(t.lost, t.fleet, "gpus"), "gpus")
    pending = _known_zeros(t.pending, t.fleet, "jobs", "gpus")
    yield _gauge("gpuledger_fleet_pending_jobs", pending, "jobs")
    yield _gauge("gpuledger_fleet_pending_gpus", pending, "gpus")
    yield _gauge(
        "gpuledger_queue_wait_seconds", _long(t.waits, {q: c for q, c in QUANTILES}, "quantile"), "_v", additive=False
    )
    yield _gauge("gpuledger_queue_wait_jobs", t.waits, "jobs")
    f = t.fragmentation
    yield _gauge("gpuledger_fragmentation_ratio", f, "frag_rate", additive=False)
    yield _gauge("gpuledger_fragmentation_free_gpus", f, "free_gpus")
    stranded = _long(f, {n: f"stranded_{n}gpu" for n in STRANDED}, "job_gpus")
    yield _gauge("gpuledger_fragmentation_stranded_gpus", stranded, "_v")
    yield _info(t)


def _info(t: Tables) -> InfoMetricFamily | None:
    """One series per cluster and model (so a group_left join is one-to-one): its vendor, its memory and the driver
    versions its GPUs reported in the last complete hour, comma-separated when several. The vendor is an info
    value, not a label of the model series: it is a function of the model, so it adds no series, and a figure is
    grouped by vendor with `group_left (vendor)`."""
    attrs: dict[tuple[str, str], dict[str, set[str]]] = {}
    vendor: dict[tuple[str, str], str] = {}
    if not t.fleet.is_empty() and "vendor" in t.fleet.columns:  # the samples' own vendor, where they had one
        for r in _named(t.fleet, M).drop_nulls("vendor").iter_rows(named=True):
            vendor[(r["cluster"], r["gpu_model"])] = r["vendor"]
    for frame, cols in ((t.inventory, ("mem_bytes",)), (t.drivers, ("mem_bytes", "driver_version"))):
        if frame.is_empty():
            continue
        for r in _named(frame, M).iter_rows(named=True):
            a = attrs.setdefault((r["cluster"], r["gpu_model"]), {"memory_bytes": set(), "driver_version": set()})
            if r["mem_bytes"] is not None:
                a["memory_bytes"].add(str(int(r["mem_bytes"])))
            if "driver_version" in cols and r["driver_version"]:
                a["driver_version"].add(r["driver_version"])
    if not attrs:
        return None
    name = "gpuledger_gpu_model"
    info = InfoMetricFamily(name, METRICS[name].help, labels=list(M))
    for (cluster, model), a in sorted(attrs.items()):
        values = {k: ",".join(sorted(v)) or UNKNOWN for k, v in a.items()}
        values["vendor"] = vendor_of(model, vendor.get((cluster, model))) or UNKNOWN
        info.add_metric([cluster, model], values)
    return info


def _health_counts(t: Tables) -> dict[tuple[str, tuple[str, ...]], float]:
    """(metric, label values) -> events over the whole health_events table."""
    if t.health.is_empty():
        return {}
    h = _named(t.health, M).with_columns(
        xid=pl.when(pl.col("code").is_null()).then(pl.lit(UNKNOWN)).otherwise(pl.col("code").cast(pl.String))
    )
    out: dict[tuple[str, tuple[str, ...]], float] = {}
    for r in h.iter_rows(named=True):
        if r["kind"] == "xid":
            key = ("gpuledger_gpu_xid_events", (r["cluster"], r["gpu_model"], r["xid"]))
        else:
            key = (f"gpuledger_gpu_{r['kind']}_events", (r["cluster"], r["gpu_model"]))
        out[key] = out.get(key, 0.0) + float(r["events"])
    return out


def monotone(previous: dict, fresh: dict) -> dict:
    """Counters that never go down: each series at the higher of what was exported and what the lake counts now,
    and a series the lake no longer holds kept at its last value. Compaction merges files without dropping rows;
    should a count still fall (a lake rebuilt, a day re-imported with fewer events), the counter holds until the
    exporter restarts, which Prometheus reads as a counter reset."""
    return {k: max(previous.get(k, 0.0), fresh.get(k, 0.0)) for k in previous.keys() | fresh.keys()}


def _counters(counts: dict) -> Iterator[CounterMetricFamily]:
    for name in ("gpuledger_gpu_xid_events", "gpuledger_gpu_ecc_events", "gpuledger_gpu_lost_events"):
        mine = sorted((labels, v) for (n, labels), v in counts.items() if n == name)
        if mine:
            spec = METRICS[name]
            c = CounterMetricFamily(name, spec.help, labels=list(spec.labels))
            for labels, v in mine:
                c.add_metric(list(labels), v)
            yield c


def build(t: Tables, idle_min_s: float, previous: Snapshot | None = None) -> Snapshot:
    """The figures of `t`. `previous`: the snapshot served until now, whose counters the new ones never fall below."""
    counts = monotone(previous.counters if previous else {}, _health_counts(t))
    if t.runs.is_empty():  # no analytics yet: only counters already exported (none on a fresh exporter)
        return Snapshot(tuple(_counters(counts)), {}, counts)
    runs = _ts(t.runs, "ran_at")
    ran = {c: r.timestamp() for c, r in runs.select("cluster", "ran_at").iter_rows()}
    last_run = "gpuledger_analytics_last_run_timestamp_seconds"
    families = [
        *_tenant_model(t, idle_min_s),
        *_tenant(t),
        *_class(t),
        *_model(t),
        *_counters(counts),
        _gauge(last_run, runs, pl.col("ran_at").dt.epoch("us") / 1e6, additive=False),
    ]
    return Snapshot(tuple(f for f in families if f is not None), ran, counts)
