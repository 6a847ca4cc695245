-- idle_holds: one GPU (or share) an open job holds that is idle now: since when, at the last analysis.
-- Time column: computed_at (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW idle_holds AS
SELECT
    CAST(computed_at AS TIMESTAMP WITH TIME ZONE) AS computed_at, -- TIMESTAMP WITH TIME ZONE: when the analytics computed it, UTC
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(tenant AS VARCHAR) AS tenant,                       -- VARCHAR: tenant of the job
    CAST(gpu_model AS VARCHAR) AS gpu_model,                 -- VARCHAR: GPU model
    CAST(namespace AS VARCHAR) AS namespace,                 -- VARCHAR: Kubernetes namespace
    CAST(pod AS VARCHAR) AS pod,                             -- VARCHAR: pod name
    CAST(job_id AS VARCHAR) AS job_id,                       -- VARCHAR: job id
    CAST(node AS VARCHAR) AS node,                           -- VARCHAR: Kubernetes node / host name
    CAST(gpu_uuid AS VARCHAR) AS gpu_uuid,                   -- VARCHAR: GPU or MIG UUID
    CAST(share AS DOUBLE) AS share,                          -- DOUBLE: share of that GPU held (1.0 whole, 0.5 half, 1/7 a 1g MIG slice)
    CAST(idle_since AS TIMESTAMP WITH TIME ZONE) AS idle_since, -- TIMESTAMP WITH TIME ZONE: start of the unbroken run of idle hours up to the last complete hour, UTC
    CAST(idle_s AS DOUBLE) AS idle_s,                        -- DOUBLE: seconds idle from idle_since to the end of the last complete hour
    CAST(workload_class AS VARCHAR) AS workload_class,       -- VARCHAR: the job's class (jobs.workload_class); null for a job of none, and in rows written before it
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM (SELECT * FROM read_parquet(getvariable('gpuledger_lake') || '/idle_holds/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE})
    UNION ALL BY NAME SELECT NULL::VARCHAR AS workload_class WHERE false);
