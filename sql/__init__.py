"""DuckDB view definitions, one .sql file per view: the single place where analysts read the schema.

Before reading them, set the lake root: `SET VARIABLE gpuledger_lake = '/path/to/lake';`
"""
