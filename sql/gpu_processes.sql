-- gpu_processes: one process on one GPU per scrape.
-- Time column: ts (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW gpu_processes AS
SELECT
    CAST(ts AS TIMESTAMP WITH TIME ZONE) AS ts,              -- TIMESTAMP WITH TIME ZONE: scrape time, UTC
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(node AS VARCHAR) AS node,                           -- VARCHAR: Kubernetes node / host name
    CAST(gpu_uuid AS VARCHAR) AS gpu_uuid,                   -- VARCHAR: GPU (or MIG instance) UUID
    CAST(pid AS BIGINT) AS pid,                              -- BIGINT: process id on the node
    CAST(process_name AS VARCHAR) AS process_name,           -- VARCHAR: executable name
    CAST(used_mem_bytes AS BIGINT) AS used_mem_bytes,        -- BIGINT: device memory used by the process
    CAST(sm_util_pct AS FLOAT) AS sm_util_pct,               -- FLOAT: per-process SM utilization where supported
    CAST(container AS VARCHAR) AS container,                 -- VARCHAR: container id or name resolved from /proc/<pid>/cgroup
    CAST(pod_uid AS VARCHAR) AS pod_uid,                     -- VARCHAR: pod UID from /proc/<pid>/cgroup (joins jobs.job_id of source k8s)
    CAST(pod AS VARCHAR) AS pod,                             -- VARCHAR: pod, when resolvable
    CAST(namespace AS VARCHAR) AS namespace,                 -- VARCHAR: namespace, when resolvable
    CAST(source AS VARCHAR) AS source,                       -- VARCHAR: collector source
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/gpu_processes/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
