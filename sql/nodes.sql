-- nodes: one row per node (the latest GPU model, count and labels; first and last time seen).
-- Files: one node as seen by one writer over one day (the `nodes` view keeps one row per node). Time column: last_seen (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW nodes AS
WITH raw AS (SELECT * FROM read_parquet(getvariable('gpuledger_lake') || '/nodes/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE}))
SELECT
    cluster,                                                 -- VARCHAR: cluster name from config ('default' when unset)
    node,                                                    -- VARCHAR: Kubernetes node / host name
    arg_max(gpu_model, last_seen) AS gpu_model,              -- VARCHAR: GPU product name
    arg_max(gpu_count, last_seen) AS gpu_count,              -- INTEGER: physical GPUs
    arg_max(gpu_mem_bytes, last_seen) AS gpu_mem_bytes,      -- BIGINT: memory of one GPU
    arg_max(labels, last_seen) AS labels,                    -- STRUCT("key" VARCHAR, "value" VARCHAR)[]: node labels as key/value pairs
    min(first_seen) AS first_seen,                           -- TIMESTAMP WITH TIME ZONE: first observation, UTC
    max(last_seen) AS last_seen,                             -- TIMESTAMP WITH TIME ZONE: last observation, UTC
    arg_max(source, last_seen) AS source,                    -- VARCHAR: collector source
    max(date) AS date                                        -- DATE: UTC date of the time column (partition column)
FROM raw
GROUP BY cluster, node;
