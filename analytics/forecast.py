"""demand_forecast: daily GPU demand per model, forecast by the best of several methods, chosen by a backtest.

The series is each UTC day's mean of fleet_hourly.demand_gpus (GPUs held plus GPUs waiting jobs ask for); the last,
partial day (the run's own) is left out. Candidates (CANDIDATES), each fitted on the last FIT_DAYS days at most:
seasonal naive (the same weekday last week: the baseline), exponential smoothing (statsmodels ETSModel) with an
additive weekly season and an additive trend, plain or damped, the Theta method (statsmodels ThetaModel, weekly
deseasonalised) and MSTL (statsmodels, weekly season) with a damped-trend ETS on the seasonally adjusted series.

Rolling-origin backtest: from each of ORIGINS origins a week apart, each candidate is fitted on the days before the
origin and forecasts the BACKTEST_DAYS after it. Scores over all those forecasts: MASE (mean absolute error over
the in-sample mean absolute error of the seasonal naive; it survives days of zero demand), WAPE (absolute errors
over actual demand) and, beside them, MAPE over the days with demand. The candidate with the lowest MASE is chosen
(the baseline wins a tie), refitted on the whole window and forecast HORIZON_DAYS ahead.

Prediction intervals come from the chosen candidate's own backtest errors: with e(h) its errors h days after an
origin, the spread grows as sigma x sqrt(h), sigma fitted to them (sigma^2 = mean of e(h)^2 / h), and the 80 % and
95 % bands are the forecast plus or minus 1.2816 and 1.96 of it (normal quantiles), never below zero. The same for
every method, so their bands compare. Against the last day's supply: the first forecast day whose demand exceeds
it, and the first days on which the 80 % band's upper and lower bounds do (as early as, and at the latest).

A series shorter than MIN_DAYS (two seasons plus one backtest) is not forecast: the rows say why instead.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import warnings
from collections.abc import Callable

import numpy as np
import polars as pl

from gpuledger import schema
from gpuledger.analytics.sums import exact_mean

log = logging.getLogger(__name__)
HORIZON_DAYS = 28
SEASON_DAYS = 7
BACKTEST_DAYS = 14  # days each backtest origin forecasts
ORIGINS = 3  # rolling origins, a week apart: the last forecasts the final BACKTEST_DAYS of the history
FIT_DAYS = 16 * SEASON_DAYS  # each fit's window: the cost of a refit does not grow with the lake's history
MIN_DAYS = 2 * SEASON_DAYS + BACKTEST_DAYS
BASELINE = "seasonal naive"
Z80, Z95 = 1.2816, 1.96  # two-sided normal quantiles of the 80 % and 95 % bands
# The rows' method text: a new one here makes the runner refit (analytics/runner.py keys its memo on it).
VERSION = "rolling-origin choice v1"


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


# -- the candidates: (history, days ahead, parameters or None to fit) -> (forecast, parameters) -------------------
# A backtest fits each method once, at its first origin, and runs the later origins with those parameters (the
# same window start, so an ETS's initial states still apply): a fit costs 0.3-0.6 s, a run with given parameters
# 0.01 s, and five methods refitted at every origin took 15.8 s for three GPU models, beyond the day-closing run's
# budget. The parameters never see a day after the first origin, so no forecast sees its own future.
Forecaster = Callable[[np.ndarray, int, object], tuple[np.ndarray, object]]


def seasonal_naive(y: np.ndarray, steps: int, params: object = None) -> tuple[np.ndarray, object]:
    """The same weekday of the last week, repeated."""
    last = y[-SEASON_DAYS:]
    return np.array([last[k % SEASON_DAYS] for k in range(steps)], dtype=float), None


def _quiet(fit: Callable[[], object]):
    with warnings.catch_warnings():
        # statsmodels warns when its optimiser stops at the iteration limit or a series is short: the fit is still
        # the best it found, and the backtest scores it like any other.
        warnings.simplefilter("ignore")
        return fit()


def _ets_run(y: np.ndarray, steps: int, params: object, **spec) -> tuple[np.ndarray, object]:
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    model = ETSModel(y, error="add", trend="add", **spec)
    res = _quiet(lambda: model.fit(disp=False) if params is None else model.smooth(params))
    return np.asarray(res.forecast(steps), dtype=float), res.params


def _ets(damped: bool) -> Forecaster:
    def forecast(y: np.ndarray, steps: int, params: object = None) -> tuple[np.ndarray, object]:
        return _ets_run(y, steps, params, damped_trend=damped, seasonal="add", seasonal_periods=SEASON_DAYS)

    return forecast


def theta(y: np.ndarray, steps: int, params: object = None) -> tuple[np.ndarray, object]:
    from statsmodels.tsa.forecasting.theta import ThetaModel

    # Additive deseasonalising: demand can be zero, which a multiplicative season cannot divide. Fitted each time
    # (0.05 s: its parameters are a drift and a smoothing weight, estimated in closed form).
    res = _quiet(lambda: ThetaModel(y, period=SEASON_DAYS, method="additive").fit())
    return np.asarray(res.forecast(steps), dtype=float), None


def mstl_ets(y: np.ndarray, steps: int, params: object = None) -> tuple[np.ndarray, object]:
    """MSTL's weekly season taken out, a damped-trend ETS on the rest, the last week's season put back."""
    from statsmodels.tsa.seasonal import MSTL

    if len(y) <= 2 * SEASON_DAYS:  # MSTL drops a season it cannot see twice, and then has nothing to fit
        raise ValueError(f"MSTL needs more than {2 * SEASON_DAYS} days, has {len(y)}")
    seasonal = np.asarray(_quiet(lambda: MSTL(y, periods=(SEASON_DAYS,)).fit()).seasonal)
    ahead, params = _ets_run(y - seasonal, steps, params, damped_trend=True)
    return ahead + np.array([seasonal[-SEASON_DAYS:][k % SEASON_DAYS] for k in range(steps)]), params


CANDIDATES: dict[str, Forecaster] = {
    BASELINE: seasonal_naive,
    "ETS, additive trend, weekly season": _ets(damped=False),
    "ETS, damped trend, weekly season": _ets(damped=True),
    "Theta, weekly deseasonalised": theta,
    "MSTL weekly season + damped ETS": mstl_ets,
}


# -- the backtest and the choice ------------------------------------------------------------------------------------
def origins(n: int) -> list[int]:
    """Where the backtest's fits end: a week apart, the last BACKTEST_DAYS before the end, each with two seasons of
    history before it at least."""
    return [o for k in range(ORIGINS - 1, -1, -1) if (o := n - BACKTEST_DAYS - k * SEASON_DAYS) >= 2 * SEASON_DAYS]


def scores(y: np.ndarray, errors: np.ndarray, actual: np.ndarray) -> dict[str, float | None]:
    """MASE, WAPE (%), MAPE (%) and MAE of backtest `errors` against `actual` (same shape), with MASE's scale the
    in-sample seasonal naive's mean absolute error over `y` (the history before the first origin)."""
    scale = float(np.mean(np.abs(y[SEASON_DAYS:] - y[:-SEASON_DAYS]))) if len(y) > SEASON_DAYS else 0.0
    mae = float(np.mean(np.abs(errors)))
    total = float(np.sum(np.abs(actual)))
    nonzero = actual > 0
    return {
        "mase": mae / scale if scale > 0 else None,
        "wape_pct": float(np.sum(np.abs(errors))) / total * 100 if total > 0 else None,
        "mape_pct": float(np.mean(np.abs(errors[nonzero]) / actual[nonzero]) * 100) if nonzero.any() else None,
        "mae_gpus": mae,
    }


def backtest(y: np.ndarray, forecast: Forecaster) -> tuple[np.ndarray, np.ndarray]:
    """(predictions, actuals), one row per origin, BACKTEST_DAYS columns. Every origin's history starts FIT_DAYS
    before the first; the method is fitted at the first and run with those parameters at the others."""
    at = origins(len(y))
    start = max(0, at[0] - FIT_DAYS)
    preds, actual, params = [], [], None
    for o in at:
        pred, fitted = forecast(y[start:o], BACKTEST_DAYS, params)
        params = fitted if params is None else params
        preds.append(np.maximum(pred, 0.0))
        actual.append(y[o : o + BACKTEST_DAYS])
    return np.array(preds), np.array(actual)


def choose(table: dict[str, dict]) -> str:
    """The candidate with the lowest MASE (then WAPE, then MAE where those are undefined); the baseline on a tie."""

    def key(name: str) -> tuple:
        s = table[name]["scores"]
        return tuple(math.inf if s[k] is None else round(s[k], 12) for k in ("mase", "wape_pct", "mae_gpus"))

    best = min(table, key=key)
    return BASELINE if key(BASELINE) == key(best) else best


def sigma(errors: np.ndarray) -> float:
    """The spread of one day ahead, fitted to backtest errors that grow as sqrt(days ahead)."""
    h = np.arange(1, errors.shape[1] + 1)
    return float(np.sqrt(np.mean(errors**2 / h)))


def first_day(days: list[dt.datetime], values: np.ndarray, supply: float) -> dt.datetime | None:
    above = np.nonzero(values > supply)[0]
    return days[above[0]] if above.size else None


# -- the table -------------------------------------------------------------------------------------------------------
def demand_forecast(fleet: pl.LazyFrame, now: dt.datetime) -> pl.LazyFrame:
    daily = daily_demand(fleet, now)
    rows = []
    for (cluster, model), g in daily.group_by("cluster", "gpu_model", maintain_order=True):
        rows += _model_rows(cluster, model, _fill_days(g))
    if not rows:
        return pl.LazyFrame(schema=_SCHEMA)
    return (
        pl.DataFrame(rows, schema=_SCHEMA).with_columns(pl.lit(now).dt.cast_time_unit("us").alias("computed_at")).lazy()
    )


def _model_rows(cluster: str, model: str, g: pl.DataFrame) -> list[dict]:
    days, y, supply = g["day"].to_list(), g["demand_gpus"].to_numpy(), g["supply_gpus"].to_numpy()
    base = {"cluster": cluster, "gpu_model": model, "history_days": len(days)}
    if len(days) < MIN_DAYS:
        return [{**base, "day": days[-1], "kind": "too_short", "method": None, "actual_gpus": y[-1]}]
    first = origins(len(y))[0]
    table = {}
    for name, forecast in CANDIDATES.items():
        try:
            preds, actual = backtest(y, forecast)
        except Exception as e:  # noqa: BLE001 - a method that cannot fit this series is left out of the choice
            log.info("forecast: %s / %s: %s left out (%s: %s)", cluster, model, name, type(e).__name__, e)
            continue
        table[name] = {"preds": preds, "errors": preds - actual, "actual": actual}
        table[name]["scores"] = scores(y[max(0, first - FIT_DAYS) : first], preds - actual, actual)
    chosen = choose(table)
    mine, baseline = table[chosen], table[BASELINE]["scores"]
    ahead = np.maximum(CANDIDATES[chosen](y[-FIT_DAYS:], HORIZON_DAYS, None)[0], 0.0)  # refitted on the latest
    spread = sigma(mine["errors"]) * np.sqrt(np.arange(1, HORIZON_DAYS + 1))
    bands = {
        "lo80_gpus": np.maximum(ahead - Z80 * spread, 0.0),
        "hi80_gpus": ahead + Z80 * spread,
        "lo95_gpus": np.maximum(ahead - Z95 * spread, 0.0),
        "hi95_gpus": ahead + Z95 * spread,
    }
    future = [days[-1] + dt.timedelta(days=k) for k in range(1, HORIZON_DAYS + 1)]
    s = mine["scores"]
    base |= {
        "method": chosen,
        "backtest_mase": s["mase"],
        "backtest_wape_pct": s["wape_pct"],
        "backtest_mape_pct": s["mape_pct"],
        "backtest_mae_gpus": s["mae_gpus"],
        "baseline_mase": baseline["mase"],
        "baseline_wape_pct": baseline["wape_pct"],
        "baseline_mape_pct": baseline["mape_pct"],
        "exceeds_supply_day": first_day(future, ahead, supply[-1]),
        "exceeds_supply_earliest_day": first_day(future, bands["hi80_gpus"], supply[-1]),
        "exceeds_supply_latest_day": first_day(future, bands["lo80_gpus"], supply[-1]),
    }
    rows = [
        {**base, "day": d, "kind": "history", "actual_gpus": a, "supply_gpus": sp}
        for d, a, sp in zip(days, y, supply, strict=True)
    ]
    # The chosen method's forecasts from the last origin: the days it predicted without having seen them.
    rows += [
        {**base, "day": d, "kind": "backtest", "demand_gpus": p, "actual_gpus": a}
        for d, p, a in zip(days[-BACKTEST_DAYS:], mine["preds"][-1], mine["actual"][-1], strict=True)
    ]
    rows += [
        {**base, "day": d, "kind": "forecast", "demand_gpus": p, **{k: v[i] for k, v in bands.items()}}
        for i, (d, p) in enumerate(zip(future, ahead, strict=True))
    ]
    # Every candidate's scores, for the page's comparison: one row each, on the last history day.
    for name, t in table.items():
        sc = t["scores"]
        rows.append(
            {
                **base,
                "day": days[-1],
                "kind": "candidate",
                "candidate": name,
                "candidate_mase": sc["mase"],
                "candidate_wape_pct": sc["wape_pct"],
                "candidate_mape_pct": sc["mape_pct"],
            }
        )
    return rows


def _fill_days(g: pl.DataFrame) -> pl.DataFrame:
    """A day with no row (no GPU reported, nobody waiting) is a day of zero demand, not a gap to skip."""
    full = pl.DataFrame({"day": pl.datetime_range(g["day"].min(), g["day"].max(), "1d", eager=True)})
    return full.join(g, on="day", how="left").with_columns(pl.col("demand_gpus", "supply_gpus").fill_null(0.0))


# The table's columns but its partition (added when written).
_SCHEMA = pl.Schema({c: d for c, d in schema.table("demand_forecast").polars_schema.items() if c != "date"})
