-- health_events: one health event.
-- Time column: ts (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW health_events AS
SELECT
    CAST(ts AS TIMESTAMP WITH TIME ZONE) AS ts,              -- TIMESTAMP WITH TIME ZONE: when it happened or was seen, UTC
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(node AS VARCHAR) AS node,                           -- VARCHAR: Kubernetes node / host name
    CAST(gpu_uuid AS VARCHAR) AS gpu_uuid,                   -- VARCHAR: GPU concerned, null for a node-level event
    CAST(kind AS VARCHAR) AS kind,                           -- VARCHAR: xid, ecc, lost, throttle, scrape_error, spool_corrupt, audit_unspooled
    CAST(code AS BIGINT) AS code,                            -- BIGINT: Xid number or error code, when there is one
    CAST(detail AS VARCHAR) AS detail,                       -- VARCHAR: human-readable detail
    CAST(source AS VARCHAR) AS source,                       -- VARCHAR: collector source
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/health_events/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
