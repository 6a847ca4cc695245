"""Fleet: the clusters, then one cluster's nodes, one node's GPUs, one GPU (or MIG instance), and one job's GPUs.

Routed by path (the app hands this page what follows /fleet/, dashboards/links.py makes the links):
/fleet, /fleet/cluster/<cluster>, /fleet/node/<cluster>/<node>, /fleet/gpu/<gpu_uuid>, /fleet/job/<cluster>/<job_id>.
The DCGM dashboard's per-node and per-GPU views, drawn from the lake (dashboards/drilldown.py: which resolution a
range gets, and what a viewer scoped to some tenants may see). An id that names nothing, or that the viewer's
tenants never held in the range, gets the same "no such ..." page: it says nothing of whether one exists.
"""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import polars as pl
from dash import dcc, html

from gpuledger.dashboards import clock_events, drilldown, figures, links
from gpuledger.dashboards.filters import TENANT_SQL, Filters
from gpuledger.dashboards.ui import graph, kpi, no_data, note, section, table

PATH = "/fleet"
PREFIX = "/fleet/"
NAME = "Fleet"


def layout(ctx, f: Filters, rest: str = ""):
    data = ctx.data
    if not data.has("fleet_hourly"):
        return [no_data(data)]
    parts = links.split(rest)
    if parts is None:
        return _missing("page", rest[:200], f, why="That address holds no id a cluster, node, GPU or job can have.")
    match parts:
        case []:
            return fleet_view(data, f)
        case ["cluster", cluster]:
            return cluster_view(data, f, cluster)
        case ["node", cluster, node]:
            return node_view(data, f, cluster, node)
        case ["gpu", gpu_uuid]:
            return gpu_view(data, f, gpu_uuid)
        case ["job", cluster, job_id]:
            return job_view(data, f, cluster, job_id)
    return _missing(
        "page",
        "/fleet/" + rest[:200],
        f,
        why="The fleet pages are /fleet, /fleet/cluster/<cluster>, "
        "/fleet/node/<cluster>/<node>, /fleet/gpu/<GPU UUID> and /fleet/job/<cluster>/<job id>.",
    )


def _missing(kind: str, ident: str, f: Filters, why: str | None = None) -> list:
    """The page for an id that names nothing the viewer may see: the same words whether it exists or not."""
    if why is None:
        days = f"{f.start} to {f.end}"
        if f.scope is not None:
            why = f"No such {kind} in your tenants' range ({days})."
        elif f.tenant is not None:
            why = f"No such {kind} that tenant {links.shown(f.tenant)} held in {days}."
        else:
            why = f"No such {kind} with telemetry or pods in {days}."
    return [
        _crumbs(f),
        section(f"No such {kind}: {links.shown(ident)}", note(why, "fl-missing")),
        note("A wider date range, or another tenant or cluster in the bar above, may show it."),
    ]


def _crumbs(f: Filters, *trail: tuple[str, str]) -> html.Nav:
    """Fleet › cluster › node › GPU: each a link carrying the filters."""
    items = [dcc.Link("Fleet", href=links.fleet_href(f))]
    for text, href in trail:
        items += [html.Span(" › "), dcc.Link(text, href=href)]
    return html.Nav(items, id="fl-crumbs", className="note")


def _scope_note(f: Filters) -> html.Div:
    if f.scope is not None:
        return note("Only GPUs your tenants held in the range, and their telemetry while they held them.")
    if f.tenant is not None:
        return note(f"Only GPUs tenant {f.tenant} held in the range, and their telemetry while it held them.")
    return html.Div()


def _resolution_note(res: drilldown.Resolution, f: Filters, href) -> html.Div:
    """Which resolution the figures are at, what it lacks, and a link to the native samples of the range's end."""
    parts = [f"Resolution: {res.label}, from {res.table}."]
    if res.native:
        return note(parts[0], "fl-resolution")
    last = replace(f, start=max(f.start, f.end - dt.timedelta(days=drilldown.NATIVE_MAX_DAYS - 1)))
    parts.append(
        f" The {drilldown.NATIVE_ONLY} are in the raw samples only: ranges of {drilldown.NATIVE_MAX_DAYS} days "
        "or less show them. "
    )
    return html.P(
        [*parts, dcc.Link(f"Show {last.start} to {last.end} at native resolution", href=href(last))],
        className="note",
        id="fl-resolution",
    )


# -- /fleet ----------------------------------------------------------------------------------------------------------
def fleet_view(data, f: Filters) -> list:
    if drilldown.restricted(f):
        held = drilldown.held_by_node(data, f)
        per = (
            held.group_by("cluster")
            .agg(
                pl.col("node").n_unique().alias("nodes_held"),
                pl.col("gpus_held").sum(),
                pl.col("gpu_hours_held").sum(),
            )
            .sort("cluster")
        )
        return [
            _crumbs(f),
            _scope_note(f),
            section("Clusters", table("fl-clusters", per, links={"cluster": links.to_cluster(f)})),
            section("Nodes", table("fl-nodes", held, links={"node": links.to_node(f)})),
        ]
    n = drilldown.nodes(data, f)
    per = n.group_by("cluster").agg(
        pl.len().alias("nodes"),
        pl.col("gpu_count").sum().alias("gpus"),
        pl.col("gpu_model").drop_nulls().unique().sort().str.join(", ").alias("gpu_models"),
    )
    per = per.join(drilldown.fleet_use(data, f), on="cluster", how="full", coalesce=True).sort("cluster")
    return [
        _crumbs(f),
        html.Div(
            [
                kpi("fl-f-clusters", "clusters", per.height, "clusters"),
                kpi("fl-f-nodes", "nodes", n.height, "nodes"),
                kpi("fl-f-gpus", "GPUs (nodes' counts)", n["gpu_count"].sum(), "GPUs"),
            ],
            className="kpis",
        ),
        section(
            f"Clusters: GPUs, allocation and activity, {f.start} to {f.end} (means over the hours)",
            table("fl-clusters", per, links={"cluster": links.to_cluster(f)}),
        ),
        section("Nodes", table("fl-nodes", n, links={"node": links.to_node(f), "cluster": links.to_cluster(f)})),
    ]


# -- /fleet/cluster/<cluster> ----------------------------------------------------------------------------------------
def cluster_view(data, f: Filters, cluster: str) -> list:
    crumbs = _crumbs(f, (cluster, links.cluster_href(cluster, f)))
    if drilldown.restricted(f):
        held = drilldown.held_by_node(data, f, cluster)
        if held.is_empty():
            return _missing("cluster", cluster, f)
        return [
            crumbs,
            _scope_note(f),
            kpi("fl-c-nodes", "nodes held", held["node"].n_unique(), "nodes"),
            kpi("fl-c-gpus", "GPUs held", held["gpus_held"].sum(), "GPUs"),
            kpi("fl-c-hours", "GPU-hours held", held["gpu_hours_held"].sum(), "GPU-hours", 1),
            section(f"Nodes of {cluster}", table("fl-c-nodes-table", held, links={"node": links.to_node(f)})),
        ]
    n = drilldown.nodes(data, f, cluster).drop("cluster")
    use = drilldown.node_use(data, f, cluster)
    if n.is_empty() and use.is_empty():
        return _missing("cluster", cluster, f)
    rows = n.join(use, on="node", how="full", coalesce=True).sort("node").with_columns(pl.lit(cluster).alias("cluster"))
    fleet = drilldown.fleet_use(data, f, cluster)
    a = fleet.row(0, named=True) if fleet.height else {}
    return [
        crumbs,
        html.Div(
            [
                kpi("fl-c-nodes", "nodes", n.height, "nodes"),
                kpi("fl-c-gpus", "GPUs (nodes' counts)", n["gpu_count"].sum(), "GPUs"),
                kpi("fl-c-allocated", "allocated, mean", a.get("allocated_pct"), "% of GPUs", 1),
                kpi("fl-c-busy", "busy, mean", a.get("busy_pct_of_allocated"), "% of allocated", 1),
            ],
            className="kpis",
        ),
        section(
            f"Nodes of {cluster}: allocation and utilization of their GPUs, {f.start} to {f.end} (hourly rollup)",
            table(
                "fl-c-nodes-table",
                rows.select("node", *[c for c in rows.columns if c not in ("node", "cluster")], "cluster"),
                links={"node": links.to_node(f)},
            ),
        ),
    ]


# -- /fleet/node/<cluster>/<node> ------------------------------------------------------------------------------------
def _gpu_label(row: dict) -> str:
    index = row.get("gpu_index")
    mig = f" {row['mig_profile']}" if row.get("mig_profile") else (" MIG" if row.get("parent_gpu_uuid") else "")
    # Without an index (the rollups have none) the UUID's tail: a node's UUIDs often share their head.
    return (f"GPU {index}" if index is not None else "…" + row["gpu_uuid"][-12:]) + mig


def node_view(data, f: Filters, cluster: str, node: str) -> list:
    # Two reads of the lake, at once (each is mostly listing and opening a year of files).
    with ThreadPoolExecutor(2) as pool:
        raw = pool.submit(drilldown.read_series, data, f, node=node, cluster=cluster)
        every = drilldown.pods(data, f, node=node, cluster=cluster, limit=None)
        frame, res = raw.result()
    held = drilldown.holds_of(every, f) if drilldown.restricted(f) else None
    frame = drilldown.finish_series(frame, res, held)
    p = every.head(drilldown.ROWS_MAX)
    info = (
        pl.DataFrame() if drilldown.restricted(f) else drilldown.nodes(data, f, cluster).filter(pl.col("node") == node)
    )
    if frame.is_empty() and p.is_empty() and info.is_empty():
        return _missing("node", f"{cluster}/{node}", f)
    s = drilldown.summary(frame)
    labels = {r["gpu_uuid"]: _gpu_label(r) for r in s.iter_rows(named=True)} if s.height else {}
    i = info.row(0, named=True) if info.height else {}
    here = lambda g: links.node_href(cluster, node, g)  # noqa: E731
    out = [
        _crumbs(f, (cluster, links.cluster_href(cluster, f)), (node, here(f))),
        _scope_note(f),
        html.Div(
            [
                kpi("fl-n-model", "GPU model", i.get("gpu_model") or (s["model"][0] if s.height else None)),
                kpi("fl-n-count", "GPUs (node's count)", i.get("gpu_count")),
                kpi("fl-n-shown", "GPUs and MIG instances shown", s.height, ""),
            ],
            className="kpis",
        ),
        _resolution_note(res, f, here),
        section(
            "GPUs",
            table(
                "fl-n-gpus",
                _first(s.drop("cluster", "node"), "gpu_index", "gpu_uuid", "mig_profile", "parent_gpu_uuid"),
                links={"gpu_uuid": links.to_gpu(f), "parent_gpu_uuid": links.to_gpu(f, "parent_gpu_uuid")},
            )
            if s.height
            else note("No GPU samples in this range."),
        ),
        section(
            "Utilization per GPU",
            graph(
                "fl-n-util",
                figures.small_multiples(
                    frame, "t", "util_gpu_pct", "gpu_uuid", "GPU utilization, one panel per GPU", "%", labels
                ),
            ),
        ),
    ]
    ev = drilldown.events(data, f, node=node, cluster=cluster, held=held)
    out.append(_events_section(ev, f))
    out.append(_pods_section(p, f, "Pods that held its GPUs"))
    return out


def _first(frame: pl.DataFrame, *cols: str) -> pl.DataFrame:
    """`frame` with `cols` (those it has) first: a GPU's index and UUID before its figures."""
    head = [c for c in cols if c in frame.columns]
    return frame.select(head + [c for c in frame.columns if c not in head])


def _events_section(ev: pl.DataFrame, f: Filters) -> html.Section:
    title = f"Health events: Xid, ECC, lost, throttle ({ev.height})"
    if ev.is_empty():
        return section(title, note("No health events in this range.", "fl-no-events"))
    return section(title, table("fl-events", ev, links={"node": links.to_node(f), "gpu_uuid": links.to_gpu(f)}))


def _pods_section(p: pl.DataFrame, f: Filters, title: str = "Pods that held it") -> html.Section:
    title = f"{title} ({p.height}{'+' if p.height >= drilldown.ROWS_MAX else ''})"
    if p.is_empty():
        return section(title, note("No pod held it in this range.", "fl-no-pods"))
    hrefs = {"job_id": links.to_job(f), "gpu_uuid": links.to_gpu(f), "node": links.to_node(f)}
    return section(title, table("fl-pods", p, links=hrefs))


# -- /fleet/gpu/<uuid> -----------------------------------------------------------------------------------------------
PANELS = [
    (
        "utilization and SM activity",
        {"util_gpu_pct": "utilization", "sm_active_pct": "SM active", "allocated_pct": "allocated (share of samples)"},
        "%",
    ),
    ("memory", {"mem_used_gib": "used", "mem_total_gib": "total"}, "GiB"),
    ("power", {"power_w": "draw", "power_limit_w": "limit"}, "W"),
    ("temperature", {"temp_c": "GPU"}, "°C"),
    ("clocks", {"sm_clock_mhz": "SM", "mem_clock_mhz": "memory"}, "MHz"),
]


def gpu_view(data, f: Filters, gpu_uuid: str) -> list:
    with ThreadPoolExecutor(2) as pool:  # as on the node page: two reads of the lake at once
        raw = pool.submit(drilldown.read_series, data, f, gpu_uuid=gpu_uuid)
        every = drilldown.pods(data, f, gpu_uuids=[gpu_uuid], limit=None)
        frame, res = raw.result()
    mig = sorted(frame.filter(pl.col("parent_gpu_uuid") == gpu_uuid)["gpu_uuid"].unique().to_list())
    if mig:  # its MIG instances' pods too (known only once its samples are read)
        every = pl.concat([every, drilldown.pods(data, f, gpu_uuids=mig, limit=None)]).sort("start", descending=True)
    held = drilldown.holds_of(every, f) if drilldown.restricted(f) else None
    frame = drilldown.finish_series(frame, res, held)
    own = frame.filter(pl.col("gpu_uuid") == gpu_uuid)
    children = sorted(frame.filter(pl.col("parent_gpu_uuid") == gpu_uuid)["gpu_uuid"].unique().to_list())
    p = every.head(drilldown.ROWS_MAX)
    if own.is_empty() and not children and p.is_empty():
        return _missing("GPU", gpu_uuid, f)
    ident = (own if own.height else p).row(-1, named=True)
    cluster, node = ident["cluster"], ident["node"]
    here = lambda g: links.gpu_href(gpu_uuid, g)  # noqa: E731
    s = drilldown.summary(own)
    k = s.row(0, named=True) if s.height else {}
    out = [
        _crumbs(
            f, (cluster, links.cluster_href(cluster, f)), (node, links.node_href(cluster, node, f)), (gpu_uuid, here(f))
        ),
        _scope_note(f),
        html.Div(
            [
                kpi("fl-g-model", "model", ident.get("model") or ident.get("gpu_model")),
                kpi("fl-g-util", "utilization, mean", k.get("util_gpu_pct_mean"), "%", 1),
                kpi("fl-g-sm", "SM active, mean", k.get("sm_active_pct_mean"), "%", 1),
                kpi("fl-g-mem", "memory used, peak", k.get("mem_used_gib_max"), "GiB", 1),
                kpi("fl-g-power", "power, mean", k.get("power_w_mean"), "W", 0),
                *(
                    [
                        kpi("fl-g-temp", "temperature, peak", k.get("temp_c_max"), "°C", 0),
                        kpi(
                            "fl-g-limited",
                            "clocks held down (not idle)",
                            k.get("clocks_limited_pct"),
                            "% of samples",
                            1,
                        ),
                    ]
                    if res.native
                    else []
                ),
            ],
            className="kpis",
        ),
        _resolution_note(res, f, here),
    ]
    parent = ident.get("parent_gpu_uuid")
    if parent:
        mig = f" ({ident['mig_profile']})" if ident.get("mig_profile") else ""
        out.append(
            html.P(
                ["A MIG instance" + mig + " of ", dcc.Link(parent, href=links.gpu_href(parent, f))],
                className="note",
                id="fl-g-parent",
            )
        )
    if children:
        out.append(
            section(
                f"MIG instances ({len(children)})",
                html.Ul([html.Li(dcc.Link(c, href=links.gpu_href(c, f))) for c in children], id="fl-g-children"),
            )
        )
    out.append(section("Telemetry", graph("fl-g-series", figures.panels(own, "t", PANELS, f"{gpu_uuid} on {node}"))))
    if res.native:
        reasons = clock_events.shares(own)
        out.append(
            section(
                "Clocks event reasons (NVML): what held the clocks down, share of samples",
                table("fl-g-throttle", reasons) if reasons.height else note("No clocks event reason set in the range."),
            )
        )
    out.append(_events_section(drilldown.events(data, f, gpu_uuids=[gpu_uuid, *mig], held=held), f))
    out.append(_pods_section(p, f))
    return out


# -- /fleet/job/<cluster>/<job_id> -----------------------------------------------------------------------------------
def job_view(data, f: Filters, cluster: str, job_id: str) -> list:
    """A job's GPUs, whenever it held them (its own time, not the range): each links to the GPU's page over the
    days the job held it."""
    p = drilldown.pods(data, f, cluster=cluster, job_id=job_id, in_range=False)
    job = data.frame(
        "SELECT cluster, job_id, tenant, gpu_model, gpus, status, submitted_at, scheduled_at, queue_s, run_s, "
        f"gpu_hours, efficiency, cost_usd FROM job_stats WHERE cluster = ? AND job_id = ? AND {TENANT_SQL}",
        [cluster, job_id, *f.tenant_args],
    )
    if p.is_empty() and job.is_empty():
        return _missing("job", f"{cluster}/{job_id}", f, why=_job_why(f))
    # Each GPU links to its page over the days this job held it (computed here: the table shows times as text).
    days = {
        (g, s, e): links.gpu_href(g, links.days_of(f, s, e)) for g, s, e in p.select("gpu_uuid", "start", "end").rows()
    }
    shown = p.select("gpu_uuid", "node", "pod", "namespace", "share", "start", "end", "open", "cluster")
    hrefs = {
        "gpu_uuid": lambda r: days[(r["gpu_uuid"], r["start"], r["end"])] if r["gpu_uuid"] else None,
        "node": links.to_node(f),
    }
    rows = table("fl-j-gpus", shown, links=hrefs)
    return [
        _crumbs(f, (cluster, links.cluster_href(cluster, f)), (job_id, links.job_href(cluster, job_id, f))),
        section("Job", table("fl-j-job", job) if job.height else note("Not in job_stats (not analysed yet).")),
        section(
            f"GPUs it held ({p['gpu_uuid'].n_unique() if p.height else 0})",
            rows if p.height else note("It held no GPU (yet).", "fl-j-none"),
        ),
    ]


def _job_why(f: Filters) -> str:
    if f.scope is not None:
        return "No such job among your tenants' jobs."
    if f.tenant is not None:
        return f"No such job of tenant {links.shown(f.tenant)}."
    return "No such job in the lake's jobs or GPU allocations."
