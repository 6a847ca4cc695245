"""Queue: why jobs wait. Wait distributions by size, model and tenant; what waits now; expansion factor."""

from __future__ import annotations

import polars as pl

from gpuledger.dashboards import figures
from gpuledger.dashboards.filters import BOTH_SQL
from gpuledger.dashboards.ui import graph, kpi, no_data, note, section, table

PATH = "/queue"
NAME = "Queue"


def quantiles(data, f) -> dict[str, pl.DataFrame]:
    """Wait quantiles (minutes) of the jobs submitted in the range that were scheduled: by size, model, tenant,
    workload class and overall, in one pass over the jobs (GROUPING SETS)."""
    q = data.frame(
        "SELECT CASE WHEN grouping(size_bucket) = 0 THEN 'size_bucket' WHEN grouping(gpu_model) = 0 THEN "
        "'gpu_model' WHEN grouping(tenant) = 0 THEN 'tenant' WHEN grouping(workload_class) = 0 THEN 'workload_class' "
        "ELSE 'all' END AS dim, "
        "CASE WHEN grouping(workload_class) = 0 THEN coalesce(workload_class, 'unclassified') ELSE "
        "coalesce(CAST(size_bucket AS VARCHAR), gpu_model, tenant, '(none)') END AS key, count(*) AS jobs, "
        "quantile_cont(queue_s / 60, [0.1, 0.25, 0.5, 0.75, 0.9]) AS q, avg(queue_s / 60) AS mean "
        f"FROM job_stats WHERE date BETWEEN ? AND ? AND queue_s IS NOT NULL AND {BOTH_SQL} "
        "GROUP BY GROUPING SETS ((size_bucket), (gpu_model), (tenant), (workload_class), ())",
        [f.start, f.end, *f.both_args],
    )
    q = q.with_columns(pl.col("q").list.get(i).alias(n) for i, n in enumerate(("p10", "p25", "p50", "p75", "p90")))
    out = {}
    for dim in ("size_bucket", "gpu_model", "tenant", "workload_class", "all"):
        d = q.filter(pl.col("dim") == dim).drop("dim", "q").rename({"key": dim}).sort(dim)
        out[dim] = d.select(dim, "jobs", "p10", "p25", "p50", "p75", "p90", "mean")
    return out


def layout(ctx, f):
    data = ctx.data
    if not data.has("job_stats"):
        return [no_data(data)]
    qs = quantiles(data, f)
    by_size = qs["size_bucket"]
    params = [f.start, f.end, *f.both_args]
    overall = qs["all"]
    jobs, p90 = (overall["jobs"][0], overall["p90"][0]) if overall.height else (0, None)
    pending = data.frame(
        "SELECT cluster, gpu_model, tenant, count(*) AS jobs, sum(gpus) AS gpus, "
        "max(queue_s) / 60 AS longest_wait_min "
        f"FROM job_stats WHERE status = 'pending' AND {BOTH_SQL} GROUP BY ALL ORDER BY 4 DESC, 1, 2, 3",
        f.both_args,
    )
    expansion = data.frame(
        "SELECT size_bucket, count(*) AS jobs, avg(expansion) AS expansion_mean, "
        "quantile_cont(expansion, 0.9) AS expansion_p90 FROM job_stats "
        f"WHERE date BETWEEN ? AND ? AND expansion IS NOT NULL AND {BOTH_SQL} GROUP BY 1 ORDER BY 1",
        params,
    )
    return [
        kpi("q-jobs", "jobs scheduled (submitted in the range)", jobs, "jobs"),
        kpi("q-wait-p90", "p90 wait", p90, "min", 1),
        section(
            "Wait by job size (GPUs)",
            graph("q-size", figures.boxes(by_size, "size_bucket", "Wait by size", "wait (min)", "GPUs per job")),
            table("q-size-table", by_size),
        ),
        section(
            "Wait by GPU model and by tenant",
            graph(
                "q-model",
                figures.boxes(qs["gpu_model"], "gpu_model", "Wait by GPU model", "wait (min)", "GPU model"),
            ),
            graph(
                "q-tenant",
                figures.boxes(qs["tenant"], "tenant", "Wait by tenant", "wait (min)", "tenant"),
            ),
        ),
        section(
            "Wait by workload class",
            note("A notebook's user waits at the keyboard; a training job's wait is throughput lost."),
            graph(
                "q-class",
                figures.boxes(
                    qs["workload_class"], "workload_class", "Wait by workload class", "wait (min)", "workload class"
                ),
            ),
            table("q-class-table", qs["workload_class"]),
        ),
        section(f"Pending now ({int(pending['jobs'].sum() or 0)} jobs)", table("q-pending", pending)),
        section(
            "Expansion factor ((wait + run) / run)",
            note("1 means no wait; 2 means a job waited as long as it ran."),
            table("q-expansion", expansion),
        ),
    ]
