-- admission_decisions: one admission webhook call.
-- Time column: ts (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW admission_decisions AS
SELECT
    ts,                                                      -- TIMESTAMP WITH TIME ZONE: when the request was answered, UTC
    cluster,                                                 -- VARCHAR: cluster name from config ('default' when unset)
    node,                                                    -- VARCHAR: webhook replica that answered
    uid,                                                     -- VARCHAR: AdmissionReview request uid
    tenant,                                                  -- VARCHAR: tenant resolved from the namespace
    namespace,                                               -- VARCHAR: namespace of the object
    kind,                                                    -- VARCHAR: object kind (Pod, Job, ...)
    name,                                                    -- VARCHAR: object name
    gpu_model,                                               -- VARCHAR: GPU model asked for
    gpus,                                                    -- DOUBLE: GPUs asked for
    decision,                                                -- VARCHAR: allow, deny or warn
    policy,                                                  -- VARCHAR: policy that decided
    mode,                                                    -- VARCHAR: enforce, warn or dry-run
    reason,                                                  -- VARCHAR: message returned to the user
    policy_version,                                          -- VARCHAR: version of the decision table / policy
    dry_run,                                                 -- BOOLEAN: the request was a dryRun
    latency_s,                                               -- DOUBLE: time to answer
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/admission_decisions/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
