"""Fragmentation: free GPUs the typical jobs cannot use (FGD), the whole-GPU view, and the worst nodes now."""

from __future__ import annotations

from gpuledger.dashboards import figures
from gpuledger.dashboards.filters import CLUSTER_SQL, MODEL_SQL, by_cluster
from gpuledger.dashboards.ui import NO_DATA, graph, kpi, note, section, table

PATH = "/fragmentation"
NAME = "Fragmentation"


def layout(ctx, f):
    data = ctx.data
    if not data.has("fragmentation"):
        return [note(NO_DATA, "no-data")]
    params = [f.start, f.end, *f.model_args]
    grain = "hour" if f.days <= 14 else "day"
    series = data.frame(
        f"SELECT date_trunc('{grain}', ts) AS t, cluster, gpu_model, avg(free_gpus) AS free_gpus, "
        "avg(fragmented_gpus) AS fragmented_gpus, 100 * avg(frag_rate) AS frag_rate_pct "
        f"FROM fragmentation WHERE date BETWEEN ? AND ? AND {MODEL_SQL} GROUP BY ALL ORDER BY 2, 3, 1",
        params,
    )
    series = by_cluster(series, "gpu_model")  # free GPUs of one cluster are no use to another's jobs
    (rate, frag) = data.frame(
        "SELECT 100 * sum(fragmented_gpus) / nullif(sum(free_gpus), 0), avg(fragmented_gpus) FROM fragmentation "
        f"WHERE date BETWEEN ? AND ? AND {MODEL_SQL}",
        params,
    ).row(0)
    stranded = data.frame(
        "SELECT cluster, gpu_model, gpus, free_gpus, fragmented_gpus, stranded_1gpu, stranded_2gpu, stranded_4gpu, "
        "stranded_8gpu FROM fragmentation r WHERE ts = "
        "(SELECT max(ts) FROM fragmentation l WHERE l.cluster = r.cluster AND l.date BETWEEN ? AND ?) "
        f"AND {MODEL_SQL} ORDER BY 1, 2",
        params,
    )
    # The latest hour of the range, node by node: free GPUs on nodes that are partly in use cannot host a job
    # that needs the whole node. One hour of gpu_hourly, from the lake (one date folder).
    (last,) = data.frame(
        f"SELECT max(hour) FROM fleet_hourly WHERE date BETWEEN ? AND ? AND {CLUSTER_SQL}",
        [f.start, f.end, *f.cluster_args],
    ).row(0)
    worst = data.frame(
        "WITH g AS (SELECT cluster, node, model AS gpu_model, count(*) AS gpus, "
        "count(*) FILTER (allocated_ratio < 0.5) AS free_gpus FROM gpu_hourly "
        "WHERE date = CAST(? AS DATE) AND hour = ? AND parent_gpu_uuid IS NULL GROUP BY ALL) "
        f"SELECT * FROM g WHERE free_gpus > 0 AND free_gpus < gpus AND {MODEL_SQL} "
        "ORDER BY free_gpus DESC, node LIMIT 20",
        [last, last, *f.model_args],
        lake=True,
    )
    return [
        kpi("fr-rate", "fragmented share of free GPUs (range)", rate, "%", 1),
        kpi("fr-gpus", "fragmented GPUs, mean", frag, "GPUs", 1),
        section(
            "Free and fragmented GPUs",
            graph(
                "fr-series",
                figures.lines(
                    series,
                    "t",
                    {"free_gpus": "free", "fragmented_gpus": "fragmented"},
                    "Free GPUs and the part typical jobs cannot use",
                    "GPUs",
                    by="gpu_model",
                ),
            ),
            graph(
                "fr-rate-series",
                figures.lines(
                    series,
                    "t",
                    {"frag_rate_pct": "fragmentation rate"},
                    "Fragmentation rate (FGD)",
                    "% of free GPUs",
                    by="gpu_model",
                ),
            ),
            note("FGD: expected free GPU capacity that the typical job shapes cannot use (docs/fragmentation.md)."),
        ),
        section(
            "Whole-GPU view, latest hour: free GPUs stranded for jobs of 1, 2, 4, 8 GPUs",
            table("fr-stranded", stranded),
        ),
        section("Worst nodes now: partly used, with free GPUs a whole-node job cannot take", table("fr-worst", worst)),
    ]
