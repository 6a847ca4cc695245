-- job_5min: one job x 5-minute bucket it held GPUs: allocated, busy and SM-active GPU-hours.
-- Time column: bucket_start (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW job_5min AS
SELECT
    CAST(bucket_start AS TIMESTAMP WITH TIME ZONE) AS bucket_start, -- TIMESTAMP WITH TIME ZONE: start of the 5-minute bucket, UTC
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(node AS VARCHAR) AS node,                           -- VARCHAR: Kubernetes node / host name
    CAST(tenant AS VARCHAR) AS tenant,                       -- VARCHAR: tenant
    CAST(job_id AS VARCHAR) AS job_id,                       -- VARCHAR: job id
    CAST(gpu_model AS VARCHAR) AS gpu_model,                 -- VARCHAR: GPU model
    CAST(allocated_gpu_hours AS DOUBLE) AS allocated_gpu_hours, -- DOUBLE: share x fraction of the bucket held, in GPU-hours
    CAST(busy_gpu_hours AS DOUBLE) AS busy_gpu_hours,        -- DOUBLE: allocated x the GPU's duty cycle in the bucket
    CAST(sm_active_gpu_hours AS DOUBLE) AS sm_active_gpu_hours, -- DOUBLE: allocated x mean SM activity; null where not measured
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/job_5min/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
