"""Figures from frames: pure functions (frame in, figure out), tested without a browser. Units on every axis.

Read at a glance:
- Colours: a tenant, a GPU model (or a cluster) has one colour on every page and every load: a hash of its name
  into PALETTE (`colour`); a name that a page prefixes with its cluster (`eu-1 / vision`, filters.by_cluster) keeps
  its own colour, and the cluster is told apart by the line's dash or the marker's symbol. Fixed series (supply,
  busy, allow, deny, ...) have fixed colours (SERIES).
- Order: categories sorted (job sizes in numeric order: SIZE_ORDER), series sorted by name, time ascending.
- Many series: at most MAX_LINES lines share a plot; past that, or when several measures are drawn per group, one
  small panel per group (small multiples), each measure told apart by its dash.
- Nothing to draw: `empty`, which the page shows as a sentence (ui.graph), never an empty pair of axes. A series of
  one or two points is drawn with markers (a line needs two points to be seen).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

LAYOUT = dict(margin=dict(l=60, r=20, t=40, b=40), height=380, legend=dict(orientation="h", y=-0.3, yanchor="top"))
# Tableau 10, then ColorBrewer Dark2 (less its Tableau look-alikes): 18 colours that read on white and apart.
PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
    "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666",
)  # fmt: skip
# Series that are not a tenant or a model: the same colour wherever they are drawn.
SERIES = {
    "supply": "#555555",
    "in the fleet": "#555555",
    "allocated": "#4e79a7",
    "busy": "#59a14f",
    "asked for": "#f28e2b",
    "allow": "#59a14f",
    "warn": "#edc948",
    "deny": "#e15759",
    "measured": "#555555",
    "today": "#4e79a7",
    "scenario": "#f28e2b",
}
SIZE_ORDER = ("<1", "1", "2", "3-4", "5-8", ">8")  # job_stats.size_bucket, smallest first
MAX_LINES = 6  # lines in one plot; more are drawn as small multiples
DASHES = ("solid", "dot", "dash", "dashdot", "longdash")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x")
# columns whose values have their own colour
NAMED = {"tenant", "gpu_model", "cluster", "decision", "variant", "workload_class"}


def colour(name: object) -> str:
    """The colour of a tenant, GPU model or cluster: the same on every page and load (a hash, not the order seen).
    `eu-1 / vision` is vision's colour (the cluster is drawn apart by dash or symbol)."""
    text = str(name)
    if text in SERIES:
        return SERIES[text]
    own = text.rsplit(" / ", 1)[-1]
    return PALETTE[int.from_bytes(hashlib.blake2b(own.encode(), digest_size=8).digest(), "big") % len(PALETTE)]


def _cluster_of(name: object) -> str | None:
    text = str(name)
    return text.rsplit(" / ", 1)[0] if " / " in text else None


def ordered(values) -> list:
    """Categories in reading order: job sizes numerically, anything else sorted (None last)."""
    values = list(dict.fromkeys(values))
    if values and all(v in SIZE_ORDER for v in values):
        return sorted(values, key=SIZE_ORDER.index)
    return sorted(values, key=lambda v: (v is None, str(v)))


def empty(title: str, why: str) -> go.Figure:
    """Nothing to draw: the page writes "<title>: <why>." instead of the figure (ui.graph reads layout.meta)."""
    fig = go.Figure(layout=dict(title=title, meta={"empty": why}, **LAYOUT))
    fig.add_annotation(text=why, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def is_empty(fig: go.Figure) -> bool:
    return isinstance(fig.layout.meta, dict) and "empty" in fig.layout.meta


def _no_values(frame: pl.DataFrame, cols) -> bool:
    return frame.is_empty() or all(frame[c].null_count() == frame.height for c in cols if c in frame.columns)


def tall(height: int) -> dict:
    """LAYOUT for a figure of `height` px (small multiples): the legend 50 px under the last panel, where LAYOUT's
    -0.3 of the paper would put it 0.3 x the figure's height below, far from a tall figure's panels."""
    return {**LAYOUT, "height": height, "legend": dict(orientation="h", y=-50 / height, yanchor="top")}


def _mode(n: int) -> str:
    return "lines+markers" if n <= 2 else "lines"


def _groups(frame: pl.DataFrame, by: str | None, x: str) -> list[tuple[object, pl.DataFrame]]:
    if not by:
        return [(None, frame.sort(x))]
    parts = frame.partition_by(by, as_dict=True)
    return [(key, parts[(key,)].sort(x)) for key in ordered(k for (k,) in parts)]


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
    """One line per (column in ys) x (value of `by`); ys maps column -> legend label. Up to MAX_LINES lines of one
    measure share a plot, coloured by group; several measures per group, or more lines, are small multiples."""
    if _no_values(frame, ys):
        return empty(title, "no data in this range")
    groups = _groups(frame, by, x)
    multiples = by is not None and len(groups) > 1 and (len(ys) > 1 or len(groups) > MAX_LINES)
    if multiples:
        return _multiples(groups, x, ys, title, y_title, x_title, dash)
    fig = go.Figure(layout=dict(title=title, **LAYOUT))
    clusters = ordered(c for c in (_cluster_of(k) for k, _ in groups) if c is not None)
    dashes = _dashes(ys, dash)
    for key, g in groups:
        for col, label in ys.items():
            if key is None:  # measures of one series: each its own colour
                name, line = label, dict(color=colour(label), dash=(dash or {}).get(col, "solid"))
            elif len(ys) > 1:  # measures of one group: its colour (fixed series their own), told apart by dash
                name, line = f"{label} — {key}", dict(color=SERIES.get(label, colour(key)), dash=dashes[col])
            else:  # one measure per group: the group's colour, its cluster's dash
                cl = _cluster_of(key)
                style = DASHES[clusters.index(cl) % len(DASHES)] if cl is not None else "solid"
                name, line = str(key), dict(color=colour(key), dash=(dash or {}).get(col, style))
            fig.add_trace(go.Scatter(x=g[x].to_list(), y=g[col].to_list(), mode=_mode(g.height), name=name, line=line))
    fig.update_xaxes(title=x_title, **_one_time(frame[x]))
    fig.update_yaxes(title=y_title, rangemode="tozero")
    return fig


def _one_time(xs: pl.Series) -> dict:
    """A time axis with one distinct time (a month's first day, one hour): a day either side, ticks a day apart.
    Left alone, plotly spans a millisecond around the point and labels it 23:59:59.9995."""
    if not xs.dtype.is_temporal() or xs.n_unique() != 1 or xs.null_count():
        return {}
    t = xs[0] if isinstance(xs[0], dt.datetime) else dt.datetime.combine(xs[0], dt.time())
    return {"range": [t - dt.timedelta(days=1), t + dt.timedelta(days=1)], "dtick": 86_400_000, "tickformat": "%b %d"}


def _multiples(groups, x, ys, title, y_title, x_title, dash) -> go.Figure:
    """One panel per group (its name above it), each measure in the group's colour told apart by its dash; panels
    of one measure share the y scale (compared at a glance), panels of several keep their own."""
    n = len(groups)
    cols = 1 if len(ys) > 1 and n <= 3 else min(3, n)
    rows = math.ceil(n / cols)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[str(k) for k, _ in groups],
        shared_xaxes=True,
        shared_yaxes="all" if len(ys) == 1 else False,
        vertical_spacing=min(0.12, 0.3 / rows),
        horizontal_spacing=0.06,
    )
    fig.update_layout(title=title, **tall(120 + (220 if cols > 1 else 260) * rows))
    dashes = _dashes(ys, dash)
    for i, (key, g) in enumerate(groups):
        row, c = divmod(i, cols)
        for col, label in ys.items():
            fig.add_trace(
                go.Scatter(
                    x=g[x].to_list(),
                    y=g[col].to_list(),
                    mode=_mode(g.height),
                    name=label,
                    legendgroup=label,
                    showlegend=i == 0 and len(ys) > 1,  # one legend entry per measure; one measure: the titles say
                    # supply and other fixed series keep their colour; the group's own measures take the group's
                    line=dict(color=SERIES.get(label, colour(key)), dash=dashes[col]),
                ),
                row=row + 1,
                col=c + 1,
            )
    fig.update_yaxes(rangemode="tozero")
    for r in range(1, rows + 1):
        fig.update_yaxes(title_text=y_title, row=r, col=1)
    for c in range(1, cols + 1):
        fig.update_xaxes(title_text=x_title, row=rows, col=c)
    return fig


def _dashes(ys: dict[str, str], given: dict[str, str] | None) -> dict[str, str]:
    """A dash per measure: the ones given, and the rest in DASHES order skipping those (the first is solid)."""
    given = given or {}
    free = iter([d for d in DASHES if d not in given.values()] + list(DASHES))
    return {col: given[col] if col in given else next(free) for col in ys}


def bars(
    frame: pl.DataFrame, x: str, ys: dict[str, str], title: str, y_title: str, x_title: str, stacked: bool = False
) -> go.Figure:
    """Bars per category of `x` (in reading order). Tenants, models and other named categories have their colour;
    a second measure stacked on the first is the same colour, hatched."""
    if _no_values(frame, ys):
        return empty(title, "no data in this range")
    raw = frame[x].to_list()
    cats = ordered(raw)
    frame = frame[sorted(range(frame.height), key=lambda i: (cats.index(raw[i]), i))]
    xs = frame[x].to_list()
    named = x in NAMED
    fig = go.Figure(layout=dict(title=title, barmode="stack" if stacked else "group", **LAYOUT))
    for i, (col, label) in enumerate(ys.items()):
        if named:
            marker = dict(color=[colour(v) for v in xs], pattern_shape="" if i == 0 else "/")
            if i > 0:
                marker["opacity"] = 0.55
        else:
            marker = dict(color=colour(label) if label in SERIES else PALETTE[i % len(PALETTE)])
        fig.add_trace(go.Bar(x=xs, y=frame[col].to_list(), name=label, marker=marker))
    fig.update_xaxes(title=x_title, categoryorder="array", categoryarray=cats)
    fig.update_yaxes(title=y_title)
    return fig


def boxes(frame: pl.DataFrame, x: str, title: str, y_title: str, x_title: str) -> go.Figure:
    """Box plots from precomputed quantiles (p10, p25, p50, p75, p90 columns): no raw points cross the wire. One
    box per category in reading order, in the category's colour (tenants, models)."""
    if frame.is_empty():
        return empty(title, "no scheduled jobs in this range")
    fig = go.Figure(layout=dict(title=title, showlegend=False, **LAYOUT))
    cats = ordered(frame[x].to_list())
    for cat in cats:
        g = frame.filter(pl.col(x) == cat) if cat is not None else frame.filter(pl.col(x).is_null())
        fig.add_trace(
            go.Box(
                x=[cat],
                q1=g["p25"].to_list(),
                median=g["p50"].to_list(),
                q3=g["p75"].to_list(),
                lowerfence=g["p10"].to_list(),
                upperfence=g["p90"].to_list(),
                name=str(cat),
                marker_color=colour(cat) if x in NAMED else PALETTE[0],
                hovertemplate=f"{cat}: p10 %{{lowerfence:.1f}}, median %{{median:.1f}}, p90 %{{upperfence:.1f}}"
                "<extra>whiskers p10-p90</extra>",
            )
        )
    fig.update_xaxes(title=x_title, categoryorder="array", categoryarray=[str(c) for c in cats], type="category")
    fig.update_yaxes(title=y_title, rangemode="tozero")
    return fig


def scatter(frame: pl.DataFrame, x: str, y: str, by: str, title: str, x_title: str, y_title: str) -> go.Figure:
    if _no_values(frame, [y]):
        return empty(title, "no data in this range")
    fig = go.Figure(layout=dict(title=title, **LAYOUT))
    groups = _groups(frame, by, x)
    clusters = ordered(c for c in (_cluster_of(k) for k, _ in groups) if c is not None)
    for key, g in groups:
        cl = _cluster_of(key)
        symbol = SYMBOLS[clusters.index(cl) % len(SYMBOLS)] if cl is not None else "circle"
        fig.add_trace(
            go.Scatter(
                x=g[x].to_list(),
                y=g[y].to_list(),
                mode="markers",
                name=str(key),
                marker=dict(color=colour(key), symbol=symbol, size=8, opacity=0.8),
            )
        )
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title, rangemode="tozero")
    return fig


def forecast(frame: pl.DataFrame, title: str) -> go.Figure:
    """One panel per GPU model (small multiples, each on its own scale): its demand and supply, the chosen method's
    backtest over the last days, and the forecast ahead inside its 95 % and 80 % prediction bands. Demand is drawn
    in the model's colour."""
    if frame.is_empty() or frame.filter(pl.col("kind") == "history").is_empty():
        return empty(title, "no forecast yet")
    parts = frame.partition_by("gpu_model", as_dict=True)
    models = ordered(m for (m,) in parts)
    groups = {m: parts[(m,)].sort("day") for m in models}
    fig = make_subplots(
        rows=len(models),
        cols=1,
        subplot_titles=[str(m) for m in models],
        # 80 px between panels, whatever their number: room for the dates under one and the title of the next
        vertical_spacing=80 / (120 + 260 * len(models)),
    )
    fig.update_layout(title=title, **tall(120 + 260 * len(models)))
    fixed = {"supply": "#555555", "backtest": "#7f7f7f", "forecast": "#2ca02c"}
    for row, model in enumerate(models, 1):
        g = groups[model]
        hist, back, ahead = (g.filter(pl.col("kind") == k) for k in ("history", "backtest", "forecast"))
        first = row == 1  # one legend entry per kind, not per panel

        def line(x, y, kind, dash=None, row=row, first=first, model=model):
            fig.add_trace(
                go.Scatter(
                    x=x.to_list(),
                    y=y.to_list(),
                    name=kind,
                    legendgroup=kind,
                    showlegend=first,
                    mode=_mode(len(x)),
                    line=dict(color=colour(model) if kind == "demand" else fixed[kind], dash=dash),
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


def panels(frame: pl.DataFrame, x: str, rows: list[tuple[str, dict[str, str], str]], title: str) -> go.Figure:
    """One GPU's metrics, one panel per row (title, {column: legend label}, y-axis title) on a shared time axis:
    each quantity on its own scale and unit, never two units on one axis. A row whose columns are all empty is left
    out (a metric the source does not report)."""
    from plotly.subplots import make_subplots

    rows = [r for r in rows if any(c in frame.columns and frame[c].null_count() < frame.height for c in r[1])]
    if frame.is_empty() or not rows:
        return empty(title, "no samples in this range")
    fig = make_subplots(
        rows=len(rows),
        cols=1,
        shared_xaxes=True,
        subplot_titles=[r[0] for r in rows],
        vertical_spacing=0.25 / len(rows),
    )
    fig.update_layout(title=title, **tall(100 + 170 * len(rows)))
    xs = frame[x].to_list()
    for i, (_, ys, y_title) in enumerate(rows, 1):
        for col, label in ys.items():
            if col in frame.columns:
                fig.add_trace(go.Scatter(x=xs, y=frame[col].to_list(), mode="lines", name=label), row=i, col=1)
        fig.update_yaxes(title_text=y_title, rangemode="tozero", row=i, col=1)
    fig.update_xaxes(title_text="time (UTC)", row=len(rows), col=1)
    return fig


def small_multiples(
    frame: pl.DataFrame, x: str, y: str, by: str, title: str, y_title: str, labels: dict | None = None, cols: int = 2
) -> go.Figure:
    """One small panel per value of `by` (a node's GPUs), all on the same y range, so eight GPUs read side by side
    rather than as eight lines over one another. `labels`: panel title per value (default: the value)."""
    from plotly.subplots import make_subplots

    if frame.is_empty():
        return empty(title, "no samples in this range")
    groups = frame.partition_by(by, as_dict=True, maintain_order=True)
    keys = [k for (k,) in groups]
    n_rows = -(-len(keys) // cols)
    names = [str((labels or {}).get(k, k)) for k in keys]
    fig = make_subplots(
        rows=n_rows,
        cols=cols,
        shared_xaxes=True,
        shared_yaxes=True,
        subplot_titles=names,
        vertical_spacing=0.3 / n_rows,
        horizontal_spacing=0.04,
    )
    fig.update_layout(title=title, showlegend=False, **{**LAYOUT, "height": 100 + 160 * n_rows})
    top = frame[y].max()
    for i, k in enumerate(keys):
        g = groups[(k,)]
        row, col = i // cols + 1, i % cols + 1
        fig.add_trace(go.Scatter(x=g[x].to_list(), y=g[y].to_list(), mode="lines", name=names[i]), row=row, col=col)
        fig.update_yaxes(range=[0, (top or 1) * 1.05], row=row, col=col, title_text=y_title if col == 1 else None)
    fig.update_xaxes(title_text="time (UTC)", row=n_rows)
    return fig
