-- jobs: the latest state of each job (raw states are append-only; this view keeps the newest per cluster and job_id).
-- Files: one state of one workload (append-only; the `jobs` view keeps the latest per job_id). Time column: updated_at (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW jobs AS
WITH raw AS NOT MATERIALIZED (SELECT * FROM (SELECT * FROM read_parquet(getvariable('gpuledger_lake') || '/jobs/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE}, filename = true, file_row_number = true)
    UNION ALL BY NAME SELECT NULL::VARCHAR AS workload_class WHERE false))
SELECT
    CAST(updated_at AS TIMESTAMP WITH TIME ZONE) AS updated_at, -- TIMESTAMP WITH TIME ZONE: when this state was observed, UTC
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(job_id AS VARCHAR) AS job_id,                       -- VARCHAR: stable workload id (pod UID, trace job id)
    CAST(tenant AS VARCHAR) AS tenant,                       -- VARCHAR: tenant from config (namespace -> tenant)
    CAST(namespace AS VARCHAR) AS namespace,                 -- VARCHAR: Kubernetes namespace
    CAST(pod AS VARCHAR) AS pod,                             -- VARCHAR: pod name
    CAST(queue AS VARCHAR) AS queue,                         -- VARCHAR: scheduler queue (e.g. Kueue LocalQueue)
    CAST(gpu_model AS VARCHAR) AS gpu_model,                 -- VARCHAR: requested or granted GPU model
    CAST(gpus AS DOUBLE) AS gpus,                            -- DOUBLE: GPUs requested; fractional for shared GPUs (0.5 = half a GPU)
    CAST(gpu_sharing AS VARCHAR) AS gpu_sharing,             -- VARCHAR: exclusive, fraction, time-sliced, mig, partition (AMD, Ascend), unmapped (0 GPUs)
    CAST(mig_profile AS VARCHAR) AS mig_profile,             -- VARCHAR: requested partition profile (MIG 1g.10gb, AMD cpx.nps4, Ascend310P-2c), if any
    CAST(submitted_at AS TIMESTAMP WITH TIME ZONE) AS submitted_at, -- TIMESTAMP WITH TIME ZONE: creation time, UTC
    CAST(scheduled_at AS TIMESTAMP WITH TIME ZONE) AS scheduled_at, -- TIMESTAMP WITH TIME ZONE: bound to a node, UTC
    CAST(started_at AS TIMESTAMP WITH TIME ZONE) AS started_at, -- TIMESTAMP WITH TIME ZONE: first container started, UTC
    CAST(finished_at AS TIMESTAMP WITH TIME ZONE) AS finished_at, -- TIMESTAMP WITH TIME ZONE: ended, UTC
    CAST(status AS VARCHAR) AS status,                       -- VARCHAR: pending, running, succeeded, failed, cancelled, preempted
    CAST(reason AS VARCHAR) AS reason,                       -- VARCHAR: why it ended or waits (OOMKilled, Evicted, Error, ...)
    CAST(node AS VARCHAR) AS node,                           -- VARCHAR: Kubernetes node / host name
    CAST(gpu_uuids AS VARCHAR[]) AS gpu_uuids,               -- VARCHAR[]: GPUs bound to it
    CAST(owner_kind AS VARCHAR) AS owner_kind,               -- VARCHAR: top owner kind (Job, JobSet, RayJob, ...)
    CAST(owner_name AS VARCHAR) AS owner_name,               -- VARCHAR: top owner name
    CAST(source AS VARCHAR) AS source,                       -- VARCHAR: collector source (k8s, sim, import)
    CAST(workload_class AS VARCHAR) AS workload_class,       -- VARCHAR: training, inference, notebook, evaluation, other; null in rows written before it
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM raw r
-- The newest row of each key: the row that no other row of the same key outdoes (a tie is broken by
-- file and row, so exactly one row survives). An anti-join rather than a window over every row: DuckDB
-- pushes a filter such as `WHERE date >= ...` into `r`, so a question about last week reads last week's
-- files in full and only the join keys of the rest (0.22 s against 1.0 s for a year of 1.1M jobs).
ANTI JOIN raw l ON l.cluster = r.cluster AND l.job_id = r.job_id
    AND (l.updated_at, l.filename, l.file_row_number) > (r.updated_at, r.filename, r.file_row_number);
