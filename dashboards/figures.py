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
    """History, the backtest's predictions over the last days and the forecast ahead, per model."""
    if frame.is_empty():
        return empty(title, "no forecast yet")
    fig = go.Figure(layout=dict(title=title, **LAYOUT))
    for (model,), g in frame.partition_by("gpu_model", as_dict=True, maintain_order=True).items():
        hist = g.filter(pl.col("kind") == "history")
        back = g.filter(pl.col("kind") == "backtest")
        ahead = g.filter(pl.col("kind") == "forecast")
        fig.add_trace(go.Scatter(x=hist["day"].to_list(), y=hist["actual_gpus"].to_list(), name=f"demand — {model}"))
        fig.add_trace(
            go.Scatter(
                x=hist["day"].to_list(),
                y=hist["supply_gpus"].to_list(),
                name=f"supply — {model}",
                line=dict(dash="dot"),
            )
        )
        fig.add_trace(
            go.Scatter(
                x=back["day"].to_list(),
                y=back["demand_gpus"].to_list(),
                name=f"backtest — {model}",
                line=dict(dash="dash"),
            )
        )
        fig.add_trace(
            go.Scatter(
                x=ahead["day"].to_list(),
                y=ahead["demand_gpus"].to_list(),
                name=f"forecast — {model}",
                line=dict(dash="dashdot"),
            )
        )
    fig.update_xaxes(title="day (UTC)")
    fig.update_yaxes(title="GPUs (daily mean)", rangemode="tozero")
    return fig
