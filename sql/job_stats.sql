-- job_stats: one job (its latest state) with its wait, run time and GPU-hours.
-- Time column: submitted_at (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW job_stats AS
SELECT
    cluster,                                                 -- VARCHAR: cluster name from config ('default' when unset)
    job_id,                                                  -- VARCHAR: job id
    tenant,                                                  -- VARCHAR: tenant
    namespace,                                               -- VARCHAR: Kubernetes namespace
    queue,                                                   -- VARCHAR: scheduler queue
    gpu_model,                                               -- VARCHAR: GPU model
    gpus,                                                    -- DOUBLE: GPUs requested (fractional for shares)
    gpu_sharing,                                             -- VARCHAR: exclusive, fraction, time-sliced or mig
    status,                                                  -- VARCHAR: latest status
    reason,                                                  -- VARCHAR: why it ended or waits
    node,                                                    -- VARCHAR: Kubernetes node / host name
    submitted_at,                                            -- TIMESTAMP WITH TIME ZONE: creation time, UTC
    scheduled_at,                                            -- TIMESTAMP WITH TIME ZONE: bound to a node, UTC
    finished_at,                                             -- TIMESTAMP WITH TIME ZONE: ended, UTC
    size_bucket,                                             -- VARCHAR: <1, 1, 2, 3-4, 5-8, >8 GPUs
    queue_s,                                                 -- DOUBLE: scheduled_at - submitted_at (for a pending job: so far)
    run_s,                                                   -- DOUBLE: end - started_at (or scheduled_at); end = finished_at or the analysis time
    held_s,                                                  -- DOUBLE: end - scheduled_at: how long it held its GPUs
    gpu_hours,                                               -- DOUBLE: gpus x held_s / 3600
    expansion,                                               -- DOUBLE: (queue_s + run_s) / run_s
    allocated_gpu_hours,                                     -- DOUBLE: GPU-hours held, from its allocations (shares x time)
    busy_gpu_hours,                                          -- DOUBLE: of which a kernel ran (allocated x the GPU's duty cycle)
    idle_gpu_hours,                                          -- DOUBLE: allocated but idle by the waste rule (analytics.waste_*)
    efficiency,                                              -- DOUBLE: busy_gpu_hours / allocated_gpu_hours; null where not measured
    cost_usd,                                                -- DOUBLE: its GPU time priced by the rate card (method analytics.cost_method)
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/job_stats/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
