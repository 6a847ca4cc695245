-- reclaim_actions: one warning or action of `gpuledger reclaim` on a job holding idle GPUs (append-only; a failed call is a row too, and is tried again at the next run).
-- Time column: ts (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW reclaim_actions AS
SELECT
    CAST(ts AS TIMESTAMP WITH TIME ZONE) AS ts,              -- TIMESTAMP WITH TIME ZONE: when the call was made, UTC
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(actor AS VARCHAR) AS actor,                         -- VARCHAR: who acted: the reclaimer's identity (GPULEDGER_ACTOR, else user@host)
    CAST(action AS VARCHAR) AS action,                       -- VARCHAR: warn, deactivate (Kueue Workload), suspend (batch Job), delete (pod) or skip
    CAST(job_id AS VARCHAR) AS job_id,                       -- VARCHAR: job id (the pod's UID)
    CAST(tenant AS VARCHAR) AS tenant,                       -- VARCHAR: tenant of the job
    CAST(namespace AS VARCHAR) AS namespace,                 -- VARCHAR: Kubernetes namespace
    CAST(pod AS VARCHAR) AS pod,                             -- VARCHAR: pod name
    CAST(owner_kind AS VARCHAR) AS owner_kind,               -- VARCHAR: the object acted on when not the pod: Workload or Job
    CAST(owner_name AS VARCHAR) AS owner_name,               -- VARCHAR: its name
    CAST(workload_class AS VARCHAR) AS workload_class,       -- VARCHAR: the job's workload class (a job without one counts as other)
    CAST(gpu_model AS VARCHAR) AS gpu_model,                 -- VARCHAR: GPU model
    CAST(gpus AS DOUBLE) AS gpus,                            -- DOUBLE: GPUs (shares summed) the job holds
    CAST(idle_since AS TIMESTAMP WITH TIME ZONE) AS idle_since, -- TIMESTAMP WITH TIME ZONE: start of the unbroken run of fully idle windows, UTC
    CAST(idle_s AS DOUBLE) AS idle_s,                        -- DOUBLE: seconds of fully idle windows in that run (the streak)
    CAST(deadline AS TIMESTAMP WITH TIME ZONE) AS deadline,  -- TIMESTAMP WITH TIME ZONE: warn: when the action may follow (ts + [reclaim] grace_s), UTC
    CAST(reason AS VARCHAR) AS reason,                       -- VARCHAR: why: the rule that applied, or why nothing was done (skip)
    CAST(api_call AS VARCHAR) AS api_call,                   -- VARCHAR: the Kubernetes calls made, e.g. PATCH /apis/batch/v1/namespaces/a/jobs/b
    CAST(result AS VARCHAR) AS result,                       -- VARCHAR: ok, or the error (403 Forbidden, 404 gone, 409 Conflict, ...)
    CAST(gpu_hours_freed_per_day AS DOUBLE) AS gpu_hours_freed_per_day, -- DOUBLE: GPU-hours a day the job holds and the action gives back
    CAST(usd_per_day AS DOUBLE) AS usd_per_day,              -- DOUBLE: those GPU-hours at the current rate card; null when the model is unpriced
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/reclaim_actions/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
