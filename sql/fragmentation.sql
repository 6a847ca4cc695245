-- fragmentation: one GPU model x UTC hour: free GPU capacity and how much of it the model's typical jobs cannot use.
-- Time column: ts (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW fragmentation AS
SELECT
    ts,                                                      -- TIMESTAMP WITH TIME ZONE: the hour (state at its start), UTC
    cluster,                                                 -- VARCHAR: cluster name from config ('default' when unset)
    gpu_model,                                               -- VARCHAR: GPU model
    gpus,                                                    -- BIGINT: physical GPUs of the model that reported that hour (no telemetry: in the node list)
    free_gpus,                                               -- DOUBLE: unallocated GPU capacity, in GPUs (shares summed)
    fragmented_gpus,                                         -- DOUBLE: FGD fragmentation F(M) of that capacity for the model's workload, in GPUs
    frag_rate,                                               -- DOUBLE: fragmented_gpus / free_gpus
    stranded_1gpu,                                           -- BIGINT: whole free GPUs no 1-GPU job can use (on a node with fewer free)
    stranded_2gpu,                                           -- BIGINT: whole free GPUs no 2-GPU job can use on one node
    stranded_4gpu,                                           -- BIGINT: whole free GPUs no 4-GPU job can use on one node
    stranded_8gpu,                                           -- BIGINT: whole free GPUs no 8-GPU job can use on one node
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/fragmentation/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
