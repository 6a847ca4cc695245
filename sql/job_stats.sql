-- job_stats: one job (its latest state) with its wait, run time and GPU-hours.
-- Time column: submitted_at (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW job_stats AS
SELECT
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(job_id AS VARCHAR) AS job_id,                       -- VARCHAR: job id
    CAST(tenant AS VARCHAR) AS tenant,                       -- VARCHAR: tenant
    CAST(namespace AS VARCHAR) AS namespace,                 -- VARCHAR: Kubernetes namespace
    CAST(queue AS VARCHAR) AS queue,                         -- VARCHAR: scheduler queue
    CAST(gpu_model AS VARCHAR) AS gpu_model,                 -- VARCHAR: GPU model
    CAST(gpus AS DOUBLE) AS gpus,                            -- DOUBLE: GPUs requested (fractional for shares)
    CAST(gpu_sharing AS VARCHAR) AS gpu_sharing,             -- VARCHAR: exclusive, fraction, time-sliced, mig, partition (AMD, Ascend), unmapped (0 GPUs)
    CAST(status AS VARCHAR) AS status,                       -- VARCHAR: latest status
    CAST(reason AS VARCHAR) AS reason,                       -- VARCHAR: why it ended or waits
    CAST(node AS VARCHAR) AS node,                           -- VARCHAR: Kubernetes node / host name
    CAST(submitted_at AS TIMESTAMP WITH TIME ZONE) AS submitted_at, -- TIMESTAMP WITH TIME ZONE: creation time, UTC
    CAST(scheduled_at AS TIMESTAMP WITH TIME ZONE) AS scheduled_at, -- TIMESTAMP WITH TIME ZONE: bound to a node, UTC
    CAST(finished_at AS TIMESTAMP WITH TIME ZONE) AS finished_at, -- TIMESTAMP WITH TIME ZONE: ended, UTC
    CAST(size_bucket AS VARCHAR) AS size_bucket,             -- VARCHAR: <1, 1, 2, 3-4, 5-8, >8 GPUs
    CAST(queue_s AS DOUBLE) AS queue_s,                      -- DOUBLE: scheduled_at - submitted_at (for a pending job: so far)
    CAST(run_s AS DOUBLE) AS run_s,                          -- DOUBLE: end - started_at (or scheduled_at); end = finished_at or the analysis time
    CAST(held_s AS DOUBLE) AS held_s,                        -- DOUBLE: end - scheduled_at: how long it held its GPUs
    CAST(gpu_hours AS DOUBLE) AS gpu_hours,                  -- DOUBLE: gpus x held_s / 3600
    CAST(expansion AS DOUBLE) AS expansion,                  -- DOUBLE: (queue_s + run_s) / run_s
    CAST(allocated_gpu_hours AS DOUBLE) AS allocated_gpu_hours, -- DOUBLE: GPU-hours held, from its allocations (shares x time)
    CAST(busy_gpu_hours AS DOUBLE) AS busy_gpu_hours,        -- DOUBLE: of which a kernel ran (allocated x the GPU's duty cycle)
    CAST(idle_gpu_hours AS DOUBLE) AS idle_gpu_hours,        -- DOUBLE: allocated but idle by the waste rule (analytics.waste_*)
    CAST(efficiency AS DOUBLE) AS efficiency,                -- DOUBLE: busy_gpu_hours / allocated_gpu_hours; null where not measured
    CAST(cost_usd AS DOUBLE) AS cost_usd,                    -- DOUBLE: its GPU time priced by the rate card (method analytics.cost_method)
    CAST(workload_class AS VARCHAR) AS workload_class,       -- VARCHAR: the job's class: training, inference, notebook, evaluation, other; null in rows written before it
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM (SELECT * FROM read_parquet(getvariable('gpuledger_lake') || '/job_stats/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE})
    UNION ALL BY NAME SELECT NULL::VARCHAR AS workload_class WHERE false);
