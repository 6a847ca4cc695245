-- class_daily: one cluster x tenant x workload class x GPU model x UTC day: what each kind of work (training,
-- inference, notebook, evaluation, other; docs/workload-classes.md) held, how busy it kept it, what it wasted and
-- cost, and how long its jobs waited. A null class is a job written before classes existed. Units in the names.
-- Built on job_hourly (held, busy, idle), cost_allocation (the jobs' cost; idle capacity has no class and is not
-- here) and job_stats (waits, by the UTC day a job was scheduled).
CREATE OR REPLACE VIEW class_daily AS
WITH use AS (
    SELECT cluster, tenant, workload_class, gpu_model, CAST(hour AT TIME ZONE 'UTC' AS DATE) AS day,
           count(DISTINCT job_id) AS jobs, sum(allocated_gpu_hours) AS allocated_gpu_hours,
           sum(busy_gpu_hours) AS busy_gpu_hours, sum(idle_gpu_hours) AS idle_gpu_hours
    FROM job_hourly
    GROUP BY ALL
), cost AS (
    SELECT a.cluster, s.tenant, s.workload_class, a.gpu_model, CAST(a.period_start AT TIME ZONE 'UTC' AS DATE) AS day,
           sum(a.cost_usd) AS cost_usd
    FROM cost_allocation a
    JOIN job_stats s ON s.cluster = a.cluster AND s.job_id = a.job_id
    WHERE a.job_id IS NOT NULL
    GROUP BY ALL
), waits AS (
    SELECT cluster, tenant, workload_class, gpu_model, CAST(scheduled_at AT TIME ZONE 'UTC' AS DATE) AS day,
           count(*) AS jobs_scheduled, quantile_cont(queue_s, 0.5) AS wait_p50_s,
           quantile_cont(queue_s, 0.95) AS wait_p95_s
    FROM job_stats
    WHERE scheduled_at IS NOT NULL
    GROUP BY ALL
), keys AS (
    SELECT cluster, tenant, workload_class, gpu_model, day FROM use
    UNION SELECT cluster, tenant, workload_class, gpu_model, day FROM waits
)
SELECT
    k.cluster,                                               -- VARCHAR: cluster
    k.tenant,                                                -- VARCHAR: tenant
    k.workload_class,                                        -- VARCHAR: training, inference, notebook, evaluation, other
    k.gpu_model,                                             -- VARCHAR: GPU model
    k.day,                                                   -- DATE: UTC day
    coalesce(u.jobs, 0) AS jobs,                             -- BIGINT: jobs that held GPUs that day
    coalesce(u.allocated_gpu_hours, 0) AS allocated_gpu_hours, -- DOUBLE: GPU-hours held
    coalesce(u.busy_gpu_hours, 0) AS busy_gpu_hours,          -- DOUBLE: of which a kernel ran (duty cycle)
    coalesce(u.idle_gpu_hours, 0) AS idle_gpu_hours,          -- DOUBLE: held but idle by the waste rule
    u.busy_gpu_hours / nullif(u.allocated_gpu_hours, 0) AS efficiency, -- DOUBLE: busy / allocated (null: nothing held)
    coalesce(c.cost_usd, 0) AS cost_usd,                     -- DOUBLE: the jobs' GPU time priced by the rate card
    coalesce(w.jobs_scheduled, 0) AS jobs_scheduled,         -- BIGINT: jobs scheduled that day
    w.wait_p50_s,                                            -- DOUBLE: their median wait (null: none scheduled)
    w.wait_p95_s                                             -- DOUBLE: their 95th percentile wait
FROM keys k
LEFT JOIN use u ON u.cluster = k.cluster AND u.tenant IS NOT DISTINCT FROM k.tenant
    AND u.workload_class IS NOT DISTINCT FROM k.workload_class AND u.gpu_model IS NOT DISTINCT FROM k.gpu_model
    AND u.day = k.day
LEFT JOIN cost c ON c.cluster = k.cluster AND c.tenant IS NOT DISTINCT FROM k.tenant
    AND c.workload_class IS NOT DISTINCT FROM k.workload_class AND c.gpu_model IS NOT DISTINCT FROM k.gpu_model
    AND c.day = k.day
LEFT JOIN waits w ON w.cluster = k.cluster AND w.tenant IS NOT DISTINCT FROM k.tenant
    AND w.workload_class IS NOT DISTINCT FROM k.workload_class AND w.gpu_model IS NOT DISTINCT FROM k.gpu_model
    AND w.day = k.day;
