-- fleet_hourly: one GPU model x UTC hour: GPUs in the fleet, held, busy, and the demand waiting for them.
-- Time column: hour (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW fleet_hourly AS
SELECT
    CAST(hour AS TIMESTAMP WITH TIME ZONE) AS hour,          -- TIMESTAMP WITH TIME ZONE: start of the UTC hour
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(gpu_model AS VARCHAR) AS gpu_model,                 -- VARCHAR: GPU model
    CAST(gpus AS BIGINT) AS gpus,                            -- BIGINT: physical GPUs that reported in the hour (supply)
    CAST(allocated_gpus AS DOUBLE) AS allocated_gpus,        -- DOUBLE: GPUs held by a pod, averaged over the hour
    CAST(busy_gpus AS DOUBLE) AS busy_gpus,                  -- DOUBLE: GPUs with utilization > 0, averaged over the hour
    CAST(pending_gpus AS DOUBLE) AS pending_gpus,            -- DOUBLE: GPUs waiting jobs ask for, mean over the hour's 5-minute ticks
    CAST(pending_gpus_max AS DOUBLE) AS pending_gpus_max,    -- DOUBLE: the most GPUs waiting at one tick of the hour
    CAST(pending_jobs_max AS BIGINT) AS pending_jobs_max,    -- BIGINT: the most jobs waiting at one tick of the hour
    CAST(demand_gpus AS DOUBLE) AS demand_gpus,              -- DOUBLE: allocated_gpus + pending_gpus: what was asked for
    CAST(energy_kwh AS DOUBLE) AS energy_kwh,                -- DOUBLE: energy of those GPUs in the hour
    CAST(vendor AS VARCHAR) AS vendor,                       -- VARCHAR: nvidia, amd or huawei (gpuledger/vendors.py); null for a model no rule names
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM (SELECT * FROM read_parquet(getvariable('gpuledger_lake') || '/fleet_hourly/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE})
    UNION ALL BY NAME SELECT NULL::VARCHAR AS vendor WHERE false);
