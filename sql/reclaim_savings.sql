-- reclaim_savings: one cluster x tenant x calendar month (UTC): the GPUs `gpuledger reclaim` gave back and what they
-- cost a day. Built on reclaim_actions: only actions that took (result 'ok') and freed GPUs (deactivate, suspend,
-- delete) count; warnings, skips and failed calls free nothing. A job acted on twice in a month (deactivated, then
-- readmitted, idle and deactivated again) counts each time: each action gave its GPUs back.
-- Read the figures as a daily rate freed: the GPU-hours a day the reclaimed jobs held, and their price a day, at
-- the rate card in force when each action was taken.
CREATE OR REPLACE VIEW reclaim_savings AS
SELECT
    cluster,                                                 -- VARCHAR: cluster
    tenant,                                                  -- VARCHAR: tenant (null: jobs nobody claimed)
    CAST(date_trunc('month', ts AT TIME ZONE 'UTC') AS DATE) AS month, -- DATE: first day of the month (UTC)
    count(*) AS actions,                                     -- BIGINT: actions that freed GPUs
    count(DISTINCT job_id) AS jobs,                          -- BIGINT: jobs they acted on
    sum(gpus) AS gpus,                                       -- DOUBLE: GPUs (shares summed) given back
    sum(gpu_hours_freed_per_day) AS gpu_hours_freed_per_day, -- DOUBLE: GPU-hours a day those jobs held
    sum(usd_per_day) AS usd_per_day,                         -- DOUBLE: their price a day at the rate card
    sum(idle_s) / 3600 AS idle_gpu_job_h                     -- DOUBLE: hours those jobs had been idle when acted on
FROM reclaim_actions
WHERE result = 'ok' AND action IN ('deactivate', 'suspend', 'delete')
GROUP BY ALL;
