"""Fragmentation: free GPUs the typical jobs cannot use (FGD), the whole-GPU view, the worst nodes now, and what a
fragmentation-aware scheduler would free (the placement replay, run on demand)."""

from __future__ import annotations

import polars as pl
from dash import Input, Output, State, dcc, html

from gpuledger.dashboards import figures, links
from gpuledger.dashboards.filters import CLUSTER_SQL, MODEL_SQL, PHYSICAL_SQL, by_cluster
from gpuledger.dashboards.ui import graph, kpi, no_data, note, section, table
from gpuledger.errors import GpuledgerError

PATH = "/fragmentation"
NAME = "Fragmentation"
HEAVY = True  # a timed redraw would wipe the replay's result (dashboards/app.py)


def worst_nodes(data, f) -> pl.DataFrame:
    """The latest hour of the range, node by node: free GPUs on nodes that are partly in use cannot host a job that
    needs the whole node. One hour of gpu_hourly, from the lake (one date folder). Per physical GPU (gpu_hourly.
    physical's rule): a GPU known by its partitions only (AMD CPX) is one GPU, held as much as its partitions' mean
    (they are equal)."""
    (last,) = data.frame(
        f"SELECT max(hour) FROM fleet_hourly WHERE date BETWEEN ? AND ? AND {CLUSTER_SQL}",
        [f.start, f.end, *f.cluster_args],
    ).row(0)
    return data.frame(
        "WITH h AS (SELECT * FROM gpu_hourly WHERE date = CAST(? AS DATE) AND hour = ?), "
        "p AS (SELECT cluster, node, any_value(model) AS model, avg(allocated_ratio) AS allocated_ratio FROM h d "
        f"WHERE {PHYSICAL_SQL.format(t='h', k='hour')} GROUP BY cluster, node, coalesce(parent_gpu_uuid, gpu_uuid)), "
        "g AS (SELECT cluster, node, model AS gpu_model, count(*) AS gpus, "
        "count(*) FILTER (allocated_ratio < 0.5) AS free_gpus FROM p GROUP BY ALL) "
        f"SELECT * FROM g WHERE free_gpus > 0 AND free_gpus < gpus AND {MODEL_SQL} "
        "ORDER BY free_gpus DESC, node LIMIT 20",
        [last, last, *f.model_args],
        lake=True,
    )


def layout(ctx, f):
    data = ctx.data
    if not data.has("fragmentation"):
        return [no_data(data)]
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
    worst = worst_nodes(data, f)
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
        section(
            "Worst nodes now: partly used, with free GPUs a whole-node job cannot take",
            table("fr-worst", worst, links={"node": links.to_node(f)}),
        ),
        section(
            "What a better scheduler would save",
            note(
                "Replays the range's jobs (those running at its start, then each submitted in it, in arrival order) on "
                "its nodes under FGD and BestFit, with no departures, and compares the fragmented GPUs each leaves at "
                "the range's measured mean load with the measured ones. GPUs freed: measured fragmented GPUs less the "
                "policy's; USD freed: those GPUs over the measured hours at the rate card (docs/finops.md)."
            ),
            html.Button("Replay", id="fr-wi-run", n_clicks=0),
            dcc.Loading(html.Div(id="fr-wi-out")),
        ),
    ]


def savings(summary: pl.DataFrame, model: str | None) -> pl.DataFrame:
    """The comparison's small table: one row per policy, for the model picked, else for the fleet."""
    rows = summary.filter(pl.col("gpu_model") == model) if model else summary.filter(pl.col("gpu_model").is_null())
    return rows.select(
        "policy",
        pl.col("frag_pct").alias("fragmentation %"),
        pl.col("allocated_gpus").alias("GPUs allocated"),
        pl.col("pods_unplaced").alias("pods unplaced"),
        pl.col("freed_gpus").alias("GPUs freed"),
        pl.col("freed_usd").alias("USD freed"),
    )


def register(app, ctx) -> None:
    @app.callback(
        Output("fr-wi-out", "children"),
        Input("fr-wi-run", "n_clicks"),
        State("url", "search"),
        prevent_initial_call=True,
    )
    def run_replay(_n, search):
        if ctx.placement is None:
            return note("The replay is not available in this app (it was started without the analytics).")
        f, _ = ctx.filters(search)
        clusters = ctx.data.clusters()
        if f.cluster is None and len(clusters) > 1:  # one cluster's jobs cannot run on another's GPUs
            return note(
                f"Pick a cluster in the filter bar: the replay takes one ({', '.join(clusters)}).", "fr-wi-error"
            )
        cluster = f.cluster or (clusters[0] if clusters else "default")
        try:
            out = ctx.placement(cluster, f.start_ts, f.end_ts, model=f.model)
        except GpuledgerError as e:  # no inventory, no jobs or no measured figures in the range: named
            return note(f"Not run: {e}.", "fr-wi-error")
        curves = out.curves.with_columns(
            pl.concat_str(pl.col("policy"), pl.col("gpu_model").fill_null("all models"), separator=", ").alias("series")
        )
        priced = f" No rate for {', '.join(out.unpriced)}: no USD for it." if out.unpriced else ""
        return html.Div(
            [
                note(f"Cluster {cluster}, {f.start} to {f.end} (UTC days).{priced}"),
                table("fr-wi-table", savings(out.summary, f.model)),
                graph(
                    "fr-wi-curve",
                    figures.lines(
                        curves,
                        "arrived_pct",
                        {"frag_pct": "fragmented"},
                        "Fragmented GPUs as arrived demand grows (no departures)",
                        "% of the GPUs",
                        by="series",
                        x_title="arrived GPU demand (% of the GPUs)",
                    ),
                ),
                section("Per GPU model", table("fr-wi-models", out.summary.filter(pl.col("gpu_model").is_not_null()))),
            ]
        )
