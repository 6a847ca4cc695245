-- node_claims: one node name of a cluster that two machines claim, per UTC day. Two collectors given the same
-- collector.node (or host name) in one cluster write rows that nothing tells apart but the GPUs: the lake would
-- merge two machines into one node. A machine's physical GPU has one UUID at one index, so two different physical
-- GPUs reporting at the same index of the same node within one 5-minute bucket are two machines (a GPU swapped for
-- another takes the node down for longer than that; a partition's row is its parent's GPU: a MIG instance or vNPU
-- reports at its GPU's index and is no second GPU there, an AMD partition reports at its own, so a GPU in CPX mode,
-- known by its partitions only, is checked too; two sources of one machine, nvml and dcgm, report the same UUIDs and
-- are not a claim). `gpuledger analyze` reports the last day's.
-- Filter on `date` for a window: the view reads gpu_samples, and DuckDB prunes the other days' files.
CREATE OR REPLACE VIEW node_claims AS
WITH clash AS (
    -- min and max rather than count(DISTINCT) and a list of every group's GPUs: a day of 40 nodes x 8 GPUs at 30 s
    -- (0.9 M rows) in 0.16-0.26 s against 0.58-1.29 s on a busy 2-core host; two machines are two UUIDs.
    SELECT cluster, node, date, gpu_index, time_bucket(INTERVAL 5 MINUTE, ts) AS bucket_start,
           [min(coalesce(parent_gpu_uuid, gpu_uuid)), max(coalesce(parent_gpu_uuid, gpu_uuid))] AS gpu_uuids
    FROM gpu_samples
    WHERE gpu_index IS NOT NULL
    GROUP BY ALL
    HAVING min(coalesce(parent_gpu_uuid, gpu_uuid)) <> max(coalesce(parent_gpu_uuid, gpu_uuid))
)
SELECT
    cluster,                                                 -- VARCHAR: cluster
    node,                                                    -- VARCHAR: the node name two machines claim
    date,                                                    -- DATE: UTC day
    min(bucket_start) AS first_clash,                        -- TIMESTAMP WITH TIME ZONE: first 5-minute bucket
    max(bucket_start) + INTERVAL 5 MINUTE AS last_clash,     -- TIMESTAMP WITH TIME ZONE: end of the last one
    count(DISTINCT bucket_start) AS buckets,                 -- BIGINT: 5-minute buckets with two GPUs at an index
    list_sort(list_distinct(flatten(list(gpu_uuids)))) AS gpu_uuids -- VARCHAR[]: the GPUs the two machines report
FROM clash
GROUP BY cluster, node, date;
