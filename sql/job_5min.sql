-- job_5min: one job x 5-minute bucket it held GPUs: allocated, busy and SM-active GPU-hours.
-- Time column: bucket_start (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW job_5min AS
SELECT
    bucket_start,                                            -- TIMESTAMP WITH TIME ZONE: start of the 5-minute bucket, UTC
    cluster,                                                 -- VARCHAR: cluster name from config ('default' when unset)
    node,                                                    -- VARCHAR: Kubernetes node / host name
    tenant,                                                  -- VARCHAR: tenant
    job_id,                                                  -- VARCHAR: job id
    gpu_model,                                               -- VARCHAR: GPU model
    allocated_gpu_hours,                                     -- DOUBLE: share x fraction of the bucket held, in GPU-hours
    busy_gpu_hours,                                          -- DOUBLE: allocated x the GPU's duty cycle in the bucket
    sm_active_gpu_hours,                                     -- DOUBLE: allocated x mean SM activity; null where not measured
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/job_5min/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
