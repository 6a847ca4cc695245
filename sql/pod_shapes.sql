-- pod_shapes: one pod shape (CPU, GPU share, GPUs, allowed models) of an imported workload and how many pods had it: the fragmentation metric's target workload M, CPU-only pods included.
-- Time column: last_seen (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW pod_shapes AS
SELECT
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(workload AS VARCHAR) AS workload,                   -- VARCHAR: the pod list it counts, e.g. alibaba-2023/default
    CAST(cpu_milli AS BIGINT) AS cpu_milli,                  -- BIGINT: CPU request, milli-cores
    CAST(gpu_milli AS BIGINT) AS gpu_milli,                  -- BIGINT: share of each GPU, milli-GPU (1000 = whole; 0 for a CPU-only pod)
    CAST(num_gpu AS BIGINT) AS num_gpu,                      -- BIGINT: GPUs asked for (0 for a CPU-only pod)
    CAST(gpu_spec AS VARCHAR) AS gpu_spec,                   -- VARCHAR: allowed GPU models, '|'-separated; empty = any
    CAST(pods AS BIGINT) AS pods,                            -- BIGINT: pods of this shape in the workload
    CAST(first_seen AS TIMESTAMP WITH TIME ZONE) AS first_seen, -- TIMESTAMP WITH TIME ZONE: start of the time the workload covers (the trace's origin), UTC
    CAST(last_seen AS TIMESTAMP WITH TIME ZONE) AS last_seen, -- TIMESTAMP WITH TIME ZONE: end of the time the workload covers (the trace's last event), UTC
    CAST(source AS VARCHAR) AS source,                       -- VARCHAR: collector source (import)
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/pod_shapes/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
