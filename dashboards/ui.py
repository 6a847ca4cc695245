"""Small building blocks every page uses: a number with its unit, a table that downloads as CSV, a figure, notes."""

from __future__ import annotations

import polars as pl
from dash import dash_table, dcc, html

NO_DATA = (
    "No analytics output yet. Run `gpuledger analyze` on a lake with telemetry (or `gpuledger up`, which collects "
    "and analyses every five minutes); this page fills in once it has."
)


def kpi(id_: str, label: str, value: float | int | str | None, unit: str = "", digits: int = 0) -> html.Div:
    if value is None:
        text = "—"
    elif isinstance(value, str):
        text = value
    else:
        text = f"{value:,.{digits}f}"
    return html.Div(
        [html.Div(label, className="kpi-label"), html.Span(text, id=id_, className="kpi-value"), html.Span(f" {unit}")],
        className="kpi",
    )


def table(id_: str, frame: pl.DataFrame, page_size: int = 15, digits: int = 2) -> dash_table.DataTable:
    """A sortable table with a CSV export button; float columns rounded for reading (the CSV keeps them)."""
    cols = []
    for name, dtype in frame.schema.items():
        spec = {"name": name, "id": name}
        if dtype.is_numeric():
            spec["type"] = "numeric"
            if dtype.is_float():
                spec["format"] = {"specifier": f",.{digits}f"}
        cols.append(spec)
    rows = frame.with_columns(
        [pl.col(c).dt.strftime("%Y-%m-%d %H:%M UTC") for c, t in frame.schema.items() if isinstance(t, pl.Datetime)]
        + [pl.col(c).cast(pl.String) for c, t in frame.schema.items() if t in (pl.Date, pl.List(pl.String))]
    ).to_dicts()
    return dash_table.DataTable(
        id=id_,
        columns=cols,
        data=rows,
        sort_action="native",
        page_size=page_size,
        export_format="csv",
        style_table={"overflowX": "auto"},
        style_cell={"fontFamily": "inherit", "fontSize": "13px", "padding": "4px"},
    )


def graph(id_: str, figure) -> dcc.Graph:
    return dcc.Graph(id=id_, figure=figure, config={"displaylogo": False})


def note(text: str, id_: str | None = None) -> html.P:
    return html.P(text, className="note", **({"id": id_} if id_ else {}))


def section(title: str, *children) -> html.Section:
    return html.Section([html.H3(title), *children])


def problems(items: list[str]) -> html.Div:
    return html.Div([html.P(p) for p in items], className="problems", id="url-problems") if items else html.Div()
