"""Figures from frames: pure functions (frame in, figure out), tested without a browser. Units on every axis."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

LAYOUT = dict(margin=dict(l=60, r=20, t=40, b=40), height=380, legend=dict(orientation="h", y=-0.3, yanchor="top"))


def empty(title: str, why: str) -> go.Figure:
    fig = go.Figure(layout=dict(title=title, **LAYOUT))
    fig.add_annotation(text=why, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def lines(
    frame: pl.DataFrame,
    x: str,
    ys: dict[str, str],
    title: str,
    y_title: str,
    by: str | None = None,
    x_title: str = "time (UTC)",
    dash: dict[str, str] | None = None,
) -> go.Figure:
    """One line per (column in ys) x (value of `by`); ys maps column -> legend label."""
    if frame.is_empty():
        return empty(title, "no data in this range")
    fig = go.Figure(layout=dict(title=title, **LAYOUT))
    groups = frame.partition_by(by, as_dict=True, maintain_order=True) if by else {(None,): frame}
    for (key,), g in groups.items():
        for col, label in ys.items():
            name = f"{label} — {key}" if key is not None else label
            fig.add_trace(
                go.Scatter(
                    x=g[x].to_list(),
                    y=g[col].to_list(),
                    mode="lines",
                    name=name,
                    line=dict(dash=(dash or {}).get(col, "solid")),
                )
            )
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title, rangemode="tozero")
    return fig


def bars(
    frame: pl.DataFrame, x: str, ys: dict[str, str], title: str, y_title: str, x_title: str, stacked: bool = False
) -> go.Figure:
    if frame.is_empty():
        return empty(title, "no data in this range")
    fig = go.Figure(layout=dict(title=title, barmode="stack" if stacked else "group", **LAYOUT))
    for col, label in ys.items():
        fig.add_trace(go.Bar(x=frame[x].to_list(), y=frame[col].to_list(), name=label))
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title)
    return fig


def boxes(frame: pl.DataFrame, x: str, title: str, y_title: str, x_title: str) -> go.Figure:
    """Box plots from precomputed quantiles (p10, p25, p50, p75, p90 columns): no raw points cross the wire."""
    if frame.is_empty():
        return empty(title, "no scheduled jobs in this range")
    fig = go.Figure(layout=dict(title=title, **LAYOUT))
    fig.add_trace(
        go.Box(
            x=frame[x].to_list(),
            q1=frame["p25"].to_list(),
            median=frame["p50"].to_list(),
            q3=frame["p75"].to_list(),
            lowerfence=frame["p10"].to_list(),
            upperfence=frame["p90"].to_list(),
            name="wait (whiskers p10-p90)",
        )
    )
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title)
    return fig


def scatter(frame: pl.DataFrame, x: str, y: str, by: str, title: str, x_title: str, y_title: str) -> go.Figure:
    if frame.is_empty():
        return empty(title, "no data in this range")
    fig = go.Figure(layout=dict(title=title, **LAYOUT))
    for (key,), g in frame.partition_by(by, as_dict=True, maintain_order=True).items():
        fig.add_trace(go.Scatter(x=g[x].to_list(), y=g[y].to_list(), mode="markers", name=str(key)))
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title, rangemode="tozero")
    return fig


def forecast(frame: pl.DataFrame, title: str) -> go.Figure:
    """One panel per GPU model (small multiples, each on its own scale): its demand and supply, the chosen method's
    backtest over the last days, and the forecast ahead inside its 95 % and 80 % prediction bands."""
    from plotly.subplots import make_subplots

    if frame.is_empty() or frame.filter(pl.col("kind") == "history").is_empty():
        return empty(title, "no forecast yet")
    groups = frame.partition_by("gpu_model", as_dict=True, maintain_order=True)
    models = [m for (m,) in groups]
    fig = make_subplots(rows=len(models), cols=1, subplot_titles=models, vertical_spacing=0.12 / max(1, len(models)))
    fig.update_layout(title=title, **{**LAYOUT, "height": 120 + 260 * len(models)})
    colours = {"demand": "#1f77b4", "supply": "#555555", "backtest": "#ff7f0e", "forecast": "#2ca02c"}
    for row, model in enumerate(models, 1):
        g = groups[(model,)]
        hist, back, ahead = (g.filter(pl.col("kind") == k) for k in ("history", "backtest", "forecast"))
        first = row == 1  # one legend entry per kind, not per panel

        def line(x, y, kind, dash=None, row=row, first=first):
            fig.add_trace(
                go.Scatter(
                    x=x.to_list(),
                    y=y.to_list(),
                    name=kind,
                    legendgroup=kind,
                    showlegend=first,
                    line=dict(color=colours[kind], dash=dash),
                ),
                row=row,
                col=1,
            )

        if ahead.height:
            for lo, hi, name, alpha in (
                ("lo95_gpus", "hi95_gpus", "95 % band", 0.12),
                ("lo80_gpus", "hi80_gpus", "80 % band", 0.25),
            ):
                days = ahead["day"].to_list()
                fig.add_trace(
                    go.Scatter(
                        x=days + days[::-1],
                        y=ahead[hi].to_list() + ahead[lo].to_list()[::-1],
                        fill="toself",
                        fillcolor=f"rgba(44,160,44,{alpha})",
                        line=dict(width=0),
                        hoverinfo="skip",
                        name=name,
                        legendgroup=name,
                        showlegend=first,
                    ),
                    row=row,
                    col=1,
                )
        line(hist["day"], hist["actual_gpus"], "demand")
        line(hist["day"], hist["supply_gpus"], "supply", "dot")
        if back.height:
            line(back["day"], back["demand_gpus"], "backtest", "dash")
        if ahead.height:
            line(ahead["day"], ahead["demand_gpus"], "forecast")
        fig.update_yaxes(title_text="GPUs (daily mean)", rangemode="tozero", row=row, col=1)
    fig.update_xaxes(title_text="day (UTC)", row=len(models), col=1)
    return fig
