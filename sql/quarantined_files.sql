-- quarantined_files: one lake file set aside: unreadable, failing its page checksums, or not of its table's schema.
-- Time column: ts (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW quarantined_files AS
SELECT
    CAST(ts AS TIMESTAMP WITH TIME ZONE) AS ts,              -- TIMESTAMP WITH TIME ZONE: when it was set aside, UTC
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(table_name AS VARCHAR) AS table_name,               -- VARCHAR: the table the file was in
    CAST(file AS VARCHAR) AS file,                           -- VARCHAR: its key in the lake, relative to the lake's root
    CAST(set_aside_as AS VARCHAR) AS set_aside_as,           -- VARCHAR: where it is now (under _quarantine/), to inspect or put back by hand
    CAST(reason AS VARCHAR) AS reason,                       -- VARCHAR: what is wrong with it
    CAST(size_bytes AS BIGINT) AS size_bytes,                -- BIGINT: its size
    CAST(found_by AS VARCHAR) AS found_by,                   -- VARCHAR: what found it: compact or analyze
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/quarantined_files/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
