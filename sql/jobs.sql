-- jobs: the latest state of each job (raw states are append-only; this view keeps the newest per cluster and job_id).
-- Files: one state of one workload (append-only; the `jobs` view keeps the latest per job_id). Time column: updated_at (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW jobs AS
WITH raw AS NOT MATERIALIZED (SELECT * FROM read_parquet(getvariable('gpuledger_lake') || '/jobs/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE}, filename = true, file_row_number = true))
SELECT
    updated_at,                                              -- TIMESTAMP WITH TIME ZONE: when this state was observed, UTC
    cluster,                                                 -- VARCHAR: cluster name from config ('default' when unset)
    job_id,                                                  -- VARCHAR: stable workload id (pod UID, trace job id)
    tenant,                                                  -- VARCHAR: tenant from config (namespace -> tenant)
    namespace,                                               -- VARCHAR: Kubernetes namespace
    pod,                                                     -- VARCHAR: pod name
    queue,                                                   -- VARCHAR: scheduler queue (e.g. Kueue LocalQueue)
    gpu_model,                                               -- VARCHAR: requested or granted GPU model
    gpus,                                                    -- DOUBLE: GPUs requested; fractional for shared GPUs (0.5 = half a GPU)
    gpu_sharing,                                             -- VARCHAR: exclusive, fraction, time-sliced or mig
    mig_profile,                                             -- VARCHAR: requested MIG profile, if any
    submitted_at,                                            -- TIMESTAMP WITH TIME ZONE: creation time, UTC
    scheduled_at,                                            -- TIMESTAMP WITH TIME ZONE: bound to a node, UTC
    started_at,                                              -- TIMESTAMP WITH TIME ZONE: first container started, UTC
    finished_at,                                             -- TIMESTAMP WITH TIME ZONE: ended, UTC
    status,                                                  -- VARCHAR: pending, running, succeeded, failed, cancelled, preempted
    reason,                                                  -- VARCHAR: why it ended or waits (OOMKilled, Evicted, Error, ...)
    node,                                                    -- VARCHAR: Kubernetes node / host name
    gpu_uuids,                                               -- VARCHAR[]: GPUs bound to it
    owner_kind,                                              -- VARCHAR: top owner kind (Job, JobSet, RayJob, ...)
    owner_name,                                              -- VARCHAR: top owner name
    source,                                                  -- VARCHAR: collector source (k8s, sim, import)
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM raw r
-- The newest row of each key: the row that no other row of the same key outdoes (a tie is broken by
-- file and row, so exactly one row survives). An anti-join rather than a window over every row: DuckDB
-- pushes a filter such as `WHERE date >= ...` into `r`, so a question about last week reads last week's
-- files in full and only the join keys of the rest (0.22 s against 1.0 s for a year of 1.1M jobs).
ANTI JOIN raw l ON l.cluster = r.cluster AND l.job_id = r.job_id
    AND (l.updated_at, l.filename, l.file_row_number) > (r.updated_at, r.filename, r.file_row_number);
