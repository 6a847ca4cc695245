-- demand_forecast: one GPU model x UTC day: its demand (history), the backtest's prediction of it, or the forecast ahead.
-- Time column: day (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW demand_forecast AS
SELECT
    CAST(day AS TIMESTAMP WITH TIME ZONE) AS day,            -- TIMESTAMP WITH TIME ZONE: the UTC day
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(gpu_model AS VARCHAR) AS gpu_model,                 -- VARCHAR: GPU model
    CAST(kind AS VARCHAR) AS kind,                           -- VARCHAR: history, backtest, forecast, or too_short (not enough history to forecast)
    CAST(demand_gpus AS DOUBLE) AS demand_gpus,              -- DOUBLE: predicted mean GPUs asked for that day (backtest, forecast)
    CAST(actual_gpus AS DOUBLE) AS actual_gpus,              -- DOUBLE: measured mean GPUs asked for that day (history, backtest)
    CAST(supply_gpus AS DOUBLE) AS supply_gpus,              -- DOUBLE: mean GPUs the fleet had that day (history)
    CAST(backtest_mape_pct AS DOUBLE) AS backtest_mape_pct,  -- DOUBLE: mean absolute percentage error of the backtest, per model
    CAST(backtest_mae_gpus AS DOUBLE) AS backtest_mae_gpus,  -- DOUBLE: mean absolute error of the backtest, per model
    CAST(history_days AS BIGINT) AS history_days,            -- BIGINT: days of history the model was fitted on
    CAST(method AS VARCHAR) AS method,                       -- VARCHAR: the forecasting method
    CAST(computed_at AS TIMESTAMP WITH TIME ZONE) AS computed_at, -- TIMESTAMP WITH TIME ZONE: when the analytics computed it
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/demand_forecast/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
