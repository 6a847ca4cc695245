"""The Dash app: a shell (navigation, the shared filters) and one module per page, routed by the URL.

`create_app(lake, whatif=..., auth=...)` builds a fresh app; nothing happens at import. Pages are plain modules
(dashboards/pages/): `PATH`, `NAME`, `layout(ctx, filters)` (components with their figures already drawn, from
the analytics' tables) and, for pages with controls of their own, `register(app, ctx)`.

The URL is the state: the filter bar writes `?start=&end=&tenant=&model=&cluster=` into it, and the page is drawn
from it, so a view can be bookmarked or sent. Read-only: no callback writes to the lake.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

import dash
import flask
from dash import Dash, Input, Output, ctx, dcc, html

from gpuledger.dashboards import access
from gpuledger.dashboards import filters as flt
from gpuledger.dashboards.access import HEALTH_PATH, Access
from gpuledger.dashboards.data import DashData
from gpuledger.dashboards.pages import (
    capacity,
    enforcement,
    fleet,
    fragmentation,
    overview,
    queue,
    quota_requests,
    tenants,
    waste,
)
from gpuledger.dashboards.ui import problems
from gpuledger.store import LakeRef

PAGES = (overview, capacity, tenants, queue, fragmentation, waste, enforcement, quota_requests, fleet)


@dataclass
class Context:
    data: DashData
    # The capacity what-if (analytics.whatif.whatif, wired by the CLI: a stage never imports another).
    whatif: Callable | None = None
    # The fragmentation page's placement replay: analytics.placement_whatif.placement_whatif with the lake and the
    # rate card bound by the CLI, called as placement(cluster, start, end, model=...).
    placement: Callable | None = None
    # The waste page's "what a stricter rule would have freed": analytics.whatif.idle_rule_freed, wired by the CLI.
    idle_rule: Callable | None = None

    def filters(self, search: str | None) -> tuple[flt.Filters, list[str]]:
        """The URL's filters, within the lake's days and narrowed to the viewer's tenants (access.scope): the one
        way every callback reads them, so none can forget whose rows it may return."""
        return flt.parse(search, self.data.bounds(), scope=access.scope())


def create_app(
    lake: LakeRef,
    *,
    whatif: Callable | None = None,
    placement: Callable | None = None,
    idle_rule: Callable | None = None,
    auth: tuple[str, str] | None = None,
    access_cfg: Access | None = None,
    variables: dict[str, str] | None = None,
    refresh_s: float = 0.0,
) -> Dash:
    """`auth`: basic auth's (user, password); `access_cfg`: who sees what (dashboards/access.py; its `basic` is
    `auth` when given). `refresh_s`: an open page redraws itself this often from the latest snapshot (0: never;
    [dashboard] refresh_s); a page with `HEAVY = True` (controls of its own, which a redraw would reset) only when
    asked."""
    context = Context(DashData(lake, variables), whatif, placement, idle_rule)
    app = Dash(__name__, title="gpuledger", suppress_callback_exceptions=True, update_title=None)
    app.layout = lambda: _shell(context, refresh_s)  # a function: the model and tenant lists are read on each load

    @app.callback(
        Output("page", "children"),
        Output("nav", "children"),
        Output("freshness", "children"),
        Input("url", "pathname"),
        Input("url", "search"),
        Input("refresh", "n_intervals"),
    )
    def render(pathname, search, _ticks):
        page, rest = route(pathname)
        if ctx.triggered_id == "refresh" and (page is None or getattr(page, "HEAVY", False)):
            return dash.no_update, dash.no_update, dash.no_update
        f, bad = context.filters(search)
        nav = [dcc.Link(p.NAME, href=p.PATH + f.search(), className="active" if p is page else "") for p in PAGES]
        fresh = freshness_text(*context.data.freshness(), dt.datetime.now(dt.timezone.utc))
        if page is None:
            return html.Div([html.H2("Not found"), html.P(f"No page at {pathname}.")]), nav, fresh
        body = page.layout(context, f) if rest is None else page.layout(context, f, rest)
        return html.Div([html.H2(page.NAME), problems(bad), *body]), nav, fresh

    @app.callback(
        Output("url", "search"),
        Output("f-range", "start_date"),
        Output("f-range", "end_date"),
        Output("f-tenant", "value"),
        Output("f-model", "value"),
        Output("f-cluster", "value"),
        Input("url", "search"),
        Input("f-range", "start_date"),
        Input("f-range", "end_date"),
        Input("f-tenant", "value"),
        Input("f-model", "value"),
        Input("f-cluster", "value"),
    )
    def sync(search, start, end, tenant, model, cluster):
        """URL -> filter controls on load and history moves; controls -> URL when a user changes one."""
        if ctx.triggered_id in (None, "url"):
            f, _ = context.filters(search)
            return dash.no_update, f.start.isoformat(), f.end.isoformat(), f.tenant, f.model, f.cluster
        new = flt.search((start or "")[:10], (end or "")[:10], tenant, model, cluster)
        return (new if new != search else dash.no_update), *([dash.no_update] * 5)

    for p in PAGES:
        if hasattr(p, "register"):
            p.register(app, context)
    # The probes' endpoint: it says the server answers and nothing else, so it needs no password.
    app.server.add_url_rule(HEALTH_PATH, "healthz", lambda: flask.Response("ok\n", 200, mimetype="text/plain"))
    rules = access_cfg or Access()
    if auth:
        rules = dataclasses.replace(rules, basic=auth)
    if rules.basic or rules.trusted_proxies:
        access.guard(app.server, rules)
    app.server.config["GPULEDGER_CONTEXT"] = context
    return app


def route(pathname: str | None) -> tuple[object | None, str | None]:
    """(the page at `pathname`, None), or for a page with a PREFIX (one page per id under it: /fleet/node/...)
    (that page, the rest of the path after the prefix, still percent-encoded), or (None, None)."""
    path = pathname or "/"
    for p in PAGES:
        if p.PATH == path:
            return p, None
    for p in PAGES:
        prefix = getattr(p, "PREFIX", None)
        if prefix and path.startswith(prefix):
            return p, path[len(prefix) :]
    return None, None


def freshness_text(data_to: dt.datetime | None, ran_at: dt.datetime | None, now: dt.datetime) -> str:
    """The line under the header: how recent the figures are, and when the page was drawn (all UTC)."""

    def ago(t: dt.datetime) -> str:
        minutes = max(0, int((now - t).total_seconds() // 60))
        return "just now" if minutes == 0 else f"{minutes:,} min ago" if minutes < 120 else f"{minutes // 60:,} h ago"

    parts = [
        "no analytics output yet" if data_to is None else f"figures to {data_to:%Y-%m-%d %H:%M} UTC",
        *([] if ran_at is None else [f"analytics ran {ran_at:%Y-%m-%d %H:%M} UTC ({ago(ran_at)})"]),
        f"page drawn {now:%H:%M:%S} UTC",
    ]
    return " · ".join(parts)


def _shell(context: Context, refresh_s: float = 0.0) -> html.Div:
    bounds = context.data.bounds()
    who = access.viewer()
    tenants = context.data.tenants()
    if who.tenants is not None:  # the tenant list is itself data: a tenant user is offered only their own
        tenants = [t for t in tenants if t in who.tenants]
    signed_in = (
        []
        if who.how == "open"
        else [
            html.Span(
                f"{who.user} · " + ("all tenants" if who.admin else ", ".join(who.tenants)),
                id="viewer",
                className="note",
            )
        ]
    )
    return html.Div(
        [
            dcc.Location(id="url", refresh=False),
            # Disabled at 0: no timer in the browser at all (dcc.Interval's interval is in milliseconds).
            dcc.Interval(id="refresh", interval=max(refresh_s, 1.0) * 1000, disabled=refresh_s <= 0),
            html.Header(
                [html.Strong("gpuledger"), html.Nav(id="nav", style={"display": "flex", "gap": "16px"}), *signed_in]
            ),
            html.P(id="freshness", className="note"),
            html.Div(
                [
                    html.Label("Range (UTC days)"),
                    dcc.DatePickerRange(
                        id="f-range",
                        min_date_allowed=bounds[0] if bounds else None,
                        max_date_allowed=bounds[1] if bounds else None,
                        display_format="YYYY-MM-DD",
                    ),
                    html.Label("Tenant"),
                    dcc.Dropdown(
                        id="f-tenant",
                        options=tenants,
                        placeholder="all tenants",
                        style={"width": "200px"},
                    ),
                    html.Label("GPU model"),
                    dcc.Dropdown(
                        id="f-model", options=context.data.models(), placeholder="all models", style={"width": "260px"}
                    ),
                    html.Label("Cluster"),
                    dcc.Dropdown(
                        id="f-cluster",
                        options=context.data.clusters(),
                        placeholder="all clusters",
                        style={"width": "160px"},
                    ),
                ],
                id="filters",
            ),
            html.Main(dcc.Loading(html.Div(id="page"), delay_show=300)),
        ]
    )
