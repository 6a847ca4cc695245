"""Capacity planning: demand against supply per GPU model, peaks, wait against load, a forecast, and a what-if."""

from __future__ import annotations

import datetime as dt
import math

import polars as pl
from dash import Input, Output, State, dcc, html

from gpuledger.dashboards import figures
from gpuledger.dashboards import filters as flt
from gpuledger.dashboards.filters import MODEL_SQL, by_cluster
from gpuledger.dashboards.ui import graph, no_data, note, section, table
from gpuledger.dashboards.vendors import by_vendor

PATH = "/capacity"
NAME = "Capacity"
HEAVY = True  # the what-if's controls: a timed redraw would reset them (dashboards/app.py)
WHATIF_DAYS = 7


# Capacity is a question per cluster (a job cannot run on another cluster's free GPUs): every figure and table is
# per cluster and model, and a figure of several clusters draws a series per cluster (filters.by_cluster).
def daily(data, f) -> pl.DataFrame:
    return data.frame(
        "SELECT date_trunc('day', hour) AS day, cluster, gpu_model, avg(gpus) AS supply_gpus, "
        "avg(demand_gpus) AS demand_gpus, avg(allocated_gpus) AS allocated_gpus, "
        "max(allocated_gpus) AS peak_allocated_gpus "
        f"FROM fleet_hourly WHERE date BETWEEN ? AND ? AND {MODEL_SQL} GROUP BY ALL ORDER BY 2, 3, 1",
        [f.start, f.end, *f.model_args],
    )


def peaks(data, f) -> pl.DataFrame:
    """Per cluster and model over the range: supply, mean and peak allocation, peak demand (hourly means)."""
    return data.frame(
        "SELECT cluster, gpu_model, max(gpus) AS gpus, avg(allocated_gpus) AS mean_allocated_gpus, "
        "max(allocated_gpus) AS peak_allocated_gpus, max(demand_gpus) AS peak_demand_gpus, "
        "100 * avg(allocated_gpus) / nullif(avg(gpus), 0) AS mean_allocation_pct, "
        "100 * max(demand_gpus) / nullif(max(gpus), 0) AS peak_demand_pct_of_supply "
        f"FROM fleet_hourly WHERE date BETWEEN ? AND ? AND {MODEL_SQL} GROUP BY 1, 2 ORDER BY 1, 2",
        [f.start, f.end, *f.model_args],
    )


def wait_vs_load(data, f) -> pl.DataFrame:
    """Per cluster, model and day: allocation (% of supply) and the p90 wait of the jobs submitted that day."""
    return data.frame(
        "WITH load AS (SELECT date, cluster, gpu_model, "
        "100 * sum(allocated_gpus) / nullif(sum(gpus), 0) AS allocation_pct "
        f"FROM fleet_hourly WHERE date BETWEEN ? AND ? AND {MODEL_SQL} GROUP BY ALL), "
        "waits AS (SELECT date, cluster, gpu_model, quantile_cont(queue_s, 0.9) / 60 AS wait_p90_min, "
        "count(*) AS jobs "
        f"FROM job_stats WHERE date BETWEEN ? AND ? AND queue_s IS NOT NULL AND {MODEL_SQL} GROUP BY ALL) "
        "SELECT * FROM load JOIN waits USING (date, cluster, gpu_model) ORDER BY cluster, gpu_model, date",
        [f.start, f.end, *f.model_args, f.start, f.end, *f.model_args],
    )


def forecast_rows(data, f) -> pl.DataFrame:
    """Each cluster's latest forecast (the clusters are analysed apart, at their own times)."""
    if not data.has("demand_forecast"):
        return pl.DataFrame()
    return data.frame(
        "SELECT * FROM demand_forecast d WHERE computed_at = "
        "(SELECT max(computed_at) FROM demand_forecast l WHERE l.cluster = d.cluster) "
        f"AND {MODEL_SQL} AND (kind <> 'history' OR day >= ?) ORDER BY cluster, gpu_model, day",
        [*f.model_args, f.start_ts - dt.timedelta(days=90)],  # history: the 90 days before the range on
    )


def forecast_summary(fc: pl.DataFrame) -> pl.DataFrame:
    """Per cluster and model: the chosen method against the seasonal naive baseline, and when demand passes supply."""
    ahead = fc.filter(pl.col("kind") == "forecast") if fc.height else fc
    if ahead.is_empty():
        return pl.DataFrame()
    return ahead.group_by("cluster", "gpu_model", maintain_order=True).agg(
        pl.col("method").first(),
        # Labelled by dashboards/format.py, as every table's columns are.
        pl.col("backtest_mase").first(),
        pl.col("baseline_mase").first(),
        pl.col("backtest_wape_pct").first(),
        pl.col("baseline_wape_pct").first(),
        pl.col("backtest_mape_pct").first(),
        pl.col("exceeds_supply_day").first().dt.date(),
        pl.col("exceeds_supply_earliest_day").first().dt.date(),
        pl.col("exceeds_supply_latest_day").first().dt.date(),
        pl.col("history_days").first(),
    )


def layout(ctx, f):
    data = ctx.data
    if not data.has("fleet_hourly"):
        return [no_data(data)]
    d = by_cluster(daily(data, f), "gpu_model")
    fc = by_cluster(forecast_rows(data, f), "gpu_model")
    backtest = forecast_summary(fc)
    short = fc.filter(pl.col("kind") == "too_short") if fc.height else fc
    models = data.models()
    return [
        section(
            "Demand against supply, per GPU model",
            graph(
                "cap-demand",
                figures.lines(
                    d,
                    "day",
                    {
                        "supply_gpus": "supply",
                        "demand_gpus": "demand (allocated + waiting)",
                        "peak_allocated_gpus": "peak allocated",
                    },
                    "Daily mean GPUs",
                    "GPUs",
                    by="gpu_model",
                    x_title="day (UTC)",
                    dash={"supply_gpus": "dot", "peak_allocated_gpus": "dash"},
                ),
            ),
            note("Demand is what was asked for: GPUs held plus GPUs that waiting jobs ask for (fleet_hourly)."),
        ),
        section("Peak against mean allocation", table("cap-peaks", peaks(data, f))),
        section("Supply and use per vendor", table("cap-vendor", by_vendor(data, f))),
        section(
            "Wait time against load",
            graph(
                "cap-wait-load",
                figures.scatter(
                    by_cluster(wait_vs_load(data, f), "gpu_model"),
                    "allocation_pct",
                    "wait_p90_min",
                    "gpu_model",
                    "Each point: one model and day",
                    "allocation (% of the model's GPUs)",
                    "p90 wait (min)",
                ),
            ),
        ),
        section(
            "Demand forecast",
            graph("cap-forecast", figures.forecast(fc, "Daily demand: history, backtest and the next 28 days")),
            note(
                "Per model, five methods (the same weekday last week, exponential smoothing with a plain or damped "
                "trend, Theta, MSTL) forecast the 14 days after each of three origins a week apart; the one with the "
                "lowest MASE (mean absolute error over the same-weekday-last-week error) is chosen and shown beside "
                "that baseline. WAPE: absolute errors over actual demand. Bands: 80 % and 95 % prediction intervals "
                "from the chosen method's backtest errors. Exceeds supply: the first forecast day whose demand is "
                "above the last day's GPUs, with the days the 80 % band's upper and lower bounds pass it."
            ),
            table("cap-backtest", backtest)
            if backtest.height
            else note(
                "Not enough history to forecast: "
                + (
                    (
                        ", ".join(f"{m} has {n} days" for m, n in short.select("gpu_model", "history_days").iter_rows())
                        if short.height  # no forecast rows at all (no complete day yet): the frame has no columns
                        else ""
                    )
                    or "no complete UTC day of demand yet, or the analytics have not run since this lake got data"
                )
                + " (28 are needed: two weekly seasons plus the 14-day backtest).",
                "cap-forecast-short",
            ),
        ),
        section(
            "What if",
            note(
                f"Replays the jobs of the last {WHATIF_DAYS} days of the range on a changed fleet with the simulator's "
                "scheduler (FIFO per model with backfill, best fit), beside the same replay on today's fleet and "
                "what was measured."
            ),
            html.Div(
                [
                    dcc.Dropdown(
                        id="cap-wi-model",
                        options=models,
                        value=f.model or (models[0] if models else None),
                        style={"width": "260px"},
                    ),
                    html.Label("GPUs to add (negative: remove)"),
                    dcc.Input(id="cap-wi-delta", type="number", value=8, step=1),
                    html.Label("reclaim jobs under 5% busy after (hours, empty: no)"),
                    dcc.Input(id="cap-wi-idle", type="number", min=0, step=0.5),
                    html.Button("Run", id="cap-wi-run", n_clicks=0),
                ],
                className="kpis",
            ),
            dcc.Loading(html.Div(id="cap-wi-out")),
        ),
    ]


def whatif_frames(data, cluster_args: list, start: dt.datetime, end: dt.datetime) -> tuple[pl.DataFrame, ...]:
    """The capacity what-if's inputs (analytics.whatif.for_dashboard): the nodes, the window's job_stats rows with
    each job's partition profile (jobs.mig_profile, from the lake: job_stats does not carry it), fleet_hourly, and
    the window's gpu_hourly partition rows (from the lake: the layouts each GPU had)."""
    stats = data.frame(
        "SELECT job_id, gpu_model, gpus, submitted_at, scheduled_at, held_s, queue_s, efficiency FROM job_stats "
        f"WHERE submitted_at >= ? AND submitted_at < ? AND {flt.CLUSTER_SQL}",
        [start, end, *cluster_args],
    )
    nodes = data.frame(f"SELECT node, gpu_model, gpu_count FROM nodes WHERE {flt.CLUSTER_SQL}", cluster_args)
    fleet = data.frame(
        f"SELECT * FROM fleet_hourly WHERE hour >= ? AND hour < ? AND {flt.CLUSTER_SQL}",
        [start, end, *cluster_args],
    )
    # A lake without gpu_hourly files (one of imported traces, say) has no layouts: every GPU whole
    hourly = (
        None
        if not data.has("gpu_hourly")
        else data.frame(
            "SELECT hour, node, gpu_uuid, parent_gpu_uuid, mig_profile FROM gpu_hourly WHERE date BETWEEN ? AND ? "
            f"AND hour >= ? AND hour < ? AND parent_gpu_uuid IS NOT NULL AND {flt.CLUSTER_SQL}",
            [start.date(), end.date(), start, end, *cluster_args],
            lake=True,
        )
    )
    # Profiles matter only where some GPU was partitioned (else a partition ask is replayed as its share anyway):
    # a fleet without partitions skips the jobs read. A job's rows are updated at or after its submission, so the
    # window's jobs are in the date folders from its start on (a year lake: the window's files, not the year's).
    none = {"job_id": pl.String, "mig_profile": pl.String}
    profiles = (
        pl.DataFrame(schema=none)
        if hourly is None or hourly.is_empty() or not data.has("jobs")
        else data.frame(
            "SELECT job_id, any_value(mig_profile) AS mig_profile FROM jobs WHERE mig_profile IS NOT NULL "
            f"AND date >= ? AND submitted_at >= ? AND submitted_at < ? AND {flt.CLUSTER_SQL} GROUP BY job_id",
            [start.date(), start, end, *cluster_args],
            lake=True,
        )
    )
    stats = stats.join(profiles.select("job_id", pl.col("mig_profile").cast(pl.String)), on="job_id", how="left")
    return nodes, stats, fleet, hourly


def register(app, ctx) -> None:
    @app.callback(
        Output("cap-wi-out", "children"),
        Input("cap-wi-run", "n_clicks"),
        State("cap-wi-model", "value"),
        State("cap-wi-delta", "value"),
        State("cap-wi-idle", "value"),
        State("url", "search"),
        prevent_initial_call=True,
    )
    def run_whatif(_n, model, delta, idle_h, search):
        if ctx.whatif is None:
            return note("The what-if is not available in this app (it was started without the analytics).")
        gpus = _number(delta)
        if gpus is None or not gpus.is_integer():
            return note(
                f"GPUs to add must be a whole number (negative to remove), not {_shown(delta)}.", "cap-wi-error"
            )
        hours = _number(idle_h)
        if idle_h not in (None, "") and hours is None:
            return note(
                f"The reclaim time must be a number of hours (empty: none), not {_shown(idle_h)}.", "cap-wi-error"
            )
        f, _ = ctx.filters(search)
        clusters = ctx.data.clusters()
        if f.cluster is None and len(clusters) > 1:  # one cluster's jobs cannot run on another's GPUs
            return note(f"Pick a cluster in the filter bar: the what-if replays one ({', '.join(clusters)}).")
        end = f.end_ts
        start = max(f.start_ts, end - dt.timedelta(days=WHATIF_DAYS))
        nodes, stats, fleet, hourly = whatif_frames(ctx.data, f.cluster_args, start, end)
        try:
            scenario, out = ctx.whatif(nodes, stats, fleet, start, end, model, int(gpus), hours, hourly)
        except ValueError as e:  # the what-if's bounds (analytics.whatif.check), each input with its allowed range
            return note(f"Not run: {e}.", "cap-wi-error")
        shown = out.with_columns((pl.col("wait_p90_s") / 60).alias("wait_p90_min"))
        pivot = shown.filter(pl.col("gpu_model") == model) if model else shown
        return html.Div(
            [
                note(f"{scenario}: jobs submitted {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC."),
                html.Div(
                    [
                        graph(
                            "cap-wi-wait",
                            figures.bars(
                                pivot,
                                "variant",
                                {"wait_p90_min": "p90 wait"},
                                f"p90 wait, {model}",
                                "p90 wait (min)",
                                "",
                            ),
                        ),
                        graph(
                            "cap-wi-alloc",
                            figures.bars(
                                pivot,
                                "variant",
                                {"allocation_pct": "allocation"},
                                f"Allocation, {model}",
                                "% of GPUs",
                                "",
                            ),
                        ),
                    ],
                    className="row",
                ),
                table("cap-wi-table", out),
            ]
        )


def _number(value) -> float | None:
    """A finite number from a form value (the browser sends a number or null; a hand-made request, anything)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        x = float(value)
    except (ValueError, OverflowError):  # OverflowError: an int past float's range (10**400)
        return None
    return x if math.isfinite(x) else None


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:30] + f"... ({len(text)} characters)"
