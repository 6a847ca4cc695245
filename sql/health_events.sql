-- health_events: one health event.
-- Time column: ts (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW health_events AS
SELECT
    ts,                                                      -- TIMESTAMP WITH TIME ZONE: when it happened or was seen, UTC
    cluster,                                                 -- VARCHAR: cluster name from config ('default' when unset)
    node,                                                    -- VARCHAR: Kubernetes node / host name
    gpu_uuid,                                                -- VARCHAR: GPU concerned, null for a node-level event
    kind,                                                    -- VARCHAR: xid, ecc, lost, throttle, scrape_error, spool_corrupt, audit_unspooled
    code,                                                    -- BIGINT: Xid number or error code, when there is one
    detail,                                                  -- VARCHAR: human-readable detail
    source,                                                  -- VARCHAR: collector source
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/health_events/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
