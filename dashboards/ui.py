"""Small building blocks every page uses: a number with its unit, a table that downloads as CSV, a figure, notes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import dash_ag_grid as dag
import polars as pl
from dash import dcc, html

from gpuledger.dashboards import format as fmt

LINK_PREFIX = "__href_"  # a linked cell's href in its row (not a column: the grid neither shows nor exports it)
NO_DATA = (
    "No analytics output yet. Run `gpuledger analyze` on a lake with telemetry (or `gpuledger up`, which collects "
    "and analyses every five minutes); this page fills in once it has."
)


def no_data(data, now: dt.datetime | None = None) -> html.P:
    """A page with nothing to show yet: "run the analytics", or, while a run is at work (`gpuledger up` starts one
    at once), since when it runs."""
    run = data.analytics_run()
    if run is None or run.get("finished_at") is not None:
        return note(NO_DATA, "no-data")
    now = now or dt.datetime.now(dt.timezone.utc)
    started = dt.datetime.fromtimestamp(run["started_at"], dt.timezone.utc)
    minutes = max(0, int((now - started).total_seconds() // 60))
    return note(
        f"The analytics are running: the run started at {fmt.utc(started)} ({minutes:,} min ago) and has not "
        "finished yet. This page fills in when it has (the first run over a long backfill takes a few minutes). If "
        "nothing runs any more (the process was stopped), run `gpuledger analyze`.",
        "no-data",
    )


def kpi(id_: str, label: str, value: float | int | str | None, unit: str = "", digits: int = 0) -> html.Div:
    text = value if isinstance(value, str) else fmt.number(value, f",.{digits}f")
    return html.Div(
        [html.Div(label, className="kpi-label"), html.Span(text, id=id_, className="kpi-value"), html.Span(f" {unit}")],
        className="kpi",
    )


def table(
    id_: str, frame: pl.DataFrame, page_size: int = 15, digits: int = 2, links: dict[str, Callable] | None = None
) -> html.Div:
    """A grid (dash-ag-grid): sortable, filterable, paged, with a CSV export button. Headers, units and number
    formats come from dashboards/format.py: values are scaled to the header's unit here (a wait's seconds to
    minutes) and formatted in the browser (d3-format), so sorting stays numeric and the CSV holds the numbers the
    grid holds (all its rows, as filtered and sorted, not only the page shown). `digits`: float columns that the
    registry does not know. An empty frame is a sentence, not an empty grid. `links`: column -> a function of the
    row giving the href of that cell's page (dashboards/links.py), or None: the cell is drawn as a link to it
    (assets/grid.js gpuledgerLink, its text as text), and the CSV keeps the plain value."""
    cols = {name: fmt.col(name) for name in frame.columns}  # every column looked up (an unknown one is logged)
    if frame.is_empty():
        return html.P("None in this range.", id=id_, className="note empty-table")
    defs, exprs = [], []
    for name, dtype in frame.schema.items():
        c, spec = cols[name], {"field": name, "headerName": cols[name].header}
        if links and name in links:
            spec["cellRenderer"] = "gpuledgerLink"
        if isinstance(dtype, pl.Datetime):
            exprs.append(
                pl.col(name).dt.convert_time_zone("UTC").dt.strftime("%Y-%m-%d %H:%M")
                if dtype.time_zone
                else pl.col(name).dt.strftime("%Y-%m-%d %H:%M")
            )
        elif dtype == pl.Date:
            exprs.append(pl.col(name).cast(pl.String))
        elif dtype == pl.Boolean:
            exprs.append(pl.when(pl.col(name)).then(pl.lit("yes")).when(~pl.col(name)).then(pl.lit("no")).alias(name))
        elif isinstance(dtype, pl.List):
            exprs.append(pl.col(name).cast(pl.List(pl.String)).list.join(", "))
        elif dtype.is_numeric():
            d3 = c.unit.d3 or (f",.{digits}f" if dtype.is_float() else ",.0f")
            exprs.append(pl.col(name).cast(pl.Float64) * c.unit.scale if c.unit.scale != 1 else pl.col(name))
            spec |= {
                "type": "numericColumn",
                "filter": "agNumberColumnFilter",
                "valueFormatter": {"function": f"params.value == null ? '' : d3.format('{d3}')(params.value)"},
                "useValueFormatterForExport": False,  # the CSV keeps the number (in the header's unit)
            }
            if c.unit.bar:
                spec["cellStyle"] = {"function": "gpuledgerBar(params)"}
        defs.append(spec)
    rows = frame.with_columns(exprs).to_dicts() if exprs else frame.to_dicts()
    if links:  # each href from the row as the query gave it (a time as a datetime, not as the grid shows it)
        for r, source in zip(rows, frame.to_dicts(), strict=True):
            r.update({LINK_PREFIX + c: href(source) for c, href in links.items() if c in source})
    grid = dag.AgGrid(
        id=id_,
        rowData=rows,
        columnDefs=defs,
        defaultColDef={
            "sortable": True,
            "filter": True,
            "resizable": True,
            "wrapHeaderText": True,
            "autoHeaderHeight": True,
            "minWidth": 110,
        },
        columnSize="sizeToFit",
        csvExportParams={"fileName": f"{id_}.csv"},
        dashGridOptions={
            "pagination": frame.height > page_size,
            "paginationPageSize": page_size,
            "paginationPageSizeSelector": False,
            "domLayout": "autoHeight",
            "suppressFieldDotNotation": True,  # a column name is a name, never a path into the row
            "suppressColumnVirtualisation": True,  # every column in the DOM (wide tables, the browser tests)
            "enableCellTextSelection": True,
            "ensureDomOrder": True,  # rows in the DOM in the order shown (screen readers, copying, the tests)
        },
        className="grid",
    )
    # The button exports through the grid's own API in the browser (assets/grid.js): no callback, no round trip.
    button = html.Button("Export CSV", className="csv-export", **{"data-grid": id_})
    return html.Div([button, grid], className="table")


def graph(id_: str, figure) -> dcc.Graph | html.P:
    """The figure, or the sentence saying why there is none (figures.empty): never an empty pair of axes."""
    why = (figure.layout.meta or {}).get("empty") if isinstance(figure.layout.meta, dict) else None
    if why is not None:
        return html.P(f"{figure.layout.title.text}: {why}.", id=id_, className="note empty-figure")
    return dcc.Graph(id=id_, figure=figure, config={"displaylogo": False})


def note(text: str, id_: str | None = None) -> html.P:
    return html.P(text, className="note", **({"id": id_} if id_ else {}))


def section(title: str, *children) -> html.Section:
    return html.Section([html.H3(title), *children])


def problems(items: list[str]) -> html.Div:
    return html.Div([html.P(p) for p in items], className="problems", id="url-problems") if items else html.Div()
