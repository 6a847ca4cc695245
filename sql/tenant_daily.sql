-- tenant_daily: one tenant x UTC day x GPU model: GPU-hours, how busy they were, idle allocated GPU-hours, cost,
-- idle capacity shared back, energy. Units in the names. A null tenant is idle capacity nobody was charged for.
-- Built on the analytics tables cost_daily (cost, idle share, energy) and job_hourly (busy and idle GPU-hours).
CREATE OR REPLACE VIEW tenant_daily AS
WITH use AS (
    SELECT cluster, tenant, CAST(hour AT TIME ZONE 'UTC' AS DATE) AS day, gpu_model,
           sum(busy_gpu_hours) AS busy_gpu_hours, sum(idle_gpu_hours) AS idle_allocated_gpu_hours
    FROM job_hourly
    GROUP BY ALL
)
SELECT
    c.cluster,                                               -- VARCHAR: cluster
    c.tenant,                                                -- VARCHAR: tenant (null: unshared idle capacity)
    CAST(c.day_start AT TIME ZONE 'UTC' AS DATE) AS day,     -- DATE: UTC day
    c.gpu_model,                                             -- VARCHAR: GPU model
    c.gpu_hours,                                             -- DOUBLE: GPU-hours charged
    coalesce(u.busy_gpu_hours, 0) AS busy_gpu_hours,          -- DOUBLE: of which a kernel ran (duty cycle)
    coalesce(u.idle_allocated_gpu_hours, 0) AS idle_allocated_gpu_hours, -- DOUBLE: allocated but idle (waste rule)
    c.cost_usd,                                              -- DOUBLE: GPU-hours x rate (null: no rate for the model)
    c.idle_share_usd,                                        -- DOUBLE: idle capacity cost shared to the tenant
    c.energy_kwh                                             -- DOUBLE: measured GPU energy, split by shares held
FROM cost_daily c
LEFT JOIN use u
    ON u.cluster = c.cluster AND u.tenant IS NOT DISTINCT FROM c.tenant AND u.day = CAST(c.day_start AT TIME ZONE 'UTC' AS DATE)
   AND u.gpu_model IS NOT DISTINCT FROM c.gpu_model;
