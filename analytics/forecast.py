"""demand_forecast: daily GPU demand per model, forecast with Holt-Winters, and the forecast's own backtest.

Method (docs/dashboards.md): the series is each UTC day's mean of fleet_hourly.demand_gpus (GPUs held plus GPUs
waiting jobs ask for). Holt-Winters exponential smoothing (statsmodels ExponentialSmoothing) with an additive,
damped trend and an additive weekly season (7 days), parameters fitted by maximum likelihood. The backtest fits
the same model on all but the last BACKTEST_DAYS days and forecasts them; its mean absolute percentage error
(MAPE) and mean absolute error are written on every row of the model, so the page shows how far to trust it.
A series shorter than MIN_DAYS (two seasons plus the backtest) is not forecast: the rows say why instead.
The last, partial day (the run's own) is left out of the fit.
"""

from __future__ import annotations

import datetime as dt
import warnings

import numpy as np
import polars as pl

from gpuledger.analytics.sums import exact_mean

HORIZON_DAYS = 28
BACKTEST_DAYS = 14
SEASON_DAYS = 7
MIN_DAYS = 2 * SEASON_DAYS + BACKTEST_DAYS
METHOD = "holt-winters additive damped trend, weekly additive season"


def day_means(fleet: pl.LazyFrame) -> pl.LazyFrame:
    """Each UTC day's mean demand and supply, per cluster and model."""
    # Exact means: a float mean's last bits depend on the order polars' threads add the rows in, and the forecast of
    # one lake must not differ between two runs (nor between a disk and an object-store lake: tests compare them).
    return fleet.group_by("cluster", "gpu_model", pl.col("hour").dt.truncate("1d").alias("day")).agg(
        exact_mean(pl.col("demand_gpus")).alias("demand_gpus"), exact_mean(pl.col("gpus")).alias("supply_gpus")
    )


def daily_demand(fleet: pl.LazyFrame, now: dt.datetime) -> pl.DataFrame:
    today = dt.datetime.combine(now.date(), dt.time(), dt.timezone.utc)
    return day_means(fleet.filter(pl.col("hour") < today)).sort("cluster", "gpu_model", "day").collect()


def _fit_forecast(y: np.ndarray, steps: int) -> np.ndarray:
    from statsmodels.tsa.holtwinters import ExponentialSmoothing

    with warnings.catch_warnings():
        # statsmodels warns when the optimiser stops at its iteration limit; the fit is still the best it found.
        warnings.simplefilter("ignore")
        model = ExponentialSmoothing(
            y,
            trend="add",
            damped_trend=True,
            seasonal="add",
            seasonal_periods=SEASON_DAYS,
            initialization_method="estimated",
        ).fit()
    return np.maximum(model.forecast(steps), 0.0)  # demand is never negative


def demand_forecast(fleet: pl.LazyFrame, now: dt.datetime) -> pl.LazyFrame:
    daily = daily_demand(fleet, now)
    rows = []
    for (cluster, model), g in daily.group_by("cluster", "gpu_model", maintain_order=True):
        g = _fill_days(g)
        days, y, supply = g["day"].to_list(), g["demand_gpus"].to_numpy(), g["supply_gpus"].to_numpy()
        base = {"cluster": cluster, "gpu_model": model, "method": METHOD, "history_days": len(days)}
        if len(days) < MIN_DAYS:
            rows.append({**base, "day": days[-1], "kind": "too_short", "demand_gpus": None, "actual_gpus": y[-1]})
            continue
        back = _fit_forecast(y[:-BACKTEST_DAYS], BACKTEST_DAYS)
        actual = y[-BACKTEST_DAYS:]
        nonzero = actual > 0
        mape = (
            float(np.mean(np.abs(back[nonzero] - actual[nonzero]) / actual[nonzero]) * 100) if nonzero.any() else None
        )
        mae = float(np.mean(np.abs(back - actual)))
        base |= {"backtest_mape_pct": mape, "backtest_mae_gpus": mae}
        for d, a, s in zip(days, y, supply, strict=True):
            rows.append({**base, "day": d, "kind": "history", "demand_gpus": None, "actual_gpus": a, "supply_gpus": s})
        for d, p, a in zip(days[-BACKTEST_DAYS:], back, actual, strict=True):
            rows.append({**base, "day": d, "kind": "backtest", "demand_gpus": p, "actual_gpus": a})
        ahead = _fit_forecast(y, HORIZON_DAYS)
        for k, p in enumerate(ahead, 1):
            rows.append({**base, "day": days[-1] + dt.timedelta(days=k), "kind": "forecast", "demand_gpus": p})
    if not rows:
        return pl.LazyFrame(schema=_SCHEMA)
    return (
        pl.DataFrame(rows, schema=_SCHEMA).with_columns(pl.lit(now).dt.cast_time_unit("us").alias("computed_at")).lazy()
    )


def _fill_days(g: pl.DataFrame) -> pl.DataFrame:
    """A day with no row (no GPU reported, nobody waiting) is a day of zero demand, not a gap to skip."""
    full = pl.DataFrame({"day": pl.datetime_range(g["day"].min(), g["day"].max(), "1d", eager=True)})
    return full.join(g, on="day", how="left").with_columns(pl.col("demand_gpus", "supply_gpus").fill_null(0.0))


_SCHEMA = pl.Schema(
    {
        "day": pl.Datetime("us", "UTC"),
        "cluster": pl.String,
        "gpu_model": pl.String,
        "kind": pl.String,
        "demand_gpus": pl.Float64,
        "actual_gpus": pl.Float64,
        "supply_gpus": pl.Float64,
        "backtest_mape_pct": pl.Float64,
        "backtest_mae_gpus": pl.Float64,
        "history_days": pl.Int64,
        "method": pl.String,
    }
)
