-- nodes: one row per node (the latest GPU model, count and labels; first and last time seen).
-- Files: one node as seen by one writer over one day (the `nodes` view keeps one row per node). Time column: last_seen (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW nodes AS
WITH raw AS (SELECT * FROM read_parquet(getvariable('gpuledger_lake') || '/nodes/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE}))
SELECT
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(node AS VARCHAR) AS node,                           -- VARCHAR: Kubernetes node / host name
    CAST(arg_max(gpu_model, last_seen) AS VARCHAR) AS gpu_model, -- VARCHAR: GPU product name
    CAST(arg_max(gpu_count, last_seen) AS INTEGER) AS gpu_count, -- INTEGER: physical GPUs
    CAST(arg_max(gpu_mem_bytes, last_seen) AS BIGINT) AS gpu_mem_bytes, -- BIGINT: memory of one GPU
    CAST(arg_max(labels, last_seen) AS STRUCT("key" VARCHAR, "value" VARCHAR)[]) AS labels, -- STRUCT("key" VARCHAR, "value" VARCHAR)[]: node labels as key/value pairs
    CAST(min(first_seen) AS TIMESTAMP WITH TIME ZONE) AS first_seen, -- TIMESTAMP WITH TIME ZONE: first observation, UTC
    CAST(max(last_seen) AS TIMESTAMP WITH TIME ZONE) AS last_seen, -- TIMESTAMP WITH TIME ZONE: last observation, UTC
    CAST(arg_max(source, last_seen) AS VARCHAR) AS source,   -- VARCHAR: collector source
    max(date) AS date                                        -- DATE: UTC date of the time column (partition column)
FROM raw
GROUP BY cluster, node;
