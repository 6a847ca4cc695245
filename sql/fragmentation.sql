-- fragmentation: one GPU model x UTC hour: free GPU capacity and how much of it the model's typical jobs cannot use.
-- Time column: ts (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW fragmentation AS
SELECT
    CAST(ts AS TIMESTAMP WITH TIME ZONE) AS ts,              -- TIMESTAMP WITH TIME ZONE: the hour (state at its start), UTC
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(gpu_model AS VARCHAR) AS gpu_model,                 -- VARCHAR: GPU model
    CAST(gpus AS BIGINT) AS gpus,                            -- BIGINT: physical GPUs of the model that reported that hour (no telemetry: in the node list)
    CAST(free_gpus AS DOUBLE) AS free_gpus,                  -- DOUBLE: unallocated GPU capacity, in GPUs (shares summed)
    CAST(fragmented_gpus AS DOUBLE) AS fragmented_gpus,      -- DOUBLE: FGD fragmentation F(M) of that capacity for the model's workload, in GPUs
    CAST(frag_rate AS DOUBLE) AS frag_rate,                  -- DOUBLE: fragmented_gpus / free_gpus
    CAST(stranded_1gpu AS BIGINT) AS stranded_1gpu,          -- BIGINT: whole free GPUs no 1-GPU job can use (on a node with fewer free)
    CAST(stranded_2gpu AS BIGINT) AS stranded_2gpu,          -- BIGINT: whole free GPUs no 2-GPU job can use on one node
    CAST(stranded_4gpu AS BIGINT) AS stranded_4gpu,          -- BIGINT: whole free GPUs no 4-GPU job can use on one node
    CAST(stranded_8gpu AS BIGINT) AS stranded_8gpu,          -- BIGINT: whole free GPUs no 8-GPU job can use on one node
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/fragmentation/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
