"""The fleet pages (/fleet, a cluster, a node, a GPU, a job) on a hand-built lake whose every figure is computed
here by hand: a GPU's three samples, its clocks event reasons, the pods that held it, which resolution a range
gets, what a viewer scoped to one tenant sees, and ids that name nothing.

The lake (cluster "c", November 2026):
- node n1: GPU-0 (index 0) three samples at 10:00, 10:01, 10:02 (util 10, 20, 60 %); GPU-1 (index 1) idle;
  GPU-2 (index 2) a MIG parent with one instance MIG-2a (1g.10gb).
- node "rack 7/n2" (a space and a slash: one URL segment all the same): GPU-3.
- GPU-0 was held by job ja of tenant a from 10:00 to 10:01:30, then by job jb of tenant b to 10:03; GPU-1 by jb;
  MIG-2a by ja.
- health events on n1: an Xid on GPU-0 at 10:00:30 (a's hold), an ECC on GPU-0 at 10:02:30 (b's), a node event.
"""

from __future__ import annotations

import datetime as dt
from urllib.parse import quote

import pytest

from gpuledger.dashboards import clock_events, drilldown, links
from gpuledger.dashboards.app import Context, create_app, route
from gpuledger.dashboards.data import DashData
from gpuledger.dashboards.filters import Filters
from gpuledger.dashboards.pages import fleet, fragmentation, tenants, waste
from gpuledger.dashboards.ui import LINK_PREFIX

from builders import at, epoch_us, page_request, write_rows

GIB = 2**30
H100 = "NVIDIA H100 80GB HBM3"
NODE2 = "rack 7/n2"
DAY = Filters(dt.date(2026, 11, 1), dt.date(2026, 11, 2))  # 2 days: native samples
SCOPE_A = Filters(dt.date(2026, 11, 1), dt.date(2026, 11, 2), scope=("a",))


def _sample(ts, gpu, util, *, node="n1", index=0, sm=None, mem_gib=1, power=100.0, temp=40.0, mask=0, **kw):
    return dict(
        ts=ts, cluster="c", node=node, gpu_uuid=gpu, gpu_index=index, model=H100, util_gpu_pct=util,
        sm_active_ratio=sm, mem_used_bytes=mem_gib * GIB, mem_total_bytes=80 * GIB, power_w=power, power_limit_w=700.0,
        temp_c=temp, sm_clock_mhz=1980, mem_clock_mhz=2619, throttle_reasons=mask, source="test", **kw,
    )  # fmt: skip


def _alloc(job, tenant, gpu, start, end, node="n1"):
    return dict(cluster="c", job_id=job, tenant=tenant, namespace=tenant, pod=f"pod-{job}", node=node,
                gpu_model=H100, gpu_uuid=gpu, share=1.0, start=start, end=end, open=False)  # fmt: skip


def put(root, table, rows):
    """`rows` into `table` as a writer puts them: times as the lake's integer microseconds."""
    write_rows(root, table, [{k: epoch_us(v) if isinstance(v, dt.datetime) else v for k, v in r.items()} for r in rows])


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet") / "lake"
    put(root, "gpu_samples", [
        _sample(at(1, 10, 0), "GPU-0", 10.0, sm=0.1, mem_gib=2, power=100.0, temp=50.0, mask=0x1),
        _sample(at(1, 10, 1), "GPU-0", 20.0, sm=0.2, mem_gib=4, power=200.0, temp=70.0, mask=0x0),
        _sample(at(1, 10, 2), "GPU-0", 60.0, sm=0.3, mem_gib=3, power=300.0, temp=85.0, mask=0x24),
        *(_sample(at(1, 10, m), "GPU-1", 0.0, index=1, mask=0x1) for m in range(3)),
        _sample(at(1, 10, 0), "GPU-2", 50.0, index=2),
        _sample(at(1, 10, 0), "MIG-2a", 40.0, index=2, parent_gpu_uuid="GPU-2", mig_profile="1g.10gb"),
        _sample(at(1, 10, 0), "GPU-3", 5.0, node=NODE2),
    ])  # fmt: skip
    five = dict(cluster="c", node="n1", gpu_uuid="GPU-0", model=H100, samples=5, mem_used_bytes_max=4 * GIB)
    put(root, "gpu_5min", [
        five | dict(bucket_start=at(1, 10, 0), util_gpu_pct_mean=30.0, sm_active_ratio_mean=0.2, power_w_mean=200.0,
                    allocated_ratio=1.0),
        five | dict(bucket_start=at(1, 10, 5), util_gpu_pct_mean=0.0, sm_active_ratio_mean=0.0, power_w_mean=60.0,
                    allocated_ratio=0.0),
    ])  # fmt: skip
    hourly = dict(cluster="c", node="n1", gpu_uuid="GPU-0", model=H100, allocated_ratio=0.5)
    put(root, "gpu_hourly", [
        hourly | dict(hour=at(1, 10), samples=60, util_gpu_pct_mean=30.0, power_w_mean=200.0),
        hourly | dict(hour=at(1, 11), samples=20, util_gpu_pct_mean=10.0, power_w_mean=100.0),
        hourly | dict(hour=at(2, 9), samples=60, util_gpu_pct_mean=50.0, power_w_mean=300.0),
        dict(cluster="c", node=NODE2, gpu_uuid="GPU-3", model=H100, hour=at(1, 10), samples=60,
             util_gpu_pct_mean=5.0, allocated_ratio=0.0),
    ])  # fmt: skip
    put(root, "gpu_allocations", [
        _alloc("ja", "a", "GPU-0", at(1, 10, 0), at(1, 10, 1, 30)),
        _alloc("jb", "b", "GPU-0", at(1, 10, 1, 30), at(1, 10, 3)),
        _alloc("jb", "b", "GPU-1", at(1, 9, 0), at(1, 11, 0)),
        _alloc("ja", "a", "MIG-2a", at(1, 9, 0), at(1, 11, 0)),
    ])  # fmt: skip
    put(root, "health_events", [
        dict(ts=at(1, 10, 0, 30), cluster="c", node="n1", gpu_uuid="GPU-0", kind="xid", code=79,
             detail="GPU has fallen off the bus", source="test"),
        dict(ts=at(1, 10, 2, 30), cluster="c", node="n1", gpu_uuid="GPU-0", kind="ecc", code=None,
             detail="uncorrected", source="test"),
        dict(ts=at(1, 10, 1), cluster="c", node="n1", gpu_uuid=None, kind="scrape_error", source="test"),
    ])  # fmt: skip
    put(root, "nodes", [
        dict(cluster="c", node="n1", gpu_model=H100, gpu_count=3, gpu_mem_bytes=80 * GIB, first_seen=at(1),
             last_seen=at(1, 12), source="test"),
        dict(cluster="c", node=NODE2, gpu_model=H100, gpu_count=1, gpu_mem_bytes=80 * GIB, first_seen=at(1),
             last_seen=at(1, 12), source="test"),
    ])  # fmt: skip
    put(root, "job_stats", [
        dict(cluster="c", job_id=j, tenant=t, gpu_model=H100, gpus=1.0, status="succeeded", submitted_at=at(1, 9),
             cost_usd=1.0) for j, t in (("ja", "a"), ("jb", "b"))
    ])  # fmt: skip
    put(root, "cost_daily", [dict(day_start=at(1), cluster="c", tenant="a", gpu_model=H100, gpu_hours=2.0,
                                         cost_usd=6.0)])  # fmt: skip
    fleet_row = dict(cluster="c", gpu_model=H100, gpus=5, allocated_gpus=2.0, busy_gpus=1.0, pending_gpus=0.0,
                     pending_gpus_max=0.0, pending_jobs_max=0, demand_gpus=2.0, energy_kwh=1.0)  # fmt: skip
    # The lake's days (the URL's dates are clamped to them): 2026-07-01 to 2026-11-02.
    put(root, "fleet_hourly", [fleet_row | dict(hour=h) for h in (at(1, 10, month=7), at(1, 10), at(2, 10))])
    return root


@pytest.fixture(scope="module")
def ctx(lake):
    context = Context(DashData(lake))
    yield context
    context.data.close()


def walk(tree):
    """Every component of a layout (components, lists of them, their children)."""
    if isinstance(tree, (list, tuple)):
        for t in tree:
            yield from walk(t)
    elif tree is not None and hasattr(tree, "to_plotly_json"):
        yield tree
        yield from walk(getattr(tree, "children", None))


def by_id(tree, id_):
    found = [c for c in walk(tree) if getattr(c, "id", None) == id_]
    return found[0] if found else None


def text(tree) -> str:
    out = []
    for c in walk(tree):
        kids = getattr(c, "children", None)
        for k in kids if isinstance(kids, list) else [kids]:
            if isinstance(k, (str, int, float)):
                out.append(str(k))
    return " ".join(out)


def grid_rows(tree, table_id) -> list[dict]:
    """A grid's rows as the browser gets them (ui.table), each linked cell written "[text](href)": its text as
    sent and the href the row carries for it (LINK_PREFIX + column)."""
    out = []
    for r in by_id(tree, table_id).rowData:
        row = {k: v for k, v in r.items() if not k.startswith(LINK_PREFIX)}
        for k, href in r.items():
            if k.startswith(LINK_PREFIX) and href is not None:
                col = k.removeprefix(LINK_PREFIX)
                row[col] = f"[{row[col]}]({href})"
        out.append(row)
    return out


def column(tree, table_id, col) -> list:
    return [r[col] for r in grid_rows(tree, table_id)]


# -- clocks event reasons ------------------------------------------------------------------------------------------
def test_clocks_event_reason_bits_decode_to_nvml_names():
    assert clock_events.names(0) == [] and clock_events.names(None) == []
    assert clock_events.names(0x1) == ["GpuIdle"]
    assert clock_events.names(0x24) == ["SwPowerCap", "SwThermalSlowdown"]
    assert clock_events.names(0x1FF) == [
        "GpuIdle", "ApplicationsClocksSetting", "SwPowerCap", "HwSlowdown", "SyncBoost", "SwThermalSlowdown",
        "HwThermalSlowdown", "HwPowerBrakeSlowdown", "DisplayClockSetting",
    ]  # fmt: skip
    assert clock_events.names(0x800) == ["bit 0x800"]


def test_the_simulator_sets_the_bits_nvml_defines():
    from gpuledger.collector.sim.telemetry import GPU_IDLE, SW_POWER_CAP, SW_THERMAL

    assert clock_events.names(GPU_IDLE | SW_POWER_CAP | SW_THERMAL) == ["GpuIdle", "SwPowerCap", "SwThermalSlowdown"]


# -- resolution by range -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "days,table,daily",
    [(1, "gpu_samples", False), (2, "gpu_samples", False), (3, "gpu_5min", False), (14, "gpu_5min", False),
     (15, "gpu_hourly", False), (92, "gpu_hourly", False), (93, "gpu_hourly", True), (365, "gpu_hourly", True)],
)  # fmt: skip
def test_the_range_picks_the_resolution(days, table, daily):
    f = Filters(dt.date(2026, 11, 2) - dt.timedelta(days=days - 1), dt.date(2026, 11, 2))
    assert f.days == days
    res = drilldown.resolution(f)
    assert (res.table, res.daily) == (table, daily)


# -- a GPU ---------------------------------------------------------------------------------------------------------
def test_a_gpu_page_shows_its_samples_means_and_reasons(ctx):
    page = fleet.layout(ctx, DAY, "gpu/GPU-0")
    kpis = {k: by_id(page, k).children for k in ("fl-g-util", "fl-g-sm", "fl-g-mem", "fl-g-power", "fl-g-temp")}
    # util (10 + 20 + 60) / 3 = 30; SM (10 + 20 + 30) / 3 = 20 %; memory peak 4 GiB; power 600 / 3 = 200 W; temp max 85
    assert kpis == {"fl-g-util": "30.0", "fl-g-sm": "20.0", "fl-g-mem": "4.0", "fl-g-power": "200", "fl-g-temp": "85"}
    assert by_id(page, "fl-g-limited").children == "33.3"  # 1 sample of 3 with a reason other than GpuIdle
    reasons = {r["reason"]: (r["bit"], r["samples"], round(r["pct_of_samples"], 1))
               for r in grid_rows(page, "fl-g-throttle")}  # fmt: skip
    assert reasons == {"GpuIdle": ("0x1", 1, 33.3), "SwPowerCap": ("0x4", 1, 33.3),
                       "SwThermalSlowdown": ("0x20", 1, 33.3)}  # fmt: skip
    assert "every sample" in text(by_id(page, "fl-resolution"))
    series = by_id(page, "fl-g-series").figure
    panels = [a.text for a in series.layout.annotations]
    assert panels == ["utilization and SM activity", "memory", "power", "temperature", "clocks"]
    assert list(series.data[0].y) == [10.0, 20.0, 60.0]
    # The pods that held it, with their times, newest first; each job links to its page.
    pods = grid_rows(page, "fl-pods")
    assert [(r["pod"], r["start"], r["end"]) for r in pods] == [
        ("pod-jb", "2026-11-01 10:01", "2026-11-01 10:03"),
        ("pod-ja", "2026-11-01 10:00", "2026-11-01 10:01"),
    ]
    assert pods[1]["job_id"] == "[ja](/fleet/job/c/ja?start=2026-11-01&end=2026-11-02)"
    assert [(r["kind"], r["code"]) for r in grid_rows(page, "fl-events")] == [("ecc", None), ("xid", 79)]


def test_a_longer_range_reads_5_minute_buckets_and_says_what_it_lacks(ctx):
    f = Filters(dt.date(2026, 10, 26), dt.date(2026, 11, 2))  # 8 days
    page = fleet.layout(ctx, f, "gpu/GPU-0")
    note = text(by_id(page, "fl-resolution"))
    assert "5-minute means, from gpu_5min" in note and "temperature" in note and "raw samples only" in note
    native = [c for c in walk(by_id(page, "fl-resolution")) if getattr(c, "href", None)]
    assert native[0].href == "/fleet/gpu/GPU-0?start=2026-11-01&end=2026-11-02"  # the range's last 2 days
    assert by_id(page, "fl-g-temp") is None and by_id(page, "fl-g-throttle") is None
    # Two buckets of 5 samples: (30 x 5 + 0 x 5) / 10 = 15 %
    assert by_id(page, "fl-g-util").children == "15.0"
    panels = [a.text for a in by_id(page, "fl-g-series").figure.layout.annotations]
    assert panels == ["utilization and SM activity", "memory", "power"]  # no temperature, no clocks


def test_a_range_over_a_quarter_sums_hours_into_days(ctx):
    f = Filters(dt.date(2026, 7, 1), dt.date(2026, 11, 2))  # 125 days
    frame, res = drilldown.series(ctx.data, f, gpu_uuid="GPU-0")
    assert res.daily
    # Nov 1: (30 x 60 + 10 x 20) / 80 = 25 %; Nov 2: 50 %. Power (200 x 60 + 100 x 20) / 80 = 175 W.
    assert frame.select("t", "util_gpu_pct", "power_w", "samples").rows() == [
        (at(1), 25.0, 175.0, 80),
        (at(2), 50.0, 300.0, 60),
    ]


def test_a_mig_instance_names_its_parent_and_the_parent_its_instances(ctx):
    parent = fleet.layout(ctx, DAY, "gpu/GPU-2")
    assert [c.children.href for c in by_id(parent, "fl-g-children").children] == [
        "/fleet/gpu/MIG-2a?start=2026-11-01&end=2026-11-02"
    ]
    child = fleet.layout(ctx, DAY, "gpu/MIG-2a")
    assert "1g.10gb" in text(by_id(child, "fl-g-parent"))
    assert by_id(child, "fl-g-parent").children[1].href == "/fleet/gpu/GPU-2?start=2026-11-01&end=2026-11-02"


# -- a node, a cluster, the fleet ----------------------------------------------------------------------------------
def test_a_node_page_lists_its_gpus_with_links_and_one_panel_each(ctx):
    page = fleet.layout(ctx, DAY, "node/c/n1")
    gpus = grid_rows(page, "fl-n-gpus")
    assert [r["gpu_uuid"] for r in gpus] == [
        "[GPU-0](/fleet/gpu/GPU-0?start=2026-11-01&end=2026-11-02)",
        "[GPU-1](/fleet/gpu/GPU-1?start=2026-11-01&end=2026-11-02)",
        "[GPU-2](/fleet/gpu/GPU-2?start=2026-11-01&end=2026-11-02)",
        "[MIG-2a](/fleet/gpu/MIG-2a?start=2026-11-01&end=2026-11-02)",
    ]
    assert [round(r["util_gpu_pct_mean"], 6) for r in gpus] == [30.0, 0.0, 50.0, 40.0]
    assert gpus[3]["parent_gpu_uuid"] == "[GPU-2](/fleet/gpu/GPU-2?start=2026-11-01&end=2026-11-02)"
    fig = by_id(page, "fl-n-util").figure
    assert [a.text for a in fig.layout.annotations] == ["GPU 0", "GPU 1", "GPU 2", "GPU 2 1g.10gb"]
    assert len(fig.data) == 4  # one line per panel, none over another
    assert by_id(page, "fl-n-count").children == "3"
    assert {r["kind"] for r in grid_rows(page, "fl-events")} == {"xid", "ecc", "scrape_error"}


def test_a_node_name_with_a_space_and_a_slash_is_one_segment(ctx):
    href = links.node_href("c", NODE2)
    assert href == "/fleet/node/c/rack%207%2Fn2"
    page = fleet.layout(ctx, DAY, href[len("/fleet/") :])
    assert [r["gpu_uuid"].split("]")[0] for r in grid_rows(page, "fl-n-gpus")] == ["[GPU-3"]
    crumbs = [c.href for c in walk(by_id(page, "fl-crumbs")) if getattr(c, "href", None)]
    assert crumbs[-1] == "/fleet/node/c/rack%207%2Fn2?start=2026-11-01&end=2026-11-02"


def test_the_cluster_page_lists_its_nodes_with_counts_and_use(ctx):
    page = fleet.layout(ctx, DAY, "cluster/c")
    rows = {r["node"]: r for r in grid_rows(page, "fl-c-nodes-table")}
    assert set(rows) == {
        "[n1](/fleet/node/c/n1?start=2026-11-01&end=2026-11-02)",
        "[rack 7/n2](/fleet/node/c/rack%207%2Fn2?start=2026-11-01&end=2026-11-02)",
    }
    n1 = rows["[n1](/fleet/node/c/n1?start=2026-11-01&end=2026-11-02)"]
    # GPU-0's hours on Nov 1-2: samples 60 + 20 + 60, util (30 x 60 + 10 x 20 + 50 x 60) / 140 = 35.7 %
    assert (n1["gpu_count"], n1["gpus_reporting"], n1["util_gpu_pct_mean"], n1["allocated_pct"]) == (
        3,
        1,
        pytest.approx(5000 / 140),
        50.0,
    )
    assert by_id(page, "fl-c-gpus").children == "4"
    # fleet_hourly: 2 of 5 GPUs allocated = 40 %, 1 of 2 busy = 50 %
    assert (by_id(page, "fl-c-allocated").children, by_id(page, "fl-c-busy").children) == ("40.0", "50.0")


def test_the_fleet_page_lists_clusters_with_links(ctx):
    page = fleet.layout(ctx, DAY, "")
    (row,) = grid_rows(page, "fl-clusters")
    assert (row["cluster"], row["nodes"], row["gpus"]) == (
        "[c](/fleet/cluster/c?start=2026-11-01&end=2026-11-02)",
        2,
        4,
    )


def test_a_job_page_links_each_gpu_over_the_days_it_held_it(ctx):
    page = fleet.layout(ctx, Filters(dt.date(2026, 7, 1), dt.date(2026, 11, 2)), "job/c/jb")
    gpus = sorted(grid_rows(page, "fl-j-gpus"), key=lambda r: r["gpu_uuid"])
    assert [r["gpu_uuid"] for r in gpus] == [
        "[GPU-0](/fleet/gpu/GPU-0?start=2026-11-01&end=2026-11-01)",
        "[GPU-1](/fleet/gpu/GPU-1?start=2026-11-01&end=2026-11-01)",
    ]
    assert not [c for c in by_id(page, "fl-j-gpus").columnDefs if c["field"].startswith(LINK_PREFIX)]
    assert [r["job_id"] for r in grid_rows(page, "fl-j-job")] == ["jb"]


# -- links from the other pages ------------------------------------------------------------------------------------
def test_the_tenants_jobs_and_the_waste_jobs_link_to_the_job_page(ctx):
    f = Filters(dt.date(2026, 11, 1), dt.date(2026, 11, 2), tenant="a")
    jobs = grid_rows(tenants.layout(ctx, f), "ten-jobs")
    assert [r["job_id"] for r in jobs] == ["[ja](/fleet/job/c/ja?start=2026-11-01&end=2026-11-02&tenant=a)"]
    # and the job page lists the GPUs it held, each a link (test_a_job_page_links_each_gpu_over_the_days_it_held_it)
    page = fleet.layout(ctx, f, "job/c/ja")
    assert sorted(r["gpu_uuid"].split("]")[0] for r in grid_rows(page, "fl-j-gpus")) == ["[GPU-0", "[MIG-2a"]


def test_node_cells_link_on_the_fragmentation_page():
    f = Filters(dt.date(2026, 11, 1), dt.date(2026, 11, 2))
    from gpuledger.dashboards.ui import table

    t = table(
        "x", __import__("polars").DataFrame({"cluster": ["c"], "node": ["n[1](x)"]}), links={"node": links.to_node(f)}
    )
    grid = by_id(t, "x")
    assert grid.columnDefs[1]["cellRenderer"] == "gpuledgerLink"  # assets/grid.js: the text as text, never markup
    # The text as it is, the href one encoded segment.
    assert grid_rows(t, "x")[0]["node"] == "[n[1](x)](/fleet/node/c/n%5B1%5D%28x%29?start=2026-11-01&end=2026-11-02)"
    assert "links.to_node(f)" in open(fragmentation.__file__).read()
    assert "links.to_job(f)" in open(waste.__file__).read()


# -- tenant scoping ------------------------------------------------------------------------------------------------
def test_a_scoped_viewer_sees_a_gpu_only_while_their_tenant_held_it(ctx):
    page = fleet.layout(ctx, SCOPE_A, "gpu/GPU-0")
    # a held GPU-0 10:00 to 10:01:30: the samples at 10:00 and 10:01 (util 10, 20), not 10:02 (b's)
    assert by_id(page, "fl-g-util").children == "15.0"
    assert list(by_id(page, "fl-g-series").figure.data[0].y) == [10.0, 20.0]
    assert [r["pod"] for r in grid_rows(page, "fl-pods")] == ["pod-ja"]
    assert [r["kind"] for r in grid_rows(page, "fl-events")] == ["xid"]  # b's ECC and the node event are not a's
    assert "pod-jb" not in str(page) and "ecc" not in text(page)


def test_a_gpu_the_scope_never_held_reads_like_one_that_does_not_exist(ctx):
    held_by_b = fleet.layout(ctx, SCOPE_A, "gpu/GPU-1")
    nowhere = fleet.layout(ctx, SCOPE_A, "gpu/GPU-9")
    want = "No such GPU in your tenants' range (2026-11-01 to 2026-11-02)."
    assert by_id(held_by_b, "fl-missing").children == want == by_id(nowhere, "fl-missing").children
    assert text(held_by_b).replace("GPU-1", "GPU-9") == text(nowhere)


def test_a_scoped_node_page_lists_only_the_held_gpus(ctx):
    page = fleet.layout(ctx, SCOPE_A, "node/c/n1")
    assert [r["gpu_uuid"].split("]")[0] for r in grid_rows(page, "fl-n-gpus")] == ["[GPU-0", "[MIG-2a"]
    assert {r["tenant"] for r in grid_rows(page, "fl-pods")} == {"a"}
    assert by_id(page, "fl-n-count") is not None and by_id(page, "fl-n-count").children == "—"  # not the node's size
    other = fleet.layout(ctx, SCOPE_A, "node/c/" + quote(NODE2, safe=""))
    assert by_id(other, "fl-missing").children == "No such node in your tenants' range (2026-11-01 to 2026-11-02)."


def test_scoped_cluster_fleet_and_job_pages(ctx):
    cluster = fleet.layout(ctx, SCOPE_A, "cluster/c")
    rows = grid_rows(cluster, "fl-c-nodes-table")
    # a held GPU-0 for 90 s and MIG-2a for 2 h: 2 GPUs, 2.025 GPU-hours, all on n1
    assert [(r["gpus_held"], round(r["gpu_hours_held"], 6)) for r in rows] == [(2, 2.025)]
    assert "rack 7" not in str(cluster)
    assert (
        by_id(fleet.layout(ctx, SCOPE_A, "job/c/jb"), "fl-missing").children == "No such job among your tenants' jobs."
    )
    assert by_id(fleet.layout(ctx, SCOPE_A, "job/c/ja"), "fl-j-gpus") is not None
    clusters = grid_rows(fleet.layout(ctx, SCOPE_A, ""), "fl-clusters")
    assert [(r["nodes_held"], r["gpus_held"]) for r in clusters] == [(1, 2)]


def test_holds_merge_and_buckets_count_only_when_wholly_inside():
    import polars as pl

    t = lambda m: at(1, 10, m)  # noqa: E731
    held = drilldown.merge(pl.DataFrame({"gpu_uuid": ["g", "g", "g"], "s": [t(0), t(3), t(20)],
                                         "e": [t(3), t(6), t(30)]}))  # fmt: skip
    assert held.rows() == [("g", t(0), t(6)), ("g", t(20), t(30))]
    buckets = pl.DataFrame({"gpu_uuid": ["g"] * 4 + ["h"], "t": [t(0), t(5), t(20), t(25), t(0)]})
    kept = drilldown.inside(buckets, held, dt.timedelta(minutes=5))
    # 10:00-10:05 inside 10:00-10:06; 10:05-10:10 runs past it; 10:20 and 10:25 inside; h was never held
    assert kept["t"].to_list() == [t(0), t(20), t(25)]
    samples = drilldown.inside(buckets, held, dt.timedelta(0))
    assert samples["t"].to_list() == [t(0), t(5), t(20), t(25)]


# -- routing and bad ids -------------------------------------------------------------------------------------------
def test_routes_by_prefix():
    assert route("/fleet") == (fleet, None)
    assert route("/fleet/") == (fleet, "")
    assert route("/fleet/node/c/rack%207%2Fn2") == (fleet, "node/c/rack%207%2Fn2")
    assert route("/fleetx") == (None, None) and route("/nowhere") == (None, None)


@pytest.mark.parametrize(
    "rest,kind",
    [
        ("gpu/GPU-nope", "GPU"),
        ("node/c/nope", "node"),
        ("node/nope/n1", "node"),
        ("cluster/nope", "cluster"),
        ("job/c/nope", "job"),
        ("gpu/%27%3B%20DROP%20TABLE%20gpu_samples%3B--", "GPU"),
        ("gpu/x%00y", "page"),
        ("gpu/" + "a" * 5000, "page"),
        ("node/c", "page"),
        ("what/ever/else", "page"),
        ("gpu/%FF%FE", "GPU"),
    ],
)
def test_ids_that_name_nothing_get_a_page_saying_so(ctx, rest, kind):
    page = fleet.layout(ctx, DAY, rest)
    assert by_id(page, "fl-missing") is not None
    assert f"No such {kind}" in text(page)
    assert len(text(page)) < 1000  # a 5,000-character id is quoted cut short


def test_the_app_routes_fleet_urls_and_hostile_ones_render(lake):
    app = create_app(lake)
    client = app.server.test_client()
    for path in ["/fleet", "/fleet/cluster/c", "/fleet/node/c/n1", "/fleet/gpu/GPU-0", "/fleet/job/c/ja",
                 "/fleet/gpu/%00", "/fleet/node/c/%22%3E%3Cscript%3E", "/fleet/" + "x/" * 3000]:  # fmt: skip
        r = client.post("/_dash-update-component", json=page_request(path, "?start=2026-11-01&end=2026-11-02"))
        assert r.status_code == 200, (path, r.data[:300])
        content = r.json["response"]["page"]["children"]["props"]["children"]
        assert content[0]["props"]["children"] == "Fleet"
