-- gpu_processes: one process on one GPU per scrape.
-- Time column: ts (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW gpu_processes AS
SELECT
    ts,                                                      -- TIMESTAMP WITH TIME ZONE: scrape time, UTC
    cluster,                                                 -- VARCHAR: cluster name from config ('default' when unset)
    node,                                                    -- VARCHAR: Kubernetes node / host name
    gpu_uuid,                                                -- VARCHAR: GPU (or MIG instance) UUID
    pid,                                                     -- BIGINT: process id on the node
    process_name,                                            -- VARCHAR: executable name
    used_mem_bytes,                                          -- BIGINT: device memory used by the process
    sm_util_pct,                                             -- FLOAT: per-process SM utilization where supported
    container,                                               -- VARCHAR: container id or name resolved from /proc/<pid>/cgroup
    pod_uid,                                                 -- VARCHAR: pod UID from /proc/<pid>/cgroup (joins jobs.job_id of source k8s)
    pod,                                                     -- VARCHAR: pod, when resolvable
    namespace,                                               -- VARCHAR: namespace, when resolvable
    source,                                                  -- VARCHAR: collector source
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/gpu_processes/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
