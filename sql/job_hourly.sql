-- job_hourly: one job x UTC hour it held GPUs: allocated, busy and SM-active GPU-hours (sum them to any grouping).
-- Time column: hour (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW job_hourly AS
SELECT
    CAST(hour AS TIMESTAMP WITH TIME ZONE) AS hour,          -- TIMESTAMP WITH TIME ZONE: start of the UTC hour
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(node AS VARCHAR) AS node,                           -- VARCHAR: Kubernetes node / host name
    CAST(tenant AS VARCHAR) AS tenant,                       -- VARCHAR: tenant
    CAST(job_id AS VARCHAR) AS job_id,                       -- VARCHAR: job id
    CAST(gpu_model AS VARCHAR) AS gpu_model,                 -- VARCHAR: GPU model
    CAST(allocated_gpu_hours AS DOUBLE) AS allocated_gpu_hours, -- DOUBLE: share x fraction of the hour held, summed over its GPUs
    CAST(busy_gpu_hours AS DOUBLE) AS busy_gpu_hours,        -- DOUBLE: allocated x the GPU's duty cycle (mean util_gpu_pct / 100)
    CAST(sm_active_gpu_hours AS DOUBLE) AS sm_active_gpu_hours, -- DOUBLE: allocated x mean SM activity; null where not measured
    CAST(mem_used_bytes_max AS BIGINT) AS mem_used_bytes_max, -- BIGINT: peak memory used on its GPUs
    CAST(measured AS BOOLEAN) AS measured,                   -- BOOLEAN: every GPU it held reported utilization that hour
    CAST(idle_gpu_hours AS DOUBLE) AS idle_gpu_hours,        -- DOUBLE: allocated GPU-hours wasted by the analytics.waste_* rule (idle in a long run)
    CAST(workload_class AS VARCHAR) AS workload_class,       -- VARCHAR: the job's class: training, inference, notebook, evaluation, other; null in rows written before it
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM (SELECT * FROM read_parquet(getvariable('gpuledger_lake') || '/job_hourly/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE})
    UNION ALL BY NAME SELECT NULL::VARCHAR AS workload_class WHERE false);
