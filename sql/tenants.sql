-- tenants: one tenant per cluster as the config said at the latest analysis run (name, namespaces, weight, budget).
-- Files: one tenant as the config said at an analysis run (the `tenants` view keeps the latest run's). Time column: computed_at (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW tenants AS
SELECT
    CAST(computed_at AS TIMESTAMP WITH TIME ZONE) AS computed_at, -- TIMESTAMP WITH TIME ZONE: the analysis run that recorded it, UTC
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(tenant AS VARCHAR) AS tenant,                       -- VARCHAR: tenant name
    CAST(namespaces AS VARCHAR[]) AS namespaces,             -- VARCHAR[]: its namespaces
    CAST(weight AS DOUBLE) AS weight,                        -- DOUBLE: fair-share weight
    CAST(budget_usd_per_month AS DOUBLE) AS budget_usd_per_month, -- DOUBLE: monthly budget; null = none
    CAST(budget_gpu_hours_per_month AS DOUBLE) AS budget_gpu_hours_per_month, -- DOUBLE: monthly budget in GPU-hours charged; null = none
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/tenants/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE})
QUALIFY computed_at = max(computed_at) OVER (PARTITION BY cluster);
