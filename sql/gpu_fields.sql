-- gpu_fields: one GPU field per scrape that has no column in gpu_samples (long format, so no metric is thrown away).
-- Time column: ts (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW gpu_fields AS
SELECT
    ts,                                                      -- TIMESTAMP WITH TIME ZONE: scrape time, UTC
    cluster,                                                 -- VARCHAR: cluster name from config ('default' when unset)
    node,                                                    -- VARCHAR: Kubernetes node / host name
    gpu_uuid,                                                -- VARCHAR: GPU (or MIG instance) UUID
    field,                                                   -- VARCHAR: source field name, e.g. DCGM_FI_DEV_PCIE_REPLAY_COUNTER
    value,                                                   -- DOUBLE: value as the source reports it (unit in the field's documentation)
    source,                                                  -- VARCHAR: collector source
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/gpu_fields/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
