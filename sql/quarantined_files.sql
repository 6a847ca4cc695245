-- quarantined_files: one lake file set aside: unreadable, failing its page checksums, or not of its table's schema.
-- Time column: ts (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW quarantined_files AS
SELECT
    ts,                                                      -- TIMESTAMP WITH TIME ZONE: when it was set aside, UTC
    cluster,                                                 -- VARCHAR: cluster name from config ('default' when unset)
    table_name,                                              -- VARCHAR: the table the file was in
    file,                                                    -- VARCHAR: its key in the lake, relative to the lake's root
    set_aside_as,                                            -- VARCHAR: where it is now (under _quarantine/), to inspect or put back by hand
    reason,                                                  -- VARCHAR: what is wrong with it
    size_bytes,                                              -- BIGINT: its size
    found_by,                                                -- VARCHAR: what found it: compact or analyze
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/quarantined_files/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
