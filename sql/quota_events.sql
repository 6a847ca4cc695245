-- quota_events: one step of one quota request: the request, then its approval or rejection (append-only, a file per step).
-- Time column: requested_at (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW quota_events AS
SELECT
    CAST(requested_at AS TIMESTAMP WITH TIME ZONE) AS requested_at, -- TIMESTAMP WITH TIME ZONE: when the request was made, UTC (the same on every step of it)
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(ts AS TIMESTAMP WITH TIME ZONE) AS ts,              -- TIMESTAMP WITH TIME ZONE: when this step was taken, UTC
    CAST(event_id AS VARCHAR) AS event_id,                   -- VARCHAR: this step: <request_id>-request or <request_id>-decision
    CAST(request_id AS VARCHAR) AS request_id,               -- VARCHAR: the request it belongs to
    CAST(action AS VARCHAR) AS action,                       -- VARCHAR: request, approve, reject
    CAST(actor AS VARCHAR) AS actor,                         -- VARCHAR: who took the step: the requester (GPULEDGER_USER, else login) or decider
    CAST(tenant AS VARCHAR) AS tenant,                       -- VARCHAR: the tenant whose quota it raises
    CAST(gpu_model AS VARCHAR) AS gpu_model,                 -- VARCHAR: the GPU model, named as a quota key names it (H100: every model with that word)
    CAST(gpus AS DOUBLE) AS gpus,                            -- DOUBLE: GPUs added to the tenant's quota for that model while the grant is active
    CAST(valid_from AS TIMESTAMP WITH TIME ZONE) AS valid_from, -- TIMESTAMP WITH TIME ZONE: the grant applies from this time, UTC
    CAST(valid_until AS TIMESTAMP WITH TIME ZONE) AS valid_until, -- TIMESTAMP WITH TIME ZONE: to this time (exclusive), UTC
    CAST(reason AS VARCHAR) AS reason,                       -- VARCHAR: why: the requester's reason, or the approver's note
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/quota_events/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
