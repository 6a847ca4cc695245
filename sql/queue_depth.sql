-- queue_depth: one GPU model x 5-minute tick with jobs waiting: how many jobs and GPUs were pending.
-- Time column: ts (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW queue_depth AS
SELECT
    CAST(ts AS TIMESTAMP WITH TIME ZONE) AS ts,              -- TIMESTAMP WITH TIME ZONE: the tick, UTC
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(gpu_model AS VARCHAR) AS gpu_model,                 -- VARCHAR: GPU model asked for
    CAST(pending_jobs AS BIGINT) AS pending_jobs,            -- BIGINT: jobs submitted and not yet bound at the tick
    CAST(pending_gpus AS DOUBLE) AS pending_gpus,            -- DOUBLE: GPUs those jobs ask for
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/queue_depth/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
