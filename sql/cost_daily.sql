-- cost_daily: one tenant x GPU model x UTC day: GPU-hours and their cost; a null tenant is unshared idle capacity.
-- Time column: day_start (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW cost_daily AS
SELECT
    CAST(day_start AS TIMESTAMP WITH TIME ZONE) AS day_start, -- TIMESTAMP WITH TIME ZONE: start of the UTC day
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(tenant AS VARCHAR) AS tenant,                       -- VARCHAR: tenant; null for idle capacity nobody was charged for
    CAST(gpu_model AS VARCHAR) AS gpu_model,                 -- VARCHAR: GPU model
    CAST(gpu_hours AS DOUBLE) AS gpu_hours,                  -- DOUBLE: GPU-hours charged (allocated, or max(allocated, used) with method max)
    CAST(cost_usd AS DOUBLE) AS cost_usd,                    -- DOUBLE: gpu_hours x the rate of that day; null when the model has no rate
    CAST(idle_share_usd AS DOUBLE) AS idle_share_usd,        -- DOUBLE: idle capacity cost shared to this tenant (or the idle line itself)
    CAST(energy_kwh AS DOUBLE) AS energy_kwh,                -- DOUBLE: measured GPU energy, split by the shares held
    CAST(energy_usd AS DOUBLE) AS energy_usd,                -- DOUBLE: energy_kwh x analytics.usd_per_kwh
    CAST(method AS VARCHAR) AS method,                       -- VARCHAR: request or max
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/cost_daily/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
