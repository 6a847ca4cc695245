-- queue_stats: one cluster x tenant x GPU model x size bucket: how long jobs waited for GPUs, over every scheduled job in
-- job_stats (filter job_stats yourself for a time window). Percentiles interpolate linearly (quantile_cont),
-- the same rule as analytics/queue_time.py.
CREATE OR REPLACE VIEW queue_stats AS
SELECT
    cluster,                                                 -- VARCHAR: cluster (one lake may hold several)
    tenant,                                                  -- VARCHAR: tenant
    gpu_model,                                               -- VARCHAR: GPU model asked for
    size_bucket,                                             -- VARCHAR: <1, 1, 2, 3-4, 5-8, >8 GPUs
    count(*) AS jobs,                                        -- BIGINT: scheduled jobs
    avg(queue_s) AS wait_mean_s,                             -- DOUBLE: mean wait
    quantile_cont(queue_s, 0.5) AS wait_p50_s,               -- DOUBLE: median wait
    quantile_cont(queue_s, 0.9) AS wait_p90_s,               -- DOUBLE: 90th percentile wait
    quantile_cont(queue_s, 0.99) AS wait_p99_s,              -- DOUBLE: 99th percentile wait
    max(queue_s) AS wait_max_s,                              -- DOUBLE: longest wait
    avg(expansion) AS expansion_mean                         -- DOUBLE: mean (wait + run) / run
FROM job_stats
WHERE scheduled_at IS NOT NULL
GROUP BY ALL;
