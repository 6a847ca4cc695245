"""The dashboard's rows, in order: each a function returning its panels (left to right, wrapping at 24 columns)."""

from __future__ import annotations

from gpuledger.analytics.exporter.grafana.model import EXPORTER_JOB, Panel, Q, help_of, sel, sum_by


def overview() -> list[Panel]:
    def stat(title, expr, unit="short", thresholds=()):
        return Panel("stat", title, [Q(expr, instant=True)], unit=unit, w=4, h=4, thresholds=thresholds)

    return [
        stat("GPUs reporting", f"sum({sel('gpuledger_fleet_gpus')})"),
        stat("GPUs allocated", f"sum({sel('gpuledger_fleet_allocated_gpus')})"),
        stat("GPUs busy", f"sum({sel('gpuledger_fleet_busy_gpus')})"),
        stat("Cost this month", f"sum({sel('gpuledger_tenant_cost_usd')})", unit="currencyUSD"),
        stat("Idle GPUs held", f"sum({sel('gpuledger_tenant_idle_held_gpus')})", thresholds=((1, "orange"),)),
        stat("Jobs waiting", f"sum({sel('gpuledger_fleet_pending_jobs')})"),
    ]


def tenants() -> list[Panel]:
    tm = "cluster, tenant, gpu_model"
    return [
        Panel(
            "timeseries",
            "Allocated GPUs by tenant",
            [Q(sum_by("tenant", "gpuledger_tenant_allocated_gpus"), "{{tenant}}")],
            w=12,
            stack=True,
        ),
        Panel(
            "timeseries",
            "Busy GPUs by tenant",
            [Q(sum_by("tenant", "gpuledger_tenant_busy_gpus"), "{{tenant}}")],
            w=12,
            stack=True,
        ),
        Panel(
            "table",
            "Tenants by GPU model, last complete hour",
            [
                Q(sum_by(tm, "gpuledger_tenant_allocated_gpus"), "allocated", instant=True),
                Q(sum_by(tm, "gpuledger_tenant_busy_gpus"), "busy", instant=True),
                Q(sum_by(tm, "gpuledger_tenant_idle_gpus"), "idle", instant=True),
                Q(sum_by(tm, "gpuledger_tenant_pending_gpus"), "waiting", instant=True),
            ],
            w=12,
            h=9,
        ),
        Panel(
            "table",
            "Quotas (GPUs; * = all models)",
            [
                Q(sel("gpuledger_tenant_quota_gpus", all_models=True), "quota", instant=True),
                Q(sel("gpuledger_tenant_quota_headroom_gpus", all_models=True), "headroom", instant=True),
            ],
            w=6,
            h=9,
        ),
        Panel(
            "bargauge",
            "Fair-share factor",
            [Q(sel("gpuledger_tenant_fairshare_factor"), "{{tenant}}", instant=True)],
            unit="percentunit",
            w=6,
            h=9,
            max=1,
            thresholds=((0.25, "yellow"), (0.5, "green")),
            description=help_of("gpuledger_tenant_fairshare_factor") + " Red: far above its share.",
        ),
        Panel(
            "timeseries",
            "Efficiency, last complete day (busy / allocated GPU-hours)",
            [Q(f"max by (tenant) ({sel('gpuledger_tenant_efficiency_ratio')})", "{{tenant}}")],
            unit="percentunit",
            w=12,
            max=1,
        ),
        Panel(
            "timeseries",
            "Share of usage against share of weight",
            [
                Q(f"max by (tenant) ({sel('gpuledger_tenant_usage_share_ratio')})", "{{tenant}} usage"),
                Q(f"max by (tenant) ({sel('gpuledger_tenant_weight_share_ratio')})", "{{tenant}} weight"),
            ],
            unit="percentunit",
            w=12,
        ),
    ]


def cost() -> list[Panel]:
    # Budget figures repeat the tenant's spend across clusters on each cluster's row: max by (tenant), never sum.
    return [
        Panel(
            "timeseries",
            "Cost this month by tenant (own GPU time)",
            [Q(sum_by("tenant", "gpuledger_tenant_cost_usd"), "{{tenant}}")],
            unit="currencyUSD",
            w=12,
            stack=True,
        ),
        Panel(
            "timeseries",
            "Idle capacity cost shared to each tenant this month",
            [Q(sum_by("tenant", "gpuledger_tenant_idle_share_usd"), "{{tenant}}")],
            unit="currencyUSD",
            w=12,
            stack=True,
        ),
        Panel(
            "bargauge",
            "Budget used this month",
            [Q(f"max by (tenant) ({sel('gpuledger_tenant_budget_used_ratio')})", "{{tenant}}", instant=True)],
            unit="percentunit",
            w=8,
            max=1.2,
            thresholds=((0.8, "orange"), (1, "red")),
        ),
        Panel(
            "bargauge",
            "Projected month-end spend / budget",
            [Q(f"max by (tenant) ({sel('gpuledger_tenant_budget_projected_ratio')})", "{{tenant}}", instant=True)],
            unit="percentunit",
            w=8,
            max=1.5,
            thresholds=((0.8, "orange"), (1, "red")),
        ),
        Panel(
            "table",
            "Budgets (USD, this month, across clusters)",
            [
                Q(f"max by (tenant) ({sel('gpuledger_tenant_budget_usd')})", "budget", instant=True),
                Q(f"max by (tenant) ({sel('gpuledger_tenant_budget_spent_usd')})", "spent", instant=True),
            ],
            unit="currencyUSD",
            w=8,
        ),
        Panel(
            "timeseries",
            "Daily spend: last complete day against the 7 before",
            [
                Q(sum_by("tenant", "gpuledger_tenant_spend_last_day_usd"), "{{tenant}} last day"),
                Q(sum_by("tenant", "gpuledger_tenant_spend_baseline_usd"), "{{tenant}} 7-day mean"),
            ],
            unit="currencyUSD",
            w=24,
        ),
    ]


def idle() -> list[Panel]:
    return [
        Panel(
            "timeseries",
            "GPUs held idle for at least idle_min_h, by tenant and model",
            [Q(sum_by("tenant, gpu_model", "gpuledger_tenant_idle_held_gpus"), "{{tenant}} {{gpu_model}}")],
            w=12,
            stack=True,
        ),
        Panel(
            "timeseries",
            "Allocated but idle GPUs (waste rule), by tenant",
            [Q(sum_by("tenant", "gpuledger_tenant_idle_gpus"), "{{tenant}}")],
            w=12,
            stack=True,
        ),
        Panel(
            "bargauge",
            "Idle share of allocated GPUs, last complete hour",
            [
                Q(
                    sum_by("tenant", "gpuledger_tenant_idle_gpus")
                    + " / "
                    + sum_by("tenant", "gpuledger_tenant_allocated_gpus"),
                    "{{tenant}}",
                    instant=True,
                )
            ],
            unit="percentunit",
            w=24,
            h=6,
            max=1,
            thresholds=((0.2, "orange"), (0.5, "red")),
        ),
    ]


def classes() -> list[Panel]:
    return [
        Panel(
            "timeseries",
            "GPUs held, by workload class",
            [Q(sum_by("workload_class", "gpuledger_class_allocated_gpus"), "{{workload_class}}")],
            w=8,
            stack=True,
        ),
        Panel(
            "bargauge",
            "Busy share of held GPUs by workload class, last complete hour",
            [
                Q(
                    sum_by("workload_class", "gpuledger_class_busy_gpus")
                    + " / "
                    + sum_by("workload_class", "gpuledger_class_allocated_gpus"),
                    "{{workload_class}}",
                    instant=True,
                )
            ],
            unit="percentunit",
            w=8,
            max=1,
            thresholds=((None, "red"), (0.3, "orange"), (0.6, "green")),
        ),
        Panel(
            "timeseries",
            "Idle GPUs (waste rule), by workload class",
            [Q(sum_by("workload_class", "gpuledger_class_idle_gpus"), "{{workload_class}}")],
            w=8,
            stack=True,
        ),
        Panel(
            "bargauge",
            "Cost this month by workload class",
            [Q(sum_by("workload_class", "gpuledger_class_cost_usd"), "{{workload_class}}", instant=True)],
            unit="currencyUSD",
            w=12,
        ),
        Panel(
            "timeseries",
            "Median wait by workload class, jobs scheduled in the last 24 h",
            [
                Q(
                    "max by (workload_class) (" + sel("gpuledger_class_queue_wait_seconds", quantile='="0.5"') + ")",
                    "{{workload_class}}",
                )
            ],
            unit="s",
            w=12,
        ),
    ]


def queue() -> list[Panel]:
    return [
        Panel(
            "timeseries",
            "Wait before scheduling, jobs scheduled in the last 24 h",
            [Q(f"max by (gpu_model, quantile) ({sel('gpuledger_queue_wait_seconds')})", "{{gpu_model}} q{{quantile}}")],
            unit="s",
            w=12,
        ),
        Panel(
            "timeseries",
            "Jobs waiting, by tenant",
            [Q(sum_by("tenant", "gpuledger_tenant_pending_jobs"), "{{tenant}}")],
            w=6,
            stack=True,
        ),
        Panel(
            "timeseries",
            "Jobs scheduled in the last 24 h, by model",
            [Q(sum_by("gpu_model", "gpuledger_queue_wait_jobs"), "{{gpu_model}}")],
            w=6,
        ),
    ]


def fragmentation() -> list[Panel]:
    return [
        Panel(
            "timeseries",
            "Fragmentation rate (FGD), by model",
            [Q(f"max by (cluster, gpu_model) ({sel('gpuledger_fragmentation_ratio')})", "{{cluster}} {{gpu_model}}")],
            unit="percentunit",
            w=8,
            max=1,
        ),
        Panel(
            "timeseries",
            "Free GPUs, by model",
            [Q(sum_by("gpu_model", "gpuledger_fragmentation_free_gpus"), "{{gpu_model}}")],
            w=8,
        ),
        Panel(
            "bargauge",
            "Stranded GPUs: free, but no job of this size fits on one node",
            [
                Q(
                    sum_by("gpu_model, job_gpus", "gpuledger_fragmentation_stranded_gpus"),
                    "{{gpu_model}} {{job_gpus}}-GPU jobs",
                    instant=True,
                )
            ],
            w=8,
        ),
    ]


def capacity() -> list[Panel]:
    m = "gpu_model"
    allocated, pending = sum_by(m, "gpuledger_fleet_allocated_gpus"), sum_by(m, "gpuledger_fleet_pending_gpus")
    return [
        Panel(
            "timeseries",
            "Capacity against demand, by model",
            [
                Q(sum_by(m, "gpuledger_fleet_inventory_gpus"), "{{gpu_model}} inventory"),
                Q(sum_by(m, "gpuledger_fleet_gpus"), "{{gpu_model}} reporting"),
                Q(allocated, "{{gpu_model}} allocated"),
                Q(sum_by(m, "gpuledger_fleet_busy_gpus"), "{{gpu_model}} busy"),
                # demand = held + waiting; a model with nobody waiting counts 0 waiting, not no demand
                Q(f"{allocated} + ({pending} or {allocated} * 0)", "{{gpu_model}} demand"),
            ],
            w=16,
            h=9,
            description="inventory: GPUs of the nodes seen in the last 7 days; reporting: GPUs that reported in the "
            "last complete hour; allocated and busy: the mean over that hour; demand: allocated plus the GPUs that "
            "waiting jobs ask for. " + help_of("gpuledger_fleet_pending_gpus"),
        ),
        Panel(
            "table",
            "GPU models",
            [
                Q(
                    f"max by (cluster, gpu_model, memory_bytes, driver_version) ({sel('gpuledger_gpu_model_info')})",
                    instant=True,
                ),
                Q(sum_by(f"cluster, {m}", "gpuledger_fleet_gpus"), "GPUs", instant=True),
            ],
            w=8,
            h=9,
        ),
    ]


def health() -> list[Panel]:
    return [
        Panel(
            "timeseries",
            "Xid errors per hour, by model and code",
            [
                Q(
                    f"sum by (gpu_model, xid) (increase({sel('gpuledger_gpu_xid_events_total')}[1h]))",
                    "{{gpu_model}} Xid {{xid}}",
                )
            ],
            w=8,
        ),
        Panel(
            "stat",
            "ECC events in the time range",
            [Q(f"sum(increase({sel('gpuledger_gpu_ecc_events_total')}[$__range]))", instant=True)],
            w=4,
            thresholds=((1, "orange"),),
        ),
        Panel(
            "stat",
            "GPUs lost in the last 24 h",
            [Q(f"sum({sel('gpuledger_fleet_lost_gpus')})", instant=True)],
            w=4,
            thresholds=((1, "red"),),
        ),
        Panel(
            "timeseries",
            "GPUs of the inventory not reporting, by model",
            [
                Q(
                    sum_by("gpu_model", "gpuledger_fleet_inventory_gpus")
                    + " - "
                    + sum_by("gpu_model", "gpuledger_fleet_gpus"),
                    "{{gpu_model}}",
                )
            ],
            w=8,
        ),
        Panel(
            "timeseries",
            "Lost-GPU events (fallen off the bus) per hour",
            [Q(f"sum by (gpu_model) (increase({sel('gpuledger_gpu_lost_events_total')}[1h]))", "{{gpu_model}}")],
            w=8,
        ),
        Panel(
            "stat",
            "Analytics age",
            [Q(f"max by (cluster) ({sel('gpuledger_analytics_last_run_age_seconds')})", "{{cluster}}", instant=True)],
            unit="s",
            w=4,
            thresholds=((3600, "orange"), (7200, "red")),
        ),
        Panel(
            "stat",
            "Exporter up",
            [Q(f'min(up{{job="{EXPORTER_JOB}"}})', instant=True)],
            w=4,
            description="1 while Prometheus scrapes the gpuledger exporter (scrape job gpuledger-exporter).",
            options={"colorMode": "background"},
            thresholds=((None, "red"), (1, "green")),
        ),
        Panel(
            "timeseries",
            "Exporter snapshot: age and failed rebuilds",
            [
                Q(f"max({sel('gpuledger_exporter_snapshot_age_seconds')})", "snapshot age (s)"),
                Q(
                    f"sum(increase({sel('gpuledger_exporter_snapshot_errors_total')}[$__rate_interval]))",
                    "failed rebuilds",
                ),
            ],
            w=8,
            description="Seconds since the exporter last read the analytics, and rebuilds that failed (the previous "
            "snapshot kept serving).",
        ),
        Panel(
            "table",
            "gpuledger alerts firing",
            [Q('ALERTS{alertname=~"Gpuledger.*", alertstate="firing"}', instant=True)],
            w=16,
            description="The rules of deploy/prometheus/gpuledger-rules.yaml that fire now (docs/alerts.md).",
        ),
    ]


ROWS = (
    ("Overview", overview),
    ("Tenants", tenants),
    ("Cost and budgets", cost),
    ("Idle holds", idle),
    ("Workload classes", classes),
    ("Queue", queue),
    ("Fragmentation", fragmentation),
    ("Capacity against demand", capacity),
    ("Health", health),
)
