-- chargeback_monthly: one tenant x calendar month (UTC): what it is charged, its share of idle capacity, the total,
-- and that against its monthly budget. Built on cost_daily and tenants. A null tenant is the GPU time of jobs
-- nobody claimed (no tenant owns their namespace): charged, but to no one; never dropped. Idle capacity that the
-- idle policy gives to no one (policy none) is not a charge and is not here. One row per cluster: a budget is the
-- tenant's across clusters, so budget_used_pct is the share of it this cluster's charges used (sum over clusters).
CREATE OR REPLACE VIEW chargeback_monthly AS
WITH charged AS (
    SELECT cluster, tenant, CAST(date_trunc('month', day_start AT TIME ZONE 'UTC') AS DATE) AS month,
           sum(cost_usd) AS cost_usd, sum(idle_share_usd) AS idle_share_usd
    FROM cost_daily
    WHERE tenant IS NOT NULL OR gpu_hours > 0  -- cost_daily's tenant-less rows with GPU time are unclaimed jobs
    GROUP BY ALL
)
SELECT
    c.tenant,                                                -- VARCHAR: tenant
    c.month,                                                 -- DATE: first day of the month
    c.cost_usd,                                              -- DOUBLE: GPU-hours x rates
    c.idle_share_usd,                                        -- DOUBLE: idle capacity shared to it
    c.cost_usd + c.idle_share_usd AS total_usd,              -- DOUBLE: what it is charged
    t.budget_usd_per_month AS budget_usd,                    -- DOUBLE: its monthly budget (null: none)
    100 * (c.cost_usd + c.idle_share_usd) / t.budget_usd_per_month AS budget_used_pct, -- DOUBLE: share of budget used
    c.cluster                                                -- VARCHAR: cluster
FROM charged c
LEFT JOIN tenants t ON t.cluster = c.cluster AND t.tenant = c.tenant;
