"""The waste page's "Reclaimed" section: reclaim_savings per tenant and month, scoped as every page, and what a
stricter idle rule would have freed (the capacity what-if's rule, analytics/whatif.py)."""

from __future__ import annotations

import datetime as dt

import polars as pl

from gpuledger.analytics.whatif import idle_rule_freed
from gpuledger.dashboards.app import Context
from gpuledger.dashboards.data import DashData
from gpuledger.dashboards.filters import Filters
from gpuledger.dashboards.pages import waste

from builders import epoch_us, write_rows

UTC = dt.timezone.utc


def action(tenant, action, result, day, gpus, month=11):
    ts = dt.datetime(2026, month, day, 12, tzinfo=UTC)
    return dict(
        ts=epoch_us(ts),
        cluster="c",
        actor="ops",
        action=action,
        job_id=f"{tenant}-{day}-{action}",
        tenant=tenant,
        result=result,
        gpus=gpus,
        gpu_hours_freed_per_day=gpus * 24,
        usd_per_day=gpus * 24 * 2.49,
    )


def test_reclaimed_per_tenant_and_month_within_the_viewers_scope(tmp_path):
    lake = tmp_path / "lake"
    write_rows(
        lake,
        "reclaim_actions",
        [
            action("vision", "suspend", "ok", 3, 2.0),
            action("vision", "delete", "ok", 9, 1.0),
            action("vision", "warn", "ok", 2, 2.0),  # a warning frees nothing
            action("nlp", "deactivate", "403 Forbidden", 4, 8.0),  # refused: nothing freed
            action("nlp", "deactivate", "ok", 5, 4.0),
            action("vision", "suspend", "ok", 20, 1.0, month=10),  # October: outside a November range
        ],
    )
    data = DashData(lake)
    try:
        nov = Filters(dt.date(2026, 11, 1), dt.date(2026, 11, 30))
        got = waste.reclaimed(data, nov).select("tenant", "actions", "gpus", "gpu_hours_freed_per_day").rows()
        # vision: 2 + 1 GPUs = 72 GPU-h a day; nlp: 4 GPUs = 96
        assert got == [("nlp", 1, 4.0, 96.0), ("vision", 2, 3.0, 72.0)]
        mine = Filters(dt.date(2026, 11, 1), dt.date(2026, 11, 30), scope=("vision",))
        assert waste.reclaimed(data, mine)["tenant"].to_list() == ["vision"]
        usd = waste.reclaimed(data, mine)["usd_per_day"].item()
        assert abs(usd - 72 * 2.49) < 1e-9
        octo = Filters(dt.date(2026, 10, 15), dt.date(2026, 11, 30))  # touches October: its month too
        assert sorted(waste.reclaimed(data, octo)["month"].to_list()) == [
            dt.date(2026, 10, 1),
            dt.date(2026, 11, 1),
            dt.date(2026, 11, 1),
        ]
    finally:
        data.close()


def test_the_page_shows_both_on_the_analysed_lake(dash_lake):
    ctx = Context(DashData(dash_lake), idle_rule=idle_rule_freed)
    try:
        b = ctx.data.bounds()
        f = Filters(b[0], b[1])
        assert waste.reclaimed(ctx.data, f) is None  # no reclaim yet
        rules = waste.stricter(ctx, f)
        assert rules.columns == ["idle_after_h", "tenant", "jobs", "freed_gpu_hours"]
        # a stricter rule frees at least as much: 0.5 h >= 1 h >= 2 h, summed over tenants
        per_rule = dict(rules.group_by("idle_after_h").agg(pl.col("freed_gpu_hours").sum()).rows())
        assert per_rule[0.5] >= per_rule.get(1.0, 0) >= per_rule.get(2.0, 0) and per_rule[0.5] > 0
        ids = [c.id for c in _walk(waste.layout(ctx, f)) if getattr(c, "id", None)]
        assert "ws-stricter" in ids
    finally:
        ctx.data.close()


def _walk(tree):
    if isinstance(tree, (list, tuple)):
        for t in tree:
            yield from _walk(t)
    elif tree is not None and hasattr(tree, "to_plotly_json"):
        yield tree
        yield from _walk(getattr(tree, "children", None))
