-- gpu_allocations: one interval of one job holding one GPU (or a share of it).
-- Time column: start (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW gpu_allocations AS
SELECT
    cluster,                                                 -- VARCHAR: cluster name from config ('default' when unset)
    job_id,                                                  -- VARCHAR: job id
    tenant,                                                  -- VARCHAR: tenant
    namespace,                                               -- VARCHAR: Kubernetes namespace
    pod,                                                     -- VARCHAR: pod name
    node,                                                    -- VARCHAR: Kubernetes node / host name
    gpu_model,                                               -- VARCHAR: GPU model
    gpu_uuid,                                                -- VARCHAR: GPU or MIG UUID; null when neither the job nor telemetry names it
    share,                                                   -- DOUBLE: share of that GPU held (1.0 whole, 0.5 half, 1/7 a 1g MIG slice)
    start,                                                   -- TIMESTAMP WITH TIME ZONE: bound, UTC
    "end",                                                   -- TIMESTAMP WITH TIME ZONE: released, UTC (the analysis time while still held)
    open,                                                    -- BOOLEAN: still held at the analysis time
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/gpu_allocations/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
