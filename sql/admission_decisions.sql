-- admission_decisions: one admission webhook call.
-- Time column: ts (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW admission_decisions AS
SELECT
    CAST(ts AS TIMESTAMP WITH TIME ZONE) AS ts,              -- TIMESTAMP WITH TIME ZONE: when the request was answered, UTC
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(node AS VARCHAR) AS node,                           -- VARCHAR: webhook replica that answered
    CAST(uid AS VARCHAR) AS uid,                             -- VARCHAR: AdmissionReview request uid
    CAST(tenant AS VARCHAR) AS tenant,                       -- VARCHAR: tenant resolved from the namespace
    CAST(namespace AS VARCHAR) AS namespace,                 -- VARCHAR: namespace of the object
    CAST(kind AS VARCHAR) AS kind,                           -- VARCHAR: object kind (Pod, Job, ...)
    CAST(name AS VARCHAR) AS name,                           -- VARCHAR: object name
    CAST(gpu_model AS VARCHAR) AS gpu_model,                 -- VARCHAR: GPU model asked for
    CAST(gpus AS DOUBLE) AS gpus,                            -- DOUBLE: GPUs asked for
    CAST(decision AS VARCHAR) AS decision,                   -- VARCHAR: allow, deny or warn
    CAST(policy AS VARCHAR) AS policy,                       -- VARCHAR: policy that decided
    CAST(mode AS VARCHAR) AS mode,                           -- VARCHAR: enforce, warn or dry-run
    CAST(reason AS VARCHAR) AS reason,                       -- VARCHAR: message returned to the user
    CAST(policy_version AS VARCHAR) AS policy_version,       -- VARCHAR: version of the decision table / policy
    CAST(dry_run AS BOOLEAN) AS dry_run,                     -- BOOLEAN: the request was a dryRun
    CAST(latency_s AS DOUBLE) AS latency_s,                  -- DOUBLE: time to answer
    CAST(workload_class AS VARCHAR) AS workload_class,       -- VARCHAR: the object's workload class (training, inference, notebook, evaluation, other); null in rows written before it
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM (SELECT * FROM read_parquet(getvariable('gpuledger_lake') || '/admission_decisions/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE})
    UNION ALL BY NAME SELECT NULL::VARCHAR AS workload_class WHERE false);
