-- decisions: one tenant x GPU model (null = all models) at the last analysis: what the enforcer decides on.
-- Time column: computed_at (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW decisions AS
SELECT
    computed_at,                                             -- TIMESTAMP WITH TIME ZONE: when the analytics computed it, UTC
    cluster,                                                 -- VARCHAR: cluster name from config ('default' when unset)
    tenant,                                                  -- VARCHAR: tenant
    gpu_model,                                               -- VARCHAR: GPU model; null for the tenant's all-models row
    allocated_gpus,                                          -- DOUBLE: GPUs (shares) held now
    quota_gpus,                                              -- DOUBLE: quota for this model (its own entry, else '*'); null = none
    headroom_gpus,                                           -- DOUBLE: quota minus what the quota caps; null = no quota
    budget_usd,                                              -- DOUBLE: monthly budget; null = none
    spent_usd,                                               -- DOUBLE: cost plus idle share so far this month
    budget_left_usd,                                         -- DOUBLE: budget_usd - spent_usd
    budget_used_pct,                                         -- DOUBLE: 100 x spent / budget
    budget_gpu_h,                                            -- DOUBLE: monthly budget in GPU-hours; null = none
    spent_gpu_h,                                             -- DOUBLE: GPU-hours charged so far this month (cost_daily.gpu_hours)
    usage_decayed_gpu_h,                                     -- DOUBLE: GPU-hours decayed with the configured half-life
    weight_share,                                            -- DOUBLE: tenant weight / all weights (S)
    usage_share,                                             -- DOUBLE: tenant decayed usage / all decayed usage (U)
    fairshare,                                               -- DOUBLE: 2^(-U/S): 1 unused, 0.5 at its share, towards 0 above
    idle_gpus_now,                                           -- DOUBLE: GPUs it holds that were idle through the last waste window
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/decisions/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
