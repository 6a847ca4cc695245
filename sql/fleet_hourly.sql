-- fleet_hourly: one GPU model x UTC hour: GPUs in the fleet, held, busy, and the demand waiting for them.
-- Time column: hour (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW fleet_hourly AS
SELECT
    hour,                                                    -- TIMESTAMP WITH TIME ZONE: start of the UTC hour
    cluster,                                                 -- VARCHAR: cluster name from config ('default' when unset)
    gpu_model,                                               -- VARCHAR: GPU model
    gpus,                                                    -- BIGINT: physical GPUs that reported in the hour (supply)
    allocated_gpus,                                          -- DOUBLE: GPUs held by a pod, averaged over the hour
    busy_gpus,                                               -- DOUBLE: GPUs with utilization > 0, averaged over the hour
    pending_gpus,                                            -- DOUBLE: GPUs waiting jobs ask for, mean over the hour's 5-minute ticks
    pending_gpus_max,                                        -- DOUBLE: the most GPUs waiting at one tick of the hour
    pending_jobs_max,                                        -- BIGINT: the most jobs waiting at one tick of the hour
    demand_gpus,                                             -- DOUBLE: allocated_gpus + pending_gpus: what was asked for
    energy_kwh,                                              -- DOUBLE: energy of those GPUs in the hour
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/fleet_hourly/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
