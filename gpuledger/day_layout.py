"""How a closed day's merged file is laid out: its rows in hour order, so a reader of a few hours reads those alone.

Every input file (a collector's flush, a simulator's node-day) is in time order, but its rows are one node's:
concatenated, the day's file is sorted by node, and each row group spans the whole day. A reader that wants the
last two hours of yesterday (the analytics' look-back, every run in the first two hours after midnight) then had
no row group it could skip: at 10,000 GPUs that run took 9.1 s against 5.7 s mid-day (docs/scale.md).

Sorting the day as one frame is what it must not do: a day of 1,000 GPUs at 10 s is 8.6M samples and took 5 GB.
So the rows are bucketed by UTC hour in one streaming pass into a local scratch folder (a file per hour, the
inputs' own order kept inside it), and the hours are then handed back, in order, for the writer to stream into the
one output file, each hour its own row groups (Store.merge, store.base.write_stream): a row group's min/max of the
time column then lets a filter such as `ts >= 22:00` skip the rest of the day. Memory stays that of a streaming
copy; the cost is the day written twice, once to local scratch.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from gpuledger.schema import Table

_HOUR = "_gl_hour"
SCRATCH_ROW_GROUP = 8192


@contextlib.contextmanager
def hours(rows: pl.LazyFrame, table: Table) -> Iterator[list[pl.LazyFrame]]:
    """One closed day of `table` (rows in its file schema) as its hours in order of the table's time column, each a
    LazyFrame over local scratch files, valid inside the block. Rows whose time is null (none of ours: the time
    columns are required) come last. The rows are the inputs', each once: nothing is dropped or added."""
    with tempfile.TemporaryDirectory(prefix="gpuledger-day-") as scratch:
        rows.with_columns(pl.col(table.time_column).dt.hour().fill_null(24).alias(_HOUR)).sink_parquet(
            pl.PartitionBy(scratch, key=_HOUR, include_key=False),
            compression="lz4",
            mkdir=True,
            # Each of the 24 open hour files buffers a row group: at the default size that held 1.53 GB for a
            # day of 1,000 GPUs, at 8,192 rows 0.8 GB or less (benchmarks/RESULTS.md, issue 22).
            row_group_size=SCRATCH_ROW_GROUP,
        )
        files: dict[int, list[Path]] = {}
        for p in Path(scratch).glob(f"{_HOUR}=*/*.parquet"):
            files.setdefault(int(p.parent.name.partition("=")[2]), []).append(p)
        yield [pl.scan_parquet(sorted(files[h]), hive_partitioning=False) for h in sorted(files)] or [rows.clear()]
