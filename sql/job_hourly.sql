-- job_hourly: one job x UTC hour it held GPUs: allocated, busy and SM-active GPU-hours (sum them to any grouping).
-- Time column: hour (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW job_hourly AS
SELECT
    hour,                                                    -- TIMESTAMP WITH TIME ZONE: start of the UTC hour
    cluster,                                                 -- VARCHAR: cluster name from config ('default' when unset)
    node,                                                    -- VARCHAR: Kubernetes node / host name
    tenant,                                                  -- VARCHAR: tenant
    job_id,                                                  -- VARCHAR: job id
    gpu_model,                                               -- VARCHAR: GPU model
    allocated_gpu_hours,                                     -- DOUBLE: share x fraction of the hour held, summed over its GPUs
    busy_gpu_hours,                                          -- DOUBLE: allocated x the GPU's duty cycle (mean util_gpu_pct / 100)
    sm_active_gpu_hours,                                     -- DOUBLE: allocated x mean SM activity; null where not measured
    mem_used_bytes_max,                                      -- BIGINT: peak memory used on its GPUs
    measured,                                                -- BOOLEAN: every GPU it held reported utilization that hour
    idle_gpu_hours,                                          -- DOUBLE: allocated GPU-hours wasted by the analytics.waste_* rule (idle in a long run)
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/job_hourly/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
