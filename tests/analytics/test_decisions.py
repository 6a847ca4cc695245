"""Decision inputs by hand: quotas per model and "*", budget this month, decayed usage and fair share."""

import datetime as dt

import polars as pl
import pytest

from gpuledger.analytics.decisions import decayed_usage, decisions, fairshare
from gpuledger.config import Tenant

from builders import at

NOW = at(20, 12)
H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
A100_40, L40S = "NVIDIA A100-SXM4-40GB", "NVIDIA L40S"
TENANTS = (
    Tenant("vision", ("vision",), 3.0, {H100: 8, "*": 12}, 1000.0),
    Tenant("nlp", ("nlp",), 1.0, {"*": 4}, None, 500.0),
)
# vision: 10 GPU-hours in the hour whose middle is 24 h ago (one half-life: counts 5);
# nlp: 10 GPU-hours whose middle is 48 h ago (two half-lives: counts 2.5).
HOURS = pl.LazyFrame(
    {
        "tenant": ["vision", "nlp"],
        "hour": [NOW - dt.timedelta(hours=24.5), NOW - dt.timedelta(hours=48.5)],
        "gpu_hours": [10.0, 10.0],
    },
    schema_overrides={"hour": pl.Datetime("us", "UTC")},
)


def test_decayed_usage_and_fairshare():
    u = decayed_usage(HOURS, NOW, half_life_h=24).collect().sort("tenant")
    assert dict(zip(u["tenant"], u["usage_decayed"], strict=True)) == pytest.approx({"nlp": 2.5, "vision": 5.0})
    f = {r["tenant"]: r for r in fairshare(u, TENANTS).iter_rows(named=True)}
    # vision: U = 5 / 7.5 = 2/3, S = 3/4 -> F = 2^(-8/9); nlp: U = 1/3, S = 1/4 -> F = 2^(-4/3)
    assert f["vision"]["fairshare"] == pytest.approx(2 ** (-8 / 9))
    assert f["nlp"]["fairshare"] == pytest.approx(2 ** (-4 / 3))
    assert fairshare(u.clear(), TENANTS)["fairshare"].to_list() == [1.0, 1.0]  # nobody used anything


def test_quota_headroom_budget_and_idle():
    allocs = pl.DataFrame(
        {
            "tenant": ["vision"] * 4 + ["nlp"],
            "gpu_model": [H100, H100, H100, A100, H100],
            "share": [2.0, 2.0, 2.0, 2.0, 1.5],
        }
    )
    spent = pl.DataFrame({"tenant": ["vision", "nlp"], "usd": [250.0, 90.0], "gpu_h": [80.0, 410.0]})
    idle = pl.DataFrame({"tenant": ["vision"], "gpu_model": [H100], "idle_gpus": [2.0]})
    usage = decayed_usage(HOURS, NOW, 24).collect()
    d = {
        (r["tenant"], r["gpu_model"]): r
        for r in decisions(allocs, spent, usage, idle, TENANTS, NOW, [H100, A100]).iter_rows(named=True)
    }
    assert set(d) == {("vision", H100), ("vision", A100), ("vision", None), ("nlp", H100), ("nlp", None)}
    h = d[("vision", H100)]
    assert (h["allocated_gpus"], h["quota_gpus"], h["headroom_gpus"]) == (6.0, 8.0, 2.0)  # its own H100 quota
    a = d[("vision", A100)]
    assert (a["allocated_gpus"], a["quota_gpus"], a["headroom_gpus"]) == (2.0, 12.0, 4.0)  # "*" caps all 8 held
    v = d[("vision", None)]
    assert (v["allocated_gpus"], v["headroom_gpus"], v["idle_gpus_now"]) == (8.0, 4.0, 2.0)
    assert (v["budget_left_usd"], v["budget_used_pct"]) == (750.0, 25.0)
    n = d[("nlp", None)]
    assert (n["headroom_gpus"], n["budget_usd"], n["budget_left_usd"]) == (2.5, None, None)  # 4 - 1.5; no USD budget
    assert (n["budget_gpu_h"], n["spent_gpu_h"]) == (500.0, 410.0)  # its GPU-hour budget
    assert (v["budget_gpu_h"], v["spent_gpu_h"]) == (None, 80.0)
    assert n["fairshare"] == pytest.approx(2 ** (-4 / 3))


def test_quota_keys_name_models_as_the_rate_card_does():
    """`H100` is the quota of the lake's "NVIDIA H100 80GB HBM3" (its row carries it; no row is named "H100"),
    `A100` of each A100 model, also one nobody holds; `NVIDIA A100-SXM4-40GB`, the longer key, wins for its own."""
    tenants = (Tenant("vision", ("vision",), 1.0, {"H100": 1, "A100": 6, A100_40: 2, "*": 10}),)
    allocs = pl.DataFrame({"tenant": ["vision"] * 3, "gpu_model": [H100, H100, L40S], "share": [2.0, 1.0, 4.0]})
    spent = pl.DataFrame({"tenant": ["vision"], "usd": [0.0], "gpu_h": [0.0]})
    usage = pl.DataFrame({"tenant": ["vision"], "usage_decayed": [0.0]})
    idle = pl.DataFrame(schema={"tenant": pl.String, "gpu_model": pl.String, "idle_gpus": pl.Float64})
    out = decisions(allocs, spent, usage, idle, tenants, NOW, [H100, A100, A100_40, L40S])
    d = {r["gpu_model"]: (r["allocated_gpus"], r["quota_gpus"], r["headroom_gpus"]) for r in out.iter_rows(named=True)}
    assert d == {
        H100: (3.0, 1.0, -2.0),  # 2 + 1 held against its own quota of 1
        A100: (0.0, 6.0, 6.0),
        A100_40: (0.0, 2.0, 2.0),
        L40S: (4.0, 10.0, 3.0),  # "*" caps all 7 held
        None: (7.0, 10.0, 3.0),
    }
