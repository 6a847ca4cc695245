"""Cost, by hand: a job across midnight, a rate change at midnight, a fractional and a MIG job, a tenant with two
namespaces, idle capacity shared back three ways, the max(request, usage) method, and a model with no rate.

cost_daily regroups cost_allocation's rows (one pricing, one idle time), so each case runs both."""

import datetime as dt

import polars as pl
import pytest

from gpuledger.analytics.cost import cost_daily
from gpuledger.analytics.cost_allocation import cost_allocation
from gpuledger.config import Rate, match_model

from builders import H100, allocation, allocations, at

RATES = [Rate("H100", 2.0, dt.date(2026, 1, 1)), Rate("H100", 3.0, dt.date(2026, 11, 2))]  # +$1 from Nov 2

# A: vision, 1 GPU, Nov 1 22:00 -> Nov 2 02:00 (crosses midnight and the rate change)
# B: nlp, half a GPU, Nov 2 10:00 -> 12:00
# C: vision (its second namespace), a 1g MIG slice (1/7) of G2, Nov 2 05:00 -> 12:00
A = allocation("A", "vision", "G1", 1.0, at(1, 22), at(2, 2), namespace="vision-train")
B = allocation("B", "nlp", "G2", 0.5, at(2, 10), at(2, 12))
C = allocation("C", "vision", "MIG-1", 1 / 7, at(2, 5), at(2, 12), namespace="vision-dev")
ALLOCS = allocations(A, B, C)


def hourly(days=(1, 2), busy=None):
    """Two H100s (G1, G2; MIG-1 a slice of G2) reporting every hour of `days`: 48 GPU-hours a day."""
    busy = busy or {}
    rows = [
        dict(
            cluster="c",
            node="n1",
            gpu_uuid=g,
            parent_gpu_uuid=p,
            hour=at(d, h),
            model=H100,
            busy_ratio=busy.get((g, h)),
        )
        for d in days
        for h in range(24)
        for g, p in (("G1", None), ("G2", None), ("MIG-1", "G2"))
    ]
    return pl.LazyFrame(rows, schema_overrides={"hour": pl.Datetime("us", "UTC"), "busy_ratio": pl.Float64})


CAPACITY = hourly()
PERIOD = (at(1), at(3))


def daily(a, cap, rates, start, end, idle_policy, platform_tenant=None, method="request"):
    return cost_daily(cost_allocation(a, cap, rates, start, end, method), idle_policy, platform_tenant)


def rows(df):
    return {(r["date"].day, r["tenant"]): r for r in df.iter_rows(named=True)}


def test_request_method_split_at_midnight_with_the_rate_of_each_day():
    out, unpriced = daily(ALLOCS, CAPACITY, RATES, *PERIOD, idle_policy="none")
    r = rows(out)
    assert unpriced == []
    assert r[(1, "vision")]["gpu_hours"] == pytest.approx(2.0) and r[(1, "vision")]["cost_usd"] == pytest.approx(4.0)
    # Nov 2, vision: A's 2 h at $3 = 6, plus C's 1/7 GPU x 7 h = 1 GPU-hour at $3 = 3 (two namespaces, one tenant)
    assert r[(2, "vision")]["gpu_hours"] == pytest.approx(3.0) and r[(2, "vision")]["cost_usd"] == pytest.approx(9.0)
    assert r[(2, "nlp")]["gpu_hours"] == pytest.approx(1.0) and r[(2, "nlp")]["cost_usd"] == pytest.approx(3.0)
    # Idle, policy none: Nov 1: 48 - 2 = 46 h at $2 = 92; Nov 2: 48 - 4 = 44 h at $3 = 132, on a tenant-less line
    assert r[(1, None)]["idle_share_usd"] == pytest.approx(92.0)
    assert r[(2, None)]["idle_share_usd"] == pytest.approx(132.0)


def test_idle_shared_back_in_proportion_to_cost():
    out, _ = daily(ALLOCS, CAPACITY, RATES, *PERIOD, idle_policy="proportional")
    r = rows(out)
    assert r[(1, "vision")]["idle_share_usd"] == pytest.approx(92.0)  # the only tenant on Nov 1
    # Nov 2: 132 split by cost 9 : 3 -> vision 99, nlp 33
    assert r[(2, "vision")]["idle_share_usd"] == pytest.approx(99.0)
    assert r[(2, "nlp")]["idle_share_usd"] == pytest.approx(33.0)
    assert (1, None) not in r and (2, None) not in r
    total = out["cost_usd"].sum() + out["idle_share_usd"].sum()
    assert total == pytest.approx(48 * 2.0 + 48 * 3.0)  # everything the fleet cost, no more, no less


def test_idle_to_the_platform_tenant():
    out, _ = daily(ALLOCS, CAPACITY, RATES, *PERIOD, idle_policy="platform", platform_tenant="platform")
    r = rows(out)
    assert r[(1, "platform")]["idle_share_usd"] == pytest.approx(92.0)
    assert r[(2, "platform")]["idle_share_usd"] == pytest.approx(132.0)
    assert r[(2, "vision")]["idle_share_usd"] == 0.0


def test_report_period_clips_intervals():
    out, _ = daily(ALLOCS, CAPACITY, RATES, at(2, 0), at(2, 1), idle_policy="none")
    (vision,) = [x for x in out.iter_rows(named=True) if x["tenant"] == "vision"]
    assert vision["gpu_hours"] == pytest.approx(1.0) and vision["cost_usd"] == pytest.approx(3.0)  # 00:00-01:00 of A


def test_max_method_charges_use_above_the_request():
    # B holds half of G2 alone and kept it 80% busy from 10:00 to 11:00, 20% from 11:00 to 12:00:
    # hour 1: max(0.5, 0.8) = 0.8; hour 2: max(0.5, 0.2) = 0.5 -> 1.3 GPU-hours at $3 = 3.9
    usage = hourly(busy={("G2", 10): 0.8, ("G2", 11): 0.2})
    out, _ = daily(ALLOCS, usage, RATES, *PERIOD, idle_policy="none", method="max")
    nlp = rows(out)[(2, "nlp")]
    assert nlp["gpu_hours"] == pytest.approx(1.3) and nlp["cost_usd"] == pytest.approx(3.9)


def test_a_model_without_a_rate_is_reported_not_free():
    # The GPUs' model is the one telemetry reports (as in cost_allocation), so the T4 is the fleet's.
    a = ALLOCS.with_columns(pl.lit("Tesla T4").alias("gpu_model"))
    cap = CAPACITY.with_columns(pl.lit("Tesla T4").alias("model"))
    out, unpriced = daily(a, cap, RATES, *PERIOD, idle_policy="none")
    assert unpriced == ["Tesla T4"]
    t4 = out.filter(pl.col("gpu_model") == "Tesla T4")
    jobs, idle = t4.filter(pl.col("tenant").is_not_null()), t4.filter(pl.col("tenant").is_null())
    assert jobs.height == 3 and jobs["cost_usd"].null_count() == 3  # null, never 0
    assert idle.height == 2 and idle["idle_share_usd"].null_count() == 2


@pytest.mark.parametrize(
    "model,keys,want",
    [
        ("NVIDIA H100 80GB HBM3", ["H100", "NVIDIA H100 80GB HBM3"], "NVIDIA H100 80GB HBM3"),  # exact wins
        ("NVIDIA H100 80GB HBM3", ["H100", "H200"], "H100"),
        ("NVIDIA H100 80GB HBM3", ["H100", "H100 80GB"], "H100 80GB"),  # the most specific
        ("NVIDIA A100-SXM4-80GB", ["A100"], "A100"),
        ("NVIDIA H100 80GB HBM3", ["H10"], None),  # whole words only
    ],
)
def test_rate_card_model_matching(model, keys, want):
    assert match_model(model, keys) == want


def test_energy_split_by_share_and_priced():
    from gpuledger.analytics.cost import energy_daily
    from gpuledger.analytics.waste import allocation_hours

    # B holds half of G2 10:00-12:00; G2 used 600 Wh in the 10:00 hour and 400 Wh in the 11:00 hour:
    # B's energy = 0.5 x 600 + 0.5 x 400 = 500 Wh = 0.5 kWh, at $0.20/kWh = $0.10
    # The job says "H100"; the row takes the model telemetry reports for G2, as cost_daily's rows do.
    energy = pl.LazyFrame(
        {"gpu_uuid": ["G2", "G2"], "hour": [at(2, 10), at(2, 11)], "energy_wh": [600.0, 400.0], "model": [H100] * 2},
        schema_overrides={"hour": pl.Datetime("us", "UTC")},
    )
    a = ALLOCS.with_columns(pl.lit("c").alias("cluster"), pl.lit("H100").alias("gpu_model"))
    e = energy_daily(allocation_hours(a), energy, 0.20).collect()
    (row,) = e.iter_rows(named=True)
    assert (row["tenant"], row["gpu_model"], row["energy_kwh"], row["energy_usd"]) == (
        "nlp",
        H100,
        pytest.approx(0.5),
        pytest.approx(0.1),
    )


def test_rate_change_mid_day():
    # $2 until Nov 2 12:00 UTC, then $5. B holds half of G2 10:00-12:00 (all at $2): 0.5 x 2 h x 2 = 2.0.
    # D holds G3 whole 11:00-13:00: 1 h at $2 + 1 h at $5 = 7.0. G3 never reported: it is charged, not idle.
    rates = [Rate("H100", 2.0, dt.date(2026, 1, 1)), Rate("H100", 5.0, at(2, 12))]
    a = allocations(B, allocation("D", "vision", "G3", 1.0, at(2, 11), at(2, 13), namespace="vision-train"))
    cap = hourly(days=(2,))
    out, unpriced = daily(a, cap, rates, at(2), at(3), idle_policy="none")
    r = rows(out)
    assert unpriced == []
    assert r[(2, "nlp")]["cost_usd"] == pytest.approx(2.0)
    assert r[(2, "vision")]["cost_usd"] == pytest.approx(7.0)
    # Idle, priced in the period it was idle: G1 12 h x $2 + 12 h x $5 = 84; G2 (12 - 1) h x $2 + 12 h x $5 = 82.
    assert r[(2, None)]["idle_share_usd"] == pytest.approx(84 + 82)


def test_time_before_the_first_rate_is_unpriced():
    rates = [Rate("H100", 5.0, at(2, 12))]  # the model has a price only from noon
    out, unpriced = daily(ALLOCS, CAPACITY, rates, *PERIOD, idle_policy="none")
    assert unpriced == [H100]
    assert out.filter(pl.col("tenant") == "nlp")["cost_usd"].to_list() == [None]  # 10:00-12:00: no price yet
