-- demand_forecast: one GPU model x UTC day: its demand (history), the backtest's prediction of it, the forecast ahead, or a candidate method's backtest score (analytics/forecast.py).
-- Time column: day (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW demand_forecast AS
SELECT
    CAST(day AS TIMESTAMP WITH TIME ZONE) AS day,            -- TIMESTAMP WITH TIME ZONE: the UTC day (a candidate's row: the last day of history)
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(gpu_model AS VARCHAR) AS gpu_model,                 -- VARCHAR: GPU model
    CAST(kind AS VARCHAR) AS kind,                           -- VARCHAR: history, backtest, forecast, candidate, or too_short (not enough history to forecast)
    CAST(demand_gpus AS DOUBLE) AS demand_gpus,              -- DOUBLE: predicted mean GPUs asked for that day (backtest, forecast)
    CAST(actual_gpus AS DOUBLE) AS actual_gpus,              -- DOUBLE: measured mean GPUs asked for that day (history, backtest)
    CAST(supply_gpus AS DOUBLE) AS supply_gpus,              -- DOUBLE: mean GPUs the fleet had that day (history)
    CAST(lo80_gpus AS DOUBLE) AS lo80_gpus,                  -- DOUBLE: lower bound of the 80 % prediction interval (forecast)
    CAST(hi80_gpus AS DOUBLE) AS hi80_gpus,                  -- DOUBLE: upper bound of the 80 % prediction interval (forecast)
    CAST(lo95_gpus AS DOUBLE) AS lo95_gpus,                  -- DOUBLE: lower bound of the 95 % prediction interval (forecast)
    CAST(hi95_gpus AS DOUBLE) AS hi95_gpus,                  -- DOUBLE: upper bound of the 95 % prediction interval (forecast)
    CAST(backtest_mase AS DOUBLE) AS backtest_mase,          -- DOUBLE: the chosen method's mean absolute scaled error in the backtest, per model
    CAST(backtest_wape_pct AS DOUBLE) AS backtest_wape_pct,  -- DOUBLE: the chosen method's weighted absolute percentage error, per model
    CAST(backtest_mape_pct AS DOUBLE) AS backtest_mape_pct,  -- DOUBLE: the chosen method's mean absolute percentage error, per model
    CAST(backtest_mae_gpus AS DOUBLE) AS backtest_mae_gpus,  -- DOUBLE: the chosen method's mean absolute error, per model
    CAST(baseline_mase AS DOUBLE) AS baseline_mase,          -- DOUBLE: the seasonal naive baseline's MASE in the same backtest, per model
    CAST(baseline_wape_pct AS DOUBLE) AS baseline_wape_pct,  -- DOUBLE: the seasonal naive baseline's WAPE, per model
    CAST(baseline_mape_pct AS DOUBLE) AS baseline_mape_pct,  -- DOUBLE: the seasonal naive baseline's MAPE, per model
    CAST(exceeds_supply_day AS TIMESTAMP WITH TIME ZONE) AS exceeds_supply_day, -- TIMESTAMP WITH TIME ZONE: first forecast day whose demand exceeds the last day's supply, per model
    CAST(exceeds_supply_earliest_day AS TIMESTAMP WITH TIME ZONE) AS exceeds_supply_earliest_day, -- TIMESTAMP WITH TIME ZONE: first day the 80 % interval's upper bound exceeds it
    CAST(exceeds_supply_latest_day AS TIMESTAMP WITH TIME ZONE) AS exceeds_supply_latest_day, -- TIMESTAMP WITH TIME ZONE: first day the 80 % interval's lower bound exceeds it
    CAST(candidate AS VARCHAR) AS candidate,                 -- VARCHAR: a candidate method (candidate rows)
    CAST(candidate_mase AS DOUBLE) AS candidate_mase,        -- DOUBLE: its MASE in the backtest (candidate rows)
    CAST(candidate_wape_pct AS DOUBLE) AS candidate_wape_pct, -- DOUBLE: its WAPE in the backtest (candidate rows)
    CAST(candidate_mape_pct AS DOUBLE) AS candidate_mape_pct, -- DOUBLE: its MAPE in the backtest (candidate rows)
    CAST(history_days AS BIGINT) AS history_days,            -- BIGINT: days of history the model was fitted on
    CAST(method AS VARCHAR) AS method,                       -- VARCHAR: the forecasting method the backtest chose, per model
    CAST(computed_at AS TIMESTAMP WITH TIME ZONE) AS computed_at, -- TIMESTAMP WITH TIME ZONE: when the analytics computed it
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/demand_forecast/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
