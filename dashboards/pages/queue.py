"""Queue: why jobs wait. Wait distributions by size, model and tenant; what waits now; expansion factor."""

from __future__ import annotations

from dashboards import figures
from dashboards.ui import NO_DATA, graph, kpi, note, section, table

PATH = "/queue"
NAME = "Queue"
FILTERS = "(CAST(? AS VARCHAR) IS NULL OR tenant = ?) AND (CAST(? AS VARCHAR) IS NULL OR gpu_model = ?)"


def quantiles(data, f, by: str):
    """Wait quantiles (minutes) of the jobs submitted in the range that were scheduled, by one dimension."""
    return data.frame(
        f"SELECT coalesce(CAST({by} AS VARCHAR), '(none)') AS {by}, count(*) AS jobs, "
        "quantile_cont(queue_s / 60, 0.1) AS p10, quantile_cont(queue_s / 60, 0.25) AS p25, "
        "quantile_cont(queue_s / 60, 0.5) AS p50, quantile_cont(queue_s / 60, 0.75) AS p75, "
        "quantile_cont(queue_s / 60, 0.9) AS p90, avg(queue_s / 60) AS mean "
        f"FROM job_stats WHERE date BETWEEN ? AND ? AND queue_s IS NOT NULL AND {FILTERS} GROUP BY 1 ORDER BY 1",
        [f.start, f.end, f.tenant, f.tenant, f.model, f.model],
    )


def layout(ctx, f):
    data = ctx.data
    if not data.has("job_stats"):
        return [note(NO_DATA, "no-data")]
    by_size = quantiles(data, f, "size_bucket")
    params = [f.start, f.end, f.tenant, f.tenant, f.model, f.model]
    (jobs, p90) = data.frame(
        "SELECT count(*), quantile_cont(queue_s, 0.9) FROM job_stats WHERE date BETWEEN ? AND ? "
        f"AND queue_s IS NOT NULL AND {FILTERS}",
        params,
    ).row(0)
    pending = data.frame(
        "SELECT gpu_model, tenant, count(*) AS jobs, sum(gpus) AS gpus, max(queue_s) / 60 AS longest_wait_min "
        f"FROM job_stats WHERE status = 'pending' AND {FILTERS} GROUP BY ALL ORDER BY 3 DESC",
        [f.tenant, f.tenant, f.model, f.model],
    )
    expansion = data.frame(
        "SELECT size_bucket, count(*) AS jobs, avg(expansion) AS expansion_mean, "
        "quantile_cont(expansion, 0.9) AS expansion_p90 FROM job_stats "
        f"WHERE date BETWEEN ? AND ? AND expansion IS NOT NULL AND {FILTERS} GROUP BY 1 ORDER BY 1",
        params,
    )
    return [
        kpi("q-jobs", "jobs scheduled (submitted in the range)", jobs, "jobs"),
        kpi("q-wait-p90", "p90 wait", None if p90 is None else p90 / 60, "minutes", 1),
        section(
            "Wait by job size (GPUs)",
            graph("q-size", figures.boxes(by_size, "size_bucket", "Wait by size", "wait (minutes)", "GPUs per job")),
            table("q-size-table", by_size),
        ),
        section(
            "Wait by GPU model and by tenant",
            graph(
                "q-model",
                figures.boxes(
                    quantiles(data, f, "gpu_model"), "gpu_model", "Wait by GPU model", "wait (minutes)", "GPU model"
                ),
            ),
            graph(
                "q-tenant",
                figures.boxes(quantiles(data, f, "tenant"), "tenant", "Wait by tenant", "wait (minutes)", "tenant"),
            ),
        ),
        section(f"Pending now ({int(pending['jobs'].sum() or 0)} jobs)", table("q-pending", pending)),
        section(
            "Expansion factor ((wait + run) / run)",
            note("1 means no wait; 2 means a job waited as long as it ran."),
            table("q-expansion", expansion),
        ),
    ]
