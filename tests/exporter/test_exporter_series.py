"""Bounded cardinality: on a generated lake where every cluster, tenant, model and Xid code appears in every table,
the exporter serves exactly `series_bound(C, T, M, X)` series (the worst case docs/exporter.md states), and no
label outside the bounded set."""

from __future__ import annotations

import datetime as dt

from gpuledger.analytics.exporter import Exporter, series_bound
from gpuledger.analytics.exporter.figures import METRICS
from gpuledger.analytics.exporter.server import registry
from gpuledger.classes import WORKLOAD_CLASSES

from exporter_case import RUN, samples, value, write

HOUR = RUN.replace(minute=0) - dt.timedelta(hours=1)
TODAY = RUN.replace(hour=0, minute=0)
BOUNDED = {
    "cluster",
    "tenant",
    "gpu_model",
    "workload_class",
    "quantile",
    "job_gpus",
    "xid",
    "memory_bytes",
    "driver_version",
    "vendor",  # an info value of gpuledger_gpu_model_info, a function of gpu_model: no series of its own
}


def generated_lake(lake, clusters: int, tenants: int, models: int, xids: int) -> None:
    cs = [f"c{i}" for i in range(clusters)]
    ts = [f"t{i}" for i in range(tenants)]
    ms = [f"GPU-{i}" for i in range(models)]
    rows: dict[str, list[dict]] = {}

    def add(table, **r):
        rows.setdefault(table, []).append(r)

    for c in cs:
        for t in ts:
            add("tenants", computed_at=RUN, cluster=c, tenant=t, weight=1.0)
            dec = dict(
                computed_at=RUN,
                cluster=c,
                tenant=t,
                budget_usd=100.0,
                spent_usd=10.0,
                budget_used_pct=10.0,
                weight_share=0.5,
                usage_share=0.5,
                fairshare=0.5,
            )
            add("decisions", **dec, gpu_model=None, quota_gpus=8.0, headroom_gpus=4.0)
            for m in ms:
                add("decisions", **dec, gpu_model=m, quota_gpus=4.0, headroom_gpus=2.0)
                add(
                    "job_hourly",
                    hour=HOUR,
                    cluster=c,
                    tenant=t,
                    job_id=f"{t}{m}",
                    gpu_model=m,
                    allocated_gpu_hours=1.0,
                    busy_gpu_hours=0.5,
                    idle_gpu_hours=0.5,
                )
                add(
                    "idle_holds",
                    computed_at=RUN,
                    cluster=c,
                    tenant=t,
                    gpu_model=m,
                    job_id=f"{t}{m}",
                    gpu_uuid=f"{c}{t}{m}",
                    share=1.0,
                    idle_s=3 * 3600.0,
                    idle_since=RUN,
                )
                for d in range(9):  # the last complete day and the 7 before it, and today
                    add(
                        "cost_daily",
                        day_start=TODAY - dt.timedelta(days=d),
                        cluster=c,
                        tenant=t,
                        gpu_model=m,
                        cost_usd=1.0,
                        idle_share_usd=0.5,
                    )
                add(
                    "job_stats",
                    cluster=c,
                    job_id=f"p{t}{m}",
                    tenant=t,
                    gpu_model=m,
                    status="pending",
                    gpus=1.0,
                    submitted_at=HOUR,
                )
                add(
                    "job_stats",
                    cluster=c,
                    job_id=f"s{t}{m}",
                    tenant=t,
                    gpu_model=m,
                    status="running",
                    gpus=1.0,
                    submitted_at=HOUR,
                    scheduled_at=HOUR + dt.timedelta(minutes=5),
                    queue_s=300.0,
                )
            # Every workload class, and a job recorded before classes (None: "unknown"), for the class figures.
            for k in (*WORKLOAD_CLASSES, None):
                job = dict(cluster=c, job_id=f"k{t}{k}", tenant=t, gpu_model=ms[0], workload_class=k)
                add("job_hourly", **job, hour=HOUR, allocated_gpu_hours=1.0, busy_gpu_hours=0.5, idle_gpu_hours=0.5)
                add(
                    "job_stats",
                    **job,
                    status="running",
                    gpus=1.0,
                    submitted_at=HOUR,
                    scheduled_at=HOUR + dt.timedelta(minutes=5),
                    queue_s=300.0,
                )
                add(
                    "cost_allocation",
                    cluster=c,
                    job_id=job["job_id"],
                    gpu_model=ms[0],
                    period_start=TODAY,
                    period_end=TODAY + dt.timedelta(days=1),
                    gpu_hours=1.0,
                    cost_usd=2.0,
                )
        for i, m in enumerate(ms):
            add(
                "fleet_hourly",
                hour=HOUR,
                cluster=c,
                gpu_model=m,
                gpus=8,
                allocated_gpus=4.0,
                busy_gpus=2.0,
                pending_gpus=1.0,
                pending_gpus_max=1.0,
                pending_jobs_max=1,
                demand_gpus=5.0,
                energy_kwh=1.0,
            )
            add(
                "fragmentation",
                ts=HOUR,
                cluster=c,
                gpu_model=m,
                gpus=8,
                free_gpus=4.0,
                fragmented_gpus=1.0,
                frag_rate=0.25,
                stranded_1gpu=0,
                stranded_2gpu=1,
                stranded_4gpu=2,
                stranded_8gpu=4,
            )
            node = f"{c}-n{i}"
            add(
                "nodes",
                cluster=c,
                node=node,
                gpu_model=m,
                gpu_count=8,
                gpu_mem_bytes=2**30,
                source="sim",
                first_seen=HOUR,
                last_seen=RUN,
            )
            add(
                "gpu_samples",
                ts=HOUR,
                cluster=c,
                node=node,
                gpu_uuid=f"{node}-g",
                model=m,
                driver_version="1.0",
                mem_total_bytes=2**30,
                source="sim",
            )
            ev = dict(ts=RUN - dt.timedelta(hours=1), cluster=c, node=node, gpu_uuid=f"{node}-g", source="sim")
            for x in range(xids):
                add("health_events", **ev, kind="xid", code=40 + x)
            add("health_events", **ev, kind="ecc")
            add("health_events", **ev, kind="lost", code=79)
    for table, rs in rows.items():
        write(lake, table, rs)


def test_series_count_is_the_stated_bound(tmp_path):
    C, T, M, X = 2, 3, 2, 3
    generated_lake(tmp_path / "lake", C, T, M, X)
    exp = Exporter(tmp_path / "lake", idle_min_h=2.0, clock=lambda: RUN.timestamp() + 60)
    exp.refresh()
    found = samples(registry(exp))
    served = {n.removesuffix("_total").removesuffix("_info") for n, _ in found if "_exporter_" not in n}
    assert served == set(METRICS), "every metric present on the generated lake"
    assert len(found) == series_bound(C, T, M, X)
    assert {k for _, labels in found for k, _ in labels} <= BOUNDED  # never a job, pod, node or GPU UUID
    # The class figures' values, by hand: each class has one job per tenant holding 1 GPU for the hour (0.5 busy,
    # 0.5 idle), $2 this month, scheduled 300 s after submission; "unknown" adds the M jobs of the tenant x model
    # rows above, which name no class: 1 + M GPUs held, and waits of 300 s too.
    one = dict(cluster="c1", tenant="t2")
    assert value(found, "gpuledger_class_allocated_gpus", **one, workload_class="notebook") == 1.0
    assert value(found, "gpuledger_class_busy_gpus", **one, workload_class="inference") == 0.5
    assert value(found, "gpuledger_class_idle_gpus", **one, workload_class="unknown") == 0.5 * (1 + M)
    assert value(found, "gpuledger_class_allocated_gpus", **one, workload_class="unknown") == 1 + M
    assert value(found, "gpuledger_class_cost_usd", **one, workload_class="training") == 2.0
    assert (
        value(found, "gpuledger_class_queue_wait_seconds", cluster="c0", workload_class="evaluation", quantile="0.9")
        == 300
    )


def test_the_documented_worst_case():
    # 50 tenants x 6 models x 3 clusters, with 10 distinct Xid codes seen per model (docs/exporter.md)
    c, t, m, x = 3, 50, 6, 10
    per_tenant_model = 8 * c * t * m + 2 * c * t * (m + 1)
    per_tenant = 10 * c * t
    per_class = 4 * c * t * 6 + 3 * c * 6  # 4 tenant x class figures, 3 wait quantiles per class; 5 classes + unknown
    per_model = (10 + 3 + 4 + 1 + 2) * c * m + c * m * x
    total = per_tenant_model + per_tenant + per_class + per_model + 2 * c + 4
    assert series_bound(c, t, m, x) == total == 11_350 + 3_600 + 54


def test_docs_list_every_metric_and_the_stated_worst_case():
    from conftest import REPO

    doc = (REPO / "docs" / "exporter.md").read_text()
    for name, spec in METRICS.items():
        suffix = {"counter": "_total", "info": "_info"}.get(spec.kind, "")
        assert f"`{name}{suffix}`" in doc, name
    assert f"**{series_bound(3, 50, 6, 10):,} series**" in doc
