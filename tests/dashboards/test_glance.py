"""Read at a glance, on real lakes: every table header of every page is a registered human label, a tenant or GPU
model has the same colour on every page and load, no plot holds more than figures.MAX_LINES lines, and a page of a
lake whose first analytics run is at work says so (without a browser: the pages' layouts as the router draws them).

Lakes: the analysed 35-day lake (dash_lake, one cluster) with admission decisions added, and a lake of two clusters
(eu-1, us-1: 2 days, analysed once per cluster config, as tests/dashboards/test_cluster_filter.py builds it).
"""

import dataclasses
import datetime as dt
import logging
import shutil
import time
from types import SimpleNamespace

import dash_ag_grid as dag
import plotly.graph_objects as go
import polars as pl
import pytest
from dash import dcc, html

from gpuledger.config import defaults
from gpuledger.dashboards import figures, filters, ui
from gpuledger.dashboards import format as fmt
from gpuledger.dashboards.app import PAGES, Context
from gpuledger.dashboards.data import DashData
from gpuledger.dashboards.pages import capacity, fleet, tenants
from gpuledger.lake import LakeWriter
from gpuledger.store import open_store

from builders import END

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def lakes(dash_lake, tmp_path_factory):
    from gpuledger.analytics.runner import run
    from gpuledger.collector.sim.backfill import backfill

    one = tmp_path_factory.mktemp("glance") / "one"
    shutil.copytree(dash_lake, one)
    t = dt.datetime(2026, 10, 30, 12, tzinfo=dt.timezone.utc)
    decisions = [
        {"ts": t + dt.timedelta(minutes=i), "cluster": "default", "uid": f"u{i}", "tenant": "vision",
         "gpu_model": H100, "gpus": 4.0, "decision": d, "policy": "quota", "mode": "enforce",
         "reason": "over quota" if d == "deny" else None, "dry_run": False, "latency_s": 0.001}
        for i, d in enumerate(["allow", "warn", "deny"])
    ]  # fmt: skip
    LakeWriter(one).write("admission_decisions", pl.DataFrame(decisions), "webhook-0")
    two = tmp_path_factory.mktemp("glance") / "two"
    # us-1 busy (load 0.9): jobs wait there, so the pending tables have rows.
    for cluster, shape in {"eu-1": {"nodes": 3, "seed": 7}, "us-1": {"nodes": 2, "seed": 8, "load": 0.9}}.items():
        cfg = dataclasses.replace(defaults(), cluster=cluster)
        backfill(cfg, two, END - 2 * 86400, END, 900, gpus_per_node=4, models=("H100", "A100", "L40S"), workers=1,
                 **shape)  # fmt: skip
        run(two, until_s=END, cfg=cfg)
    return {"one": one, "two": two}


def _walk(tree):
    """Every component of a layout (Dash components, not JSON)."""
    if isinstance(tree, list | tuple):
        for c in tree:
            yield from _walk(c)
    elif hasattr(tree, "_prop_names"):
        yield tree
        yield from _walk(getattr(tree, "children", None))


def _drawn(lake, search: str = "") -> dict[str, list]:
    """Each page's components, the capacity what-if's answer and a tenant's jobs included."""
    from gpuledger.analytics.whatif import for_dashboard

    data = DashData(lake)
    try:
        ctx = Context(data, for_dashboard)
        out = {}
        for page in PAGES:
            f, _ = filters.parse(search, data.bounds())
            out[page.PATH] = list(_walk(page.layout(ctx, f)))
        f, _ = filters.parse("?tenant=vision", data.bounds())
        out["/tenants?tenant=vision"] = list(_walk(tenants.layout(ctx, f)))
        out["what-if"] = list(_walk(_whatif(ctx, data)))
        # The fleet's drill-down pages: a cluster, one of its nodes, a GPU and a job that held it (the page routes
        # the rest of its path; links.py builds these URLs).
        f, _ = filters.parse(search, data.bounds())
        held = data.frame(
            "SELECT cluster, node, gpu_uuid, job_id FROM gpu_allocations WHERE gpu_uuid IS NOT NULL "
            "ORDER BY start DESC LIMIT 1",
            lake=True,
        )
        cluster, node, gpu, job = held.row(0)
        f2, _ = filters.parse(f"?start={f.end - dt.timedelta(days=1)}&end={f.end}", data.bounds())  # native samples
        for rest, ff in (
            (f"cluster/{cluster}", f),
            (f"node/{cluster}/{node}", f),
            (f"gpu/{gpu}", f),
            (f"gpu/{gpu}", f2),
            (f"node/{cluster}/{node}", f2),
            (f"job/{cluster}/{job}", f),
        ):
            out[f"/fleet/{rest}"] = list(_walk(fleet.layout(ctx, ff, rest)))
        return out
    finally:
        data.close()


def _whatif(ctx, data):
    """The capacity page's what-if callback, called as the browser would (its first cluster picked)."""
    from dash import Dash

    app = Dash(__name__, suppress_callback_exceptions=True)
    capacity.register(app, ctx)
    (callback,) = [c for k, c in app.callback_map.items() if "cap-wi-out" in k]
    search = f"?cluster={data.clusters()[0]}"
    return callback["callback"].__wrapped__(1, H100, 8, None, search)


def test_every_table_header_on_every_page_is_a_registered_label(lakes, caplog):
    caplog.set_level(logging.WARNING, logger="gpuledger.dashboards.format")
    grids = {}
    for lake in lakes.values():
        for path, components in _drawn(lake).items():
            for c in components:
                if isinstance(c, dag.AgGrid):
                    grids[c.id] = (path, c.columnDefs)
    # Every table of every page, each with rows (an empty one is a sentence and shows no header).
    assert set(grids) >= {
        "ov-now", "ov-health", "ov-pending-jobs", "cap-peaks", "cap-backtest", "cap-wi-table", "ten-quota", "ten-use",
        "ten-cost-table", "ten-jobs", "q-size-table", "q-pending", "q-expansion", "fr-stranded", "fr-worst",
        "ws-tenant-table", "ws-jobs", "ws-idle-now", "en-policy", "en-denials",
    }  # fmt: skip
    for grid, (path, defs) in grids.items():
        for d in defs:
            assert d["field"] in fmt.REGISTRY, (path, grid, d["field"])
            assert d["headerName"] == fmt.REGISTRY[d["field"]].header and "_" not in d["headerName"], (grid, d)
    assert "has no label" not in caplog.text  # empty tables' columns are looked up too


def _colours(fig: go.Figure) -> dict[str, set[str]]:
    """name -> colours it is drawn in (lines, markers, each bar of a bar trace)."""
    out: dict[str, set[str]] = {}
    for t in fig.data:
        if isinstance(t, go.Bar) and isinstance(t.marker.color, tuple):
            for x, c in zip(t.x, t.marker.color, strict=True):
                out.setdefault(str(x), set()).add(c)
        elif isinstance(t, go.Box):
            out.setdefault(t.name, set()).add(t.marker.color)
        elif isinstance(t, go.Scatter) and t.name:
            c = t.line.color if t.mode != "markers" else t.marker.color
            out.setdefault(t.name, set()).add(c)
    return out


def test_a_tenant_and_a_model_have_one_colour_on_every_page_and_load(lakes):
    seen: dict[str, set[str]] = {}
    for _ in range(2):  # two loads, two apps
        for path, components in _drawn(lakes["one"]).items():
            for c in components:
                if isinstance(c, dcc.Graph):
                    for name, colours in _colours(c.figure).items():
                        seen.setdefault(name, set()).update((path, col) for col in colours)
    names = ["nlp", "platform", "recsys", "research", "vision", H100, "NVIDIA L40S"]
    for name in names:
        pages = {p for p, _ in seen[name]}
        assert {col for _, col in seen[name]} == {figures.colour(name)}, name
        assert len(pages) >= 2, (name, pages)  # drawn on several pages, in the one colour


def _lines_per_plot(fig: go.Figure) -> int:
    per: dict = {}
    for t in fig.data:
        if isinstance(t, go.Scatter) and t.mode != "markers":
            key = (t.xaxis or "x", t.yaxis or "y")
            per[key] = per.get(key, 0) + 1
    return max(per.values(), default=0)


def test_no_plot_on_any_page_holds_more_than_six_lines(lakes):
    drawn = 0
    for lake in lakes.values():
        for path, components in _drawn(lake).items():
            for c in components:
                if isinstance(c, dcc.Graph):
                    assert _lines_per_plot(c.figure) <= figures.MAX_LINES, (path, c.id)
                    assert not figures.is_empty(c.figure), (path, c.id)  # an empty one is a sentence instead
                    drawn += 1
    assert drawn >= 20
    # The two-cluster lake's capacity demand: 3 models x 2 clusters x 3 measures, drawn as one panel per model.
    (demand,) = [c for c in _drawn(lakes["two"])["/capacity"] if getattr(c, "id", None) == "cap-demand"]
    assert len(demand.figure.layout.annotations) >= 5


def _texts(components) -> str:
    return " ".join(c.children for c in components if isinstance(getattr(c, "children", None), str))


def test_a_page_says_the_first_analytics_run_is_at_work(tmp_path, monkeypatch):
    """While the first run works (`gpuledger up` starts one at once), each page says since when; once it ended
    without output (nothing to analyse), the page asks for a run as before."""
    from gpuledger.analytics import runner

    lake = tmp_path / "lake"
    lake.mkdir()
    seen = {}

    def slow_run(lake_, *args, **kw):  # the run's own work, observed from a page while it is at it
        data = DashData(lake_)
        try:
            f, _ = filters.parse("", data.bounds())
            seen["during"] = {p.PATH: _texts(_walk(p.layout(SimpleNamespace(data=data, whatif=None), f)))
                              for p in PAGES}  # fmt: skip
        finally:
            data.close()
        return []

    monkeypatch.setattr(runner, "_run", slow_run)
    t0 = time.time()
    runner.run(lake, until_s=END)
    for path, text in seen["during"].items():
        # Their tables are the webhook's and the quota commands', not the analytics'.
        if path not in ("/enforcement", "/quota-requests"):
            assert "The analytics are running: the run started at " in text, path
            assert "has not finished yet" in text and ui.NO_DATA not in text, path
    record = open_store(lake).last_run("analytics")
    assert record["ok"] is True and t0 - 1 <= record["started_at"] <= record["finished_at"] <= time.time() + 1
    data = DashData(lake)
    try:
        assert ui.no_data(data).children == ui.NO_DATA  # ended: nothing runs, so "run it"
    finally:
        data.close()


def test_a_run_in_progress_names_its_start_and_age(tmp_path):
    store = open_store(tmp_path)
    started = dt.datetime(2026, 11, 2, 10, 0, tzinfo=dt.timezone.utc)
    store.put_run("analytics", started.timestamp())
    data = SimpleNamespace(analytics_run=lambda: store.last_run("analytics"))
    text = ui.no_data(data, now=started + dt.timedelta(minutes=7)).children
    assert "the run started at 2026-11-02 10:00 UTC (7 min ago) and has not finished yet" in text
    store.put_run("analytics", started.timestamp(), started.timestamp() + 60, False)
    assert ui.no_data(data).children == ui.NO_DATA
    (tmp_path / "_state" / "runs" / "analytics.json").write_text("{not json")
    assert store.last_run("analytics") is None
    assert ui.no_data(SimpleNamespace(analytics_run=lambda: None)).children == ui.NO_DATA  # never ran


def test_the_quota_table_puts_the_fullest_first_and_says_who_is_over():
    q = pl.DataFrame(
        {
            "cluster": ["c"] * 4,
            "tenant": ["a", "b", "c", "d"],
            "gpu_model": ["all models", "H100", "H100", "all models"],
            "quota_gpus": [10.0, 8.0, None, 4.0],
            "allocated_gpus_now": [5.0, 10.0, 3.0, 1.0],
            "over_quota": [False, True, None, False],
            "fairshare": [0.5] * 4,
            "idle_gpus_now": [0.0] * 4,
        }
    )
    view, said = tenants.quota_view(q)
    assert view["tenant"].to_list() == ["b", "a", "d", "c"]  # over quota first, no quota last
    assert view["quota_used_pct"].to_list()[:3] == [125.0, 50.0, 25.0] and "over_quota" not in view.columns
    assert said == "1 of 3 quotas exceeded now: b on H100 (10.0 of 8.0 GPUs)."
    _, within = tenants.quota_view(q.filter(pl.col("tenant") != "b"))
    assert within == "All 2 quotas are within their limits now; the fullest: a on all models (5.0 of 10.0 GPUs), 50 %."
    grid = ui.table("ten-quota", view).children[1]
    assert grid.columnDefs[3]["cellStyle"] == {"function": "gpuledgerBar(params)"}  # used % drawn as a bar


def test_the_two_cost_figures_say_what_they_include(lakes):
    data = DashData(lakes["one"])
    try:
        f, _ = filters.parse("?start=2026-10-03&end=2026-11-01", data.bounds())
        ctx = SimpleNamespace(data=data, whatif=None)
        pages = {p.PATH: p for p in PAGES}
        kpis = {
            c.children[1].id: c.children[0].children
            for path in ("/", "/tenants")
            for c in _walk(pages[path].layout(ctx, f))
            if isinstance(c, html.Div) and c.className == "kpi"
        }
    finally:
        data.close()
    assert kpis["ov-cost-month"] == "fleet cost 2026-11 to 2 Nov 00:00 UTC (partial): jobs + idle capacity"
    assert kpis["ten-cost-total"] == "tenants' own jobs, 2026-10-03 to 2026-11-01"
    assert kpis["ten-cost-with-idle"] == "with their share of idle capacity"
