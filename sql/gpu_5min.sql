-- gpu_5min: one GPU (or MIG instance) per 5-minute bucket.
-- Time column: bucket_start (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW gpu_5min AS
SELECT
    CAST(bucket_start AS TIMESTAMP WITH TIME ZONE) AS bucket_start, -- TIMESTAMP WITH TIME ZONE: start of the 5-minute bucket, UTC
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(node AS VARCHAR) AS node,                           -- VARCHAR: Kubernetes node / host name
    CAST(gpu_uuid AS VARCHAR) AS gpu_uuid,                   -- VARCHAR: GPU (or MIG instance) UUID
    CAST(parent_gpu_uuid AS VARCHAR) AS parent_gpu_uuid,     -- VARCHAR: physical GPU of a MIG instance, null otherwise
    CAST(model AS VARCHAR) AS model,                         -- VARCHAR: GPU product name
    CAST(samples AS BIGINT) AS samples,                      -- BIGINT: samples in the bucket
    CAST(allocated_ratio AS DOUBLE) AS allocated_ratio,      -- DOUBLE: fraction of samples with a pod on the GPU
    CAST(busy_ratio AS DOUBLE) AS busy_ratio,                -- DOUBLE: fraction of samples with util_gpu_pct > 0
    CAST(util_gpu_pct_mean AS DOUBLE) AS util_gpu_pct_mean,  -- DOUBLE: mean utilization
    CAST(sm_active_ratio_mean AS DOUBLE) AS sm_active_ratio_mean, -- DOUBLE: mean SM activity (null where the source lacks it)
    CAST(mem_used_bytes_max AS BIGINT) AS mem_used_bytes_max, -- BIGINT: peak memory used
    CAST(power_w_mean AS DOUBLE) AS power_w_mean,            -- DOUBLE: mean power draw
    CAST(energy_wh AS DOUBLE) AS energy_wh,                  -- DOUBLE: power_w_mean x hours covered by samples
    CAST(vendor AS VARCHAR) AS vendor,                       -- VARCHAR: nvidia, amd or huawei: the samples' vendor, else the model's (gpuledger/vendors.py)
    CAST(mig_profile AS VARCHAR) AS mig_profile,             -- VARCHAR: a partition row's profile as gpu_samples names it (MIG 1g.10gb, AMD cpx.nps4, Ascend vnpu-2c): the instance type the fragmentation inventory reads (gpuledger/partitions.py); null for a whole device
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM (SELECT * FROM read_parquet(getvariable('gpuledger_lake') || '/gpu_5min/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE})
    UNION ALL BY NAME SELECT NULL::VARCHAR AS vendor, NULL::VARCHAR AS mig_profile WHERE false);
