-- gpu_hourly: one GPU (or MIG instance) per UTC hour.
-- Time column: hour (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW gpu_hourly AS
SELECT
    hour,                                                    -- TIMESTAMP WITH TIME ZONE: start of the UTC hour
    cluster,                                                 -- VARCHAR: cluster name from config ('default' when unset)
    node,                                                    -- VARCHAR: Kubernetes node / host name
    gpu_uuid,                                                -- VARCHAR: GPU (or MIG instance) UUID
    parent_gpu_uuid,                                         -- VARCHAR: physical GPU of a MIG instance, null otherwise
    model,                                                   -- VARCHAR: GPU product name
    samples,                                                 -- BIGINT: samples in the hour
    allocated_ratio,                                         -- DOUBLE: fraction of samples with a pod on the GPU
    busy_ratio,                                              -- DOUBLE: fraction of samples with util_gpu_pct > 0
    util_gpu_pct_mean,                                       -- DOUBLE: mean utilization
    sm_active_ratio_mean,                                    -- DOUBLE: mean SM activity (null where the source lacks it)
    mem_used_bytes_max,                                      -- BIGINT: peak memory used
    power_w_mean,                                            -- DOUBLE: mean power draw
    energy_wh,                                               -- DOUBLE: power_w_mean x hours covered by samples
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/gpu_hourly/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
