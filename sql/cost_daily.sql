-- cost_daily: one tenant x GPU model x UTC day: GPU-hours and their cost; a null tenant is unshared idle capacity.
-- Time column: day_start (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW cost_daily AS
SELECT
    day_start,                                               -- TIMESTAMP WITH TIME ZONE: start of the UTC day
    cluster,                                                 -- VARCHAR: cluster name from config ('default' when unset)
    tenant,                                                  -- VARCHAR: tenant; null for idle capacity nobody was charged for
    gpu_model,                                               -- VARCHAR: GPU model
    gpu_hours,                                               -- DOUBLE: GPU-hours charged (allocated, or max(allocated, used) with method max)
    cost_usd,                                                -- DOUBLE: gpu_hours x the rate of that day; null when the model has no rate
    idle_share_usd,                                          -- DOUBLE: idle capacity cost shared to this tenant (or the idle line itself)
    energy_kwh,                                              -- DOUBLE: measured GPU energy, split by the shares held
    energy_usd,                                              -- DOUBLE: energy_kwh x analytics.usd_per_kwh
    method,                                                  -- VARCHAR: request or max
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/cost_daily/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
