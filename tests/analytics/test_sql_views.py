"""SQL views over the analytics tables agree with the polars functions they mirror, on a simulated lake."""

import datetime as dt
import shutil

import polars as pl
import pytest

from gpuledger.analytics.jobs import job_stats
from gpuledger.analytics.queue_time import queue_stats
from gpuledger.analytics.runner import run
from gpuledger.lake import scan
from gpuledger.query import Lake

from builders import END


@pytest.fixture(scope="module")
def analysed(small_lake, tmp_path_factory):
    lake = tmp_path_factory.mktemp("views") / "lake"
    shutil.copytree(small_lake, lake)
    run(lake, until_s=END)
    return lake


def test_queue_stats_view_is_the_sql_twin_of_queue_stats(analysed):
    now = dt.datetime.fromtimestamp(END, dt.timezone.utc)
    want = queue_stats(job_stats(scan(analysed, "jobs"), now), ("tenant", "gpu_model", "size_bucket")).collect()
    with Lake(analysed) as q:
        got = q.execute("SELECT * FROM queue_stats").frame
    cols = ["tenant", "gpu_model", "size_bucket"]
    a = want.sort(cols)
    b = got.sort(cols)
    assert a.height == b.height > 0
    for c in ("jobs", "wait_mean_s", "wait_p50_s", "wait_p90_s", "wait_p99_s", "wait_max_s"):
        assert b[c].to_list() == pytest.approx(a[c].to_list()), c


def test_tenant_daily_adds_up_to_its_sources(analysed):
    with Lake(analysed) as q:
        td = q.execute(
            "SELECT tenant, sum(gpu_hours) AS h, sum(busy_gpu_hours) AS busy, "
            "sum(idle_allocated_gpu_hours) AS idle, sum(cost_usd) AS cost FROM tenant_daily "
            "WHERE tenant IS NOT NULL GROUP BY tenant ORDER BY tenant"
        ).frame
    cost = (
        scan(analysed, "cost_daily")
        .filter(pl.col("tenant").is_not_null())
        .group_by("tenant")
        .agg(pl.col("gpu_hours").sum(), pl.col("cost_usd").sum())
        .sort("tenant")
        .collect()
    )
    use = (
        scan(analysed, "job_hourly")
        .group_by("tenant")
        .agg(pl.col("busy_gpu_hours").sum(), pl.col("idle_gpu_hours").sum())
        .sort("tenant")
        .collect()
    )
    assert td["tenant"].to_list() == cost["tenant"].to_list()
    assert td["h"].to_list() == pytest.approx(cost["gpu_hours"].to_list())
    assert td["cost"].to_list() == pytest.approx(cost["cost_usd"].to_list())
    assert td["busy"].to_list() == pytest.approx(use["busy_gpu_hours"].to_list())
    assert td["idle"].to_list() == pytest.approx(use["idle_gpu_hours"].to_list())
    assert (td["busy"] <= td["h"] + 1e-9).all()  # busy GPU-hours never exceed charged ones


def test_views_work_on_an_empty_lake(tmp_path):
    with Lake(tmp_path) as q:
        assert q.execute("SELECT count(*) FROM tenant_daily").rows == [(0,)]
        assert q.execute("SELECT count(*) FROM queue_stats").rows == [(0,)]


def test_chargeback_monthly_against_budgets(analysed):
    from gpuledger.config import DEFAULT_TENANTS

    budgets = {t.name: t.budget_usd_per_month for t in DEFAULT_TENANTS}
    with Lake(analysed) as q:
        frame = q.execute("SELECT * FROM chargeback_monthly").frame
        (n,) = q.execute("SELECT count(*) FROM tenants").rows[0]
    cb = {(r["tenant"], r["month"]): r for r in frame.iter_rows(named=True)}
    assert n == len(DEFAULT_TENANTS)  # the latest snapshot only, one row per tenant
    # Jobs already running when the simulated day began were bound in October, so two months appear.
    month = pl.col("day_start").dt.truncate("1mo").dt.date().alias("month")
    cost = (
        scan(analysed, "cost_daily")
        .filter(pl.col("tenant").is_not_null())
        .group_by("tenant", month)
        .agg((pl.col("cost_usd") + pl.col("idle_share_usd")).sum().alias("total"))
        .collect()
    )
    assert set(cb) == {(t, m) for t, m, _ in cost.iter_rows()}
    for tenant, m, total in cost.iter_rows():
        row = cb[(tenant, m)]
        assert row["total_usd"] == pytest.approx(total)
        assert row["budget_usd"] == budgets[tenant]
        if budgets[tenant] is None:
            assert row["budget_used_pct"] is None  # platform has no budget
        else:
            assert row["budget_used_pct"] == pytest.approx(100 * total / budgets[tenant])
