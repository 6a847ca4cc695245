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
