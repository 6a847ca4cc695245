-- gpu_allocations: one interval of one job holding one GPU (or a share of it).
-- Time column: start (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW gpu_allocations AS
SELECT
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(job_id AS VARCHAR) AS job_id,                       -- VARCHAR: job id
    CAST(tenant AS VARCHAR) AS tenant,                       -- VARCHAR: tenant
    CAST(namespace AS VARCHAR) AS namespace,                 -- VARCHAR: Kubernetes namespace
    CAST(pod AS VARCHAR) AS pod,                             -- VARCHAR: pod name
    CAST(node AS VARCHAR) AS node,                           -- VARCHAR: Kubernetes node / host name
    CAST(gpu_model AS VARCHAR) AS gpu_model,                 -- VARCHAR: GPU model
    CAST(gpu_uuid AS VARCHAR) AS gpu_uuid,                   -- VARCHAR: GPU or MIG UUID; null when neither the job nor telemetry names it
    CAST(share AS DOUBLE) AS share,                          -- DOUBLE: share of that GPU held (1.0 whole, 0.5 half, 1/7 a 1g MIG slice)
    CAST(start AS TIMESTAMP WITH TIME ZONE) AS start,        -- TIMESTAMP WITH TIME ZONE: bound, UTC
    CAST("end" AS TIMESTAMP WITH TIME ZONE) AS "end",        -- TIMESTAMP WITH TIME ZONE: released, UTC (the analysis time while still held)
    CAST(open AS BOOLEAN) AS open,                           -- BOOLEAN: still held at the analysis time
    CAST(workload_class AS VARCHAR) AS workload_class,       -- VARCHAR: the job's class: training, inference, notebook, evaluation, other; null in rows written before it
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM (SELECT * FROM read_parquet(getvariable('gpuledger_lake') || '/gpu_allocations/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE})
    UNION ALL BY NAME SELECT NULL::VARCHAR AS workload_class WHERE false);
