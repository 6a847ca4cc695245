"""Split cost allocation by hand: charge periods cut at midnight and at a mid-day rate change, a job across midnight,
a half-GPU job across the rate change, a MIG slice on its parent GPU, a job on an unknown GPU, a GPU charged while
silent, the max(request, usage) method; and agreement with cost_daily on a simulated lake."""

import polars as pl
import pytest

from gpuledger.analytics.cost_allocation import charge_periods, cost_allocation
from gpuledger.config import Rate
from gpuledger.lake import scan
from gpuledger.query import Lake

from builders import H100, at
from finops.split_case import ALLOCS, RATES, START, STOP, hourly


def by_key(df):
    return {(r["gpu_uuid"], r["period_start"], r["job_id"]): r for r in df.iter_rows(named=True)}


def test_charge_periods_cut_at_midnight_and_at_the_rate_change():
    p = charge_periods([H100, None], RATES, START, STOP)
    h100 = p.filter(pl.col("gpu_model") == H100)
    assert h100.select("period_start", "period_end", "usd_per_gpu_hour").rows() == [
        (at(1, 0), at(2, 0), 2.0),
        (at(2, 0), at(2, 12), 2.0),
        (at(2, 12), STOP, 5.0),
    ]
    assert h100["rate_model"].unique().to_list() == ["H100"]
    # A job with no model keeps its days, unpriced.
    none = p.filter(pl.col("gpu_model").is_null())
    assert none["period_start"].to_list() == [at(1, 0), at(2, 0)] and none["usd_per_gpu_hour"].null_count() == 2


def test_request_method_by_hand():
    out = cost_allocation(ALLOCS, hourly(), RATES, START, STOP, "request")
    r = by_key(out)
    am, pm = at(2, 0), at(2, 12)
    # G1, Nov 1: silent, but A held it 22:00-24:00: origin = max(0 reported, 2 charged) = 2 h, at $2; idle 0.
    assert r[("G1", at(1, 0), "A")]["gpu_hours"] == pytest.approx(2.0)
    assert r[("G1", at(1, 0), "A")]["cost_usd"] == pytest.approx(4.0)
    assert r[("G1", at(1, 0), None)]["gpu_hours"] == pytest.approx(0.0)
    assert r[("G1", at(1, 0), "A")]["origin_gpu_hours"] == pytest.approx(2.0)
    # G1, Nov 2 00-12 ($2): reported 12 h; A 2 h ($4), B half x 2 h = 1 h ($2), idle 12 - 3 = 9 h ($18).
    assert r[("G1", am, "A")]["cost_usd"] == pytest.approx(4.0)
    assert r[("G1", am, "B")]["gpu_hours"] == pytest.approx(1.0) and r[("G1", am, "B")]["cost_usd"] == pytest.approx(
        2.0
    )
    assert r[("G1", am, None)]["gpu_hours"] == pytest.approx(9.0) and r[("G1", am, None)]["cost_usd"] == pytest.approx(
        18.0
    )
    # G1, Nov 2 12-24 ($5): B half x 2 h = 1 h ($5), idle 11 h ($55).
    assert r[("G1", pm, "B")]["cost_usd"] == pytest.approx(5.0)
    assert r[("G1", pm, None)]["gpu_hours"] == pytest.approx(11.0) and r[("G1", pm, None)]["cost_usd"] == pytest.approx(
        55.0
    )
    # G2 carries its slice: C = 1/7 x 7 h = 1 h ($2) on G2, slice MIG-1; idle 11 h then 12 h.
    c = r[("G2", am, "C")]
    assert c["gpu_hours"] == pytest.approx(1.0) and c["cost_usd"] == pytest.approx(2.0) and c["slice_uuid"] == "MIG-1"
    assert r[("G2", am, None)]["gpu_hours"] == pytest.approx(11.0)
    assert r[("G2", pm, None)]["cost_usd"] == pytest.approx(60.0)
    assert ("MIG-1", am, None) not in r  # a slice is not a GPU of its own
    # D: no GPU to split from: its own row, no origin.
    d = r[(None, am, "D")]
    assert d["cost_usd"] == pytest.approx(2.0) and d["origin_gpu_hours"] is None
    # Every origin's rows add up to it; and everything is what the fleet cost: G1 4+24+60, G2 24+60, D 2.
    per_origin = (
        out.filter(pl.col("gpu_uuid").is_not_null())
        .group_by("gpu_uuid", "period_start")
        .agg(pl.col("gpu_hours").sum(), pl.col("origin_gpu_hours").first())
    )
    assert per_origin["gpu_hours"].to_list() == pytest.approx(per_origin["origin_gpu_hours"].to_list())
    assert out["cost_usd"].sum() == pytest.approx(88 + 84 + 2)
    assert set(out["method"]) == {"request"}


def test_max_method_charges_what_a_share_used_above_its_request():
    # G1 busy 80% at 10:00 and 11:00, 20% at 12:00 and 13:00; B holds half of it alone: max(0.5, 0.8) = 0.8 GPU for
    # the two morning hours (1.6 h at $2 = 3.2), then max(0.5, 0.2) = 0.5 for the afternoon ones (1.0 h at $5 = 5).
    busy = {("G1", 10): 0.8, ("G1", 11): 0.8, ("G1", 12): 0.2, ("G1", 13): 0.2}
    r = by_key(cost_allocation(ALLOCS, hourly(busy), RATES, START, STOP, "max"))
    am, pm = at(2, 0), at(2, 12)
    assert r[("G1", am, "B")]["gpu_hours"] == pytest.approx(1.6) and r[("G1", am, "B")]["cost_usd"] == pytest.approx(
        3.2
    )
    assert r[("G1", pm, "B")]["cost_usd"] == pytest.approx(5.0)
    assert r[("G1", am, "A")]["gpu_hours"] == pytest.approx(2.0)  # a whole GPU is never below its use
    assert r[("G1", am, None)]["gpu_hours"] == pytest.approx(12 - 2 - 1.6)


def test_unpriced_model_is_null_never_zero():
    out = cost_allocation(ALLOCS, hourly(), [Rate("A100", 1.0, START)], START, STOP)
    assert out["cost_usd"].null_count() == out.height and out["usd_per_gpu_hour"].null_count() == out.height


def test_bad_method_is_refused():
    with pytest.raises(ValueError, match="method must be request or max"):
        cost_allocation(ALLOCS, hourly(), RATES, START, STOP, "median")


def test_on_a_simulated_lake_jobs_cost_what_cost_daily_says_and_all_rows_what_the_fleet_cost(analysed_lake):
    analysed = analysed_lake
    with Lake(analysed) as q:
        jobs = q.execute(
            "SELECT tenant, CAST(period_start AS DATE) AS day, sum(cost_usd) AS usd FROM cost_allocation "
            "WHERE job_id IS NOT NULL GROUP BY ALL ORDER BY ALL"
        ).frame
        daily = q.execute(
            "SELECT tenant, CAST(day_start AS DATE) AS day, sum(cost_usd) AS usd FROM cost_daily "
            "WHERE tenant IS NOT NULL GROUP BY ALL ORDER BY ALL"
        ).frame
        ((alloc_total, daily_total),) = q.execute(
            "SELECT (SELECT sum(cost_usd) FROM cost_allocation), "
            "(SELECT sum(cost_usd + idle_share_usd) FROM cost_daily)"
        ).rows
        per_job = q.execute(
            "SELECT j.job_id, j.cost_usd AS a, sum(c.cost_usd) AS b FROM job_stats j "
            "JOIN cost_allocation c USING (cluster, job_id) GROUP BY ALL"
        ).frame
    assert jobs.height == daily.height > 0
    assert jobs.select("tenant", "day").rows() == daily.select("tenant", "day").rows()
    assert jobs["usd"].to_list() == pytest.approx(daily["usd"].to_list(), rel=1e-9)
    assert alloc_total == pytest.approx(daily_total, rel=1e-9) and alloc_total > 0
    assert per_job.height > 0 and per_job["a"].to_list() == pytest.approx(per_job["b"].to_list())
    # job_stats' use figures, from job_hourly: efficiency = busy / allocated over the hours the GPUs reported in.
    jh = (
        scan(analysed, "job_hourly")
        .group_by("job_id")
        .agg(
            pl.col("busy_gpu_hours").sum().alias("busy"),
            pl.col("allocated_gpu_hours").filter(pl.col("measured")).sum().alias("measured_h"),
        )
        .filter(pl.col("measured_h") > 0)
        .collect()
    )
    js = scan(analysed, "job_stats").select("job_id", "efficiency", "busy_gpu_hours").collect().join(jh, on="job_id")
    assert js.height > 10
    assert js["busy_gpu_hours"].to_list() == pytest.approx(js["busy"].to_list())
    assert js["efficiency"].to_list() == pytest.approx((js["busy"] / js["measured_h"]).to_list())
    assert ((js["efficiency"] >= 0) & (js["efficiency"] <= 1)).all()


def test_exact_quantities_give_the_rounding_remainder_to_the_idle_row():
    from decimal import Decimal

    from gpuledger.analytics.cost_allocation import exact_quantities

    t = at(2)
    rows = pl.DataFrame(
        {
            "cluster": ["c"] * 5,
            "gpu_uuid": ["G", "G", "G", "G", None],
            "period_start": [t] * 5,
            "job_id": ["a", "b", "c", None, "d"],
            "origin_gpu_hours": [1.0, 1.0, 1.0, 1.0, None],
            "gpu_hours": [1 / 3, 1 / 3, 1 / 3, 1 - 3 * (1 / 3), 0.25],
        }
    )
    out = exact_quantities(rows)
    third = Decimal("0.333333333")
    assert out["charge_gpu_hours"].to_list() == [third, third, third, Decimal("0.000000001"), Decimal("0.25")]
    assert out["origin_charge_gpu_hours"].to_list() == [Decimal(1)] * 4 + [None]
    assert out["charge_gpu_hours"][:4].sum() == Decimal(1)  # exactly, no tolerance
