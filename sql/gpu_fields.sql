-- gpu_fields: GPU fields without a column in gpu_samples, one row per field per scrape (long format).
-- Grain: one GPU field per scrape. Time column: ts (UTC). Pivot with PIVOT gpu_fields ON field USING any_value(value).
-- Defined in code in gpuledger/schema.py; tests/core/test_schema_sql.py checks that the two agree.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW gpu_fields AS
SELECT
    ts,                                                     -- TIMESTAMP WITH TIME ZONE: scrape time, UTC
    cluster,                                                -- VARCHAR: cluster name from config ('default' when unset)
    node,                                                   -- VARCHAR: Kubernetes node / host name
    gpu_uuid,                                               -- VARCHAR: GPU (or MIG instance) UUID
    field,                                                  -- VARCHAR: source field name, e.g. DCGM_FI_DEV_PCIE_REPLAY_COUNTER
    value,                                                  -- DOUBLE: value as the source reports it (unit in the field's documentation)
    source,                                                 -- VARCHAR: collector source
    date                                                    -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/gpu_fields/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
