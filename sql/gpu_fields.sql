-- gpu_fields: one GPU field per scrape that has no column in gpu_samples (long format, so no metric is thrown away).
-- Time column: ts (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW gpu_fields AS
SELECT
    CAST(ts AS TIMESTAMP WITH TIME ZONE) AS ts,              -- TIMESTAMP WITH TIME ZONE: scrape time, UTC
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(node AS VARCHAR) AS node,                           -- VARCHAR: Kubernetes node / host name
    CAST(gpu_uuid AS VARCHAR) AS gpu_uuid,                   -- VARCHAR: GPU (or MIG instance) UUID
    CAST(field AS VARCHAR) AS field,                         -- VARCHAR: source field name, e.g. DCGM_FI_DEV_PCIE_REPLAY_COUNTER
    CAST(value AS DOUBLE) AS value,                          -- DOUBLE: value as the source reports it (unit in the field's documentation)
    CAST(source AS VARCHAR) AS source,                       -- VARCHAR: collector source
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/gpu_fields/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
