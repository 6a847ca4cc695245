-- cost_allocation: one GPU x charge period x job holding it, plus the unallocated (idle) remainder of the GPU as a row with no job.
-- Time column: period_start (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW cost_allocation AS
SELECT
    CAST(period_start AS TIMESTAMP WITH TIME ZONE) AS period_start, -- TIMESTAMP WITH TIME ZONE: charge period start: a UTC day, cut where the model's rate changes
    CAST(period_end AS TIMESTAMP WITH TIME ZONE) AS period_end, -- TIMESTAMP WITH TIME ZONE: charge period end (exclusive)
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(gpu_uuid AS VARCHAR) AS gpu_uuid,                   -- VARCHAR: the physical GPU (a MIG slice's parent); null when no GPU is known for the job
    CAST(node AS VARCHAR) AS node,                           -- VARCHAR: Kubernetes node / host name
    CAST(gpu_model AS VARCHAR) AS gpu_model,                 -- VARCHAR: GPU model
    CAST(rate_model AS VARCHAR) AS rate_model,               -- VARCHAR: the rate card entry that prices it; null when none matches
    CAST(usd_per_gpu_hour AS DOUBLE) AS usd_per_gpu_hour,    -- DOUBLE: the rate in effect for the whole period; null when unpriced
    CAST(origin_gpu_hours AS DOUBLE) AS origin_gpu_hours,    -- DOUBLE: the GPU's time in the period: hours reported + GPU-hours held unreported
    CAST(gpu_hours AS DOUBLE) AS gpu_hours,                  -- DOUBLE: this row's GPU-hours (the job's charged time, or the idle remainder)
    CAST(cost_usd AS DOUBLE) AS cost_usd,                    -- DOUBLE: gpu_hours x usd_per_gpu_hour; null when unpriced
    CAST(charge_gpu_hours AS DECIMAL(18,9)) AS charge_gpu_hours, -- DECIMAL(18,9): gpu_hours as an exact decimal; the idle row takes the rounding remainder, so a GPU's rows of a period sum exactly to origin_charge_gpu_hours
    CAST(origin_charge_gpu_hours AS DECIMAL(18,9)) AS origin_charge_gpu_hours, -- DECIMAL(18,9): origin_gpu_hours as an exact decimal (at least the sum of the jobs'); null for a job on no known GPU
    CAST(job_id AS VARCHAR) AS job_id,                       -- VARCHAR: job id; null for the idle remainder
    CAST(tenant AS VARCHAR) AS tenant,                       -- VARCHAR: tenant of the job
    CAST(namespace AS VARCHAR) AS namespace,                 -- VARCHAR: Kubernetes namespace
    CAST(pod AS VARCHAR) AS pod,                             -- VARCHAR: pod name
    CAST(slice_uuid AS VARCHAR) AS slice_uuid,               -- VARCHAR: the MIG instance (or other sub-GPU id) the job held, when not the GPU itself
    CAST(method AS VARCHAR) AS method,                       -- VARCHAR: request or max (analytics.cost_method)
    CAST(vendor AS VARCHAR) AS vendor,                       -- VARCHAR: nvidia, amd or huawei: the GPU model's (gpuledger/vendors.py); null if none
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM (SELECT * FROM read_parquet(getvariable('gpuledger_lake') || '/cost_allocation/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE})
    UNION ALL BY NAME SELECT NULL::VARCHAR AS vendor WHERE false);
