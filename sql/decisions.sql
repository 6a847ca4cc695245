-- decisions: one tenant x GPU model (null = all models) at the last analysis: what the enforcer decides on.
-- Time column: computed_at (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW decisions AS
SELECT
    CAST(computed_at AS TIMESTAMP WITH TIME ZONE) AS computed_at, -- TIMESTAMP WITH TIME ZONE: when the analytics computed it, UTC
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(tenant AS VARCHAR) AS tenant,                       -- VARCHAR: tenant
    CAST(gpu_model AS VARCHAR) AS gpu_model,                 -- VARCHAR: GPU model; null for the tenant's all-models row
    CAST(allocated_gpus AS DOUBLE) AS allocated_gpus,        -- DOUBLE: GPUs (shares) held now
    CAST(quota_gpus AS DOUBLE) AS quota_gpus,                -- DOUBLE: quota for this model (its own entry, else '*'); null = none
    CAST(headroom_gpus AS DOUBLE) AS headroom_gpus,          -- DOUBLE: quota minus what the quota caps; null = no quota
    CAST(budget_usd AS DOUBLE) AS budget_usd,                -- DOUBLE: monthly budget; null = none
    CAST(spent_usd AS DOUBLE) AS spent_usd,                  -- DOUBLE: cost plus idle share so far this month
    CAST(budget_left_usd AS DOUBLE) AS budget_left_usd,      -- DOUBLE: budget_usd - spent_usd
    CAST(budget_used_pct AS DOUBLE) AS budget_used_pct,      -- DOUBLE: 100 x spent / budget
    CAST(budget_gpu_h AS DOUBLE) AS budget_gpu_h,            -- DOUBLE: monthly budget in GPU-hours; null = none
    CAST(spent_gpu_h AS DOUBLE) AS spent_gpu_h,              -- DOUBLE: GPU-hours charged so far this month (cost_daily.gpu_hours)
    CAST(usage_decayed_gpu_h AS DOUBLE) AS usage_decayed_gpu_h, -- DOUBLE: GPU-hours decayed with the configured half-life
    CAST(weight_share AS DOUBLE) AS weight_share,            -- DOUBLE: tenant weight / all weights (S)
    CAST(usage_share AS DOUBLE) AS usage_share,              -- DOUBLE: tenant decayed usage / all decayed usage (U)
    CAST(fairshare AS DOUBLE) AS fairshare,                  -- DOUBLE: 2^(-U/S): 1 unused, 0.5 at its share, towards 0 above
    CAST(idle_gpus_now AS DOUBLE) AS idle_gpus_now,          -- DOUBLE: GPUs it holds that were idle through the last waste window
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/decisions/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
