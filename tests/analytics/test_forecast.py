"""The demand forecast on series whose future is known."""

import datetime as dt

import numpy as np
import polars as pl
import pytest

from gpuledger.analytics.forecast import BACKTEST_DAYS, HORIZON_DAYS, MIN_DAYS, demand_forecast

from builders import at

D0 = at(1, month=9)
WEEK = [10.0, 12.0, 14.0, 16.0, 14.0, 6.0, 4.0]  # a weekly cycle: busy weekdays, quiet weekend


def fleet(days, level=lambda d: WEEK[d % 7]):
    hours = [D0 + dt.timedelta(hours=h) for h in range(24 * days)]
    return pl.LazyFrame(
        {
            "hour": hours,
            "cluster": ["c"] * len(hours),
            "gpu_model": ["A"] * len(hours),
            "gpus": [32] * len(hours),
            "demand_gpus": [level(h // 24) for h in range(len(hours))],
        }
    ).with_columns(pl.col("hour").dt.cast_time_unit("us"))


def test_a_weekly_pattern_is_forecast_and_backtested_closely():
    days = 8 * 7
    now = D0 + dt.timedelta(days=days, hours=5)  # the run's own partial day is left out
    out = demand_forecast(fleet(days + 1), now).collect()
    hist, back, ahead = (out.filter(pl.col("kind") == k) for k in ("history", "backtest", "forecast"))
    assert hist.height == days and back.height == BACKTEST_DAYS and ahead.height == HORIZON_DAYS
    assert hist["supply_gpus"].to_list() == [32.0] * days
    # A noiseless weekly cycle: the backtest and the forecast repeat it almost exactly.
    assert back["backtest_mape_pct"][0] < 1.0 and back["backtest_mae_gpus"][0] < 0.1
    expected = [WEEK[(days + k) % 7] for k in range(HORIZON_DAYS)]
    assert np.allclose(ahead["demand_gpus"].to_numpy(), expected, atol=0.2)
    assert ahead["day"][0] == D0 + dt.timedelta(days=days)
    assert (out["history_days"] == days).all()


def test_a_growing_demand_keeps_growing_in_the_forecast():
    days = 6 * 7
    out = demand_forecast(fleet(days, lambda d: 20.0 + 0.5 * d + WEEK[d % 7]), D0 + dt.timedelta(days=days)).collect()
    ahead = out.filter(pl.col("kind") == "forecast")["demand_gpus"].to_numpy()
    last_week = 20.0 + 0.5 * np.arange(days - 7, days) + np.array([WEEK[d % 7] for d in range(days - 7, days)])
    assert ahead[:7].mean() > last_week.mean()  # damped, but still up


def test_too_short_a_history_says_so_instead_of_forecasting():
    out = demand_forecast(fleet(MIN_DAYS - 1), D0 + dt.timedelta(days=MIN_DAYS - 1)).collect()
    assert out["kind"].to_list() == ["too_short"] and out["history_days"][0] == MIN_DAYS - 1
    assert out["demand_gpus"][0] is None


def test_a_day_with_no_rows_is_zero_demand():
    days = 5 * 7
    f = fleet(days).filter(pl.col("hour").dt.date() != (D0 + dt.timedelta(days=10)).date())
    hist = demand_forecast(f, D0 + dt.timedelta(days=days)).collect().filter(pl.col("kind") == "history")
    assert hist.height == days
    assert hist.filter(pl.col("day") == D0 + dt.timedelta(days=10))["actual_gpus"].item() == pytest.approx(0.0)


def test_scores_by_hand():
    from gpuledger.analytics.forecast import scores

    y = np.array([1.0, 2, 3, 4, 5, 6, 7, 3, 4, 5, 6, 7, 8, 9])  # each weekday 2 more than a week before
    actual = np.array([[4.0, 0.0], [2.0, 2.0]])
    errors = np.array([[1.0, -1.0], [0.5, -0.5]])
    s = scores(y, errors, actual)
    assert s["mae_gpus"] == pytest.approx(0.75)
    assert s["mase"] == pytest.approx(0.75 / 2.0)  # the seasonal naive's in-sample error is 2 every day
    assert s["wape_pct"] == pytest.approx(3.0 / 8.0 * 100)
    assert s["mape_pct"] == pytest.approx((1 / 4 + 0.5 / 2 + 0.5 / 2) / 3 * 100)  # the zero day left out


def test_the_interval_spread_by_hand():
    from gpuledger.analytics.forecast import first_day, sigma

    errors = np.array([[1.0, 2.0], [-1.0, -2.0]])  # one and two days ahead
    assert sigma(errors) == pytest.approx(np.sqrt((1 + 4 / 2 + 1 + 4 / 2) / 4))
    days = [D0 + dt.timedelta(days=k) for k in range(3)]
    assert first_day(days, np.array([30.0, 33.0, 31.0]), 32.0) == days[1]
    assert first_day(days, np.array([30.0, 31.0, 32.0]), 32.0) is None  # equal is not more


def test_a_trend_the_baseline_cannot_follow_is_forecast_by_a_method_that_beats_it():
    """Demand growing 0.8 GPU a day under a weekly cycle, with noise: the same weekday last week is always 5.6 GPUs
    short, and the backtest must choose a trend method whose error is below the baseline's."""
    rng = np.random.default_rng(7)
    noise = rng.normal(0, 0.5, 120)
    days = 84
    out = demand_forecast(fleet(days, lambda d: 20.0 + 0.8 * d + WEEK[d % 7] + noise[d]), D0 + dt.timedelta(days=days))
    out = out.collect()
    ahead = out.filter(pl.col("kind") == "forecast")
    chosen = ahead["method"][0]
    assert chosen != "seasonal naive"
    assert ahead["backtest_mase"][0] < 0.5 * ahead["baseline_mase"][0]
    assert ahead["backtest_wape_pct"][0] < ahead["baseline_wape_pct"][0]
    # The candidates' own rows: every method scored, the chosen one the lowest MASE.
    cand = out.filter(pl.col("kind") == "candidate").sort("candidate_mase")
    assert cand.height == 5 and cand["candidate"][0] == chosen
    assert cand.filter(pl.col("candidate") == "seasonal naive")["candidate_mase"].item() == pytest.approx(
        ahead["baseline_mase"][0]
    )
    # The bands: nested, widening with the days ahead, around the forecast; the truth mostly inside the 95 % one.
    lo80, hi80, lo95, hi95, mid = (
        ahead[c].to_numpy() for c in ("lo80_gpus", "hi80_gpus", "lo95_gpus", "hi95_gpus", "demand_gpus")
    )
    assert (lo95 <= lo80).all() and (lo80 <= mid).all() and (mid <= hi80).all() and (hi80 <= hi95).all()
    assert np.all(np.diff(hi95 - lo95) > 0)
    truth = np.array([20.0 + 0.8 * d + WEEK[d % 7] for d in range(days, days + HORIZON_DAYS)])
    assert np.mean((truth >= lo95) & (truth <= hi95)) >= 0.9


def test_the_day_demand_exceeds_supply_comes_with_its_interval():
    """Supply is 32 GPUs; demand grows 0.5 a day from 14 (no season): it passes 32 about 36 days after the start."""
    days = 4 * 7
    out = demand_forecast(fleet(days, lambda d: 14.0 + 0.5 * d), D0 + dt.timedelta(days=days)).collect()
    ahead = out.filter(pl.col("kind") == "forecast")
    day, early, late = (
        ahead[c][0] for c in ("exceeds_supply_day", "exceeds_supply_earliest_day", "exceeds_supply_latest_day")
    )
    # 14 + 0.5 d > 32 from d = 37: the forecast's first day above supply is that one, give or take the fit.
    assert abs((day - (D0 + dt.timedelta(days=37))).days) <= 2
    assert early <= day and (late is None or late >= day)
    first_above = ahead.filter(pl.col("demand_gpus") > 32.0)["day"].min()
    assert day == first_above
