"""A closed day's merged file holds its inputs' rows, each once, in hour order (gpuledger/day_layout.py)."""

from __future__ import annotations

import datetime as dt

import polars as pl
from polars.testing import assert_frame_equal

from gpuledger import day_layout, schema
from gpuledger.compaction import compact
from gpuledger.lake import LakeWriter
from gpuledger.store.base import write_stream

T = schema.table("gpu_samples")
DAY = dt.datetime(2026, 11, 29, tzinfo=dt.timezone.utc)


def _node_day(node: str, step_min: int) -> pl.DataFrame:
    ts = pl.datetime_range(DAY, DAY + dt.timedelta(hours=23, minutes=59), f"{step_min}m", eager=True, time_zone="UTC")
    df = pl.DataFrame({"ts": ts, "node": node, "gpu_uuid": f"GPU-{node}", "source": "nvml", "cluster": "c"})
    return df.with_columns(pl.int_range(pl.len()).cast(pl.Float32).alias("util_gpu_pct"))


def _file_rows(df: pl.DataFrame) -> pl.LazyFrame:
    return df.lazy().select(
        [pl.col(c).cast(d) if c in df.columns else pl.lit(None, d).alias(c) for c, d in T.file_schema.items()]
    )


def test_rows_come_out_in_hour_order_each_once(tmp_path):
    # three nodes' files concatenated: node order, each file in time order (as compaction reads them)
    inputs = pl.concat([_node_day(n, step) for n, step in (("a", 10), ("b", 7), ("c", 60))])
    out = tmp_path / "day.parquet"
    with day_layout.hours(_file_rows(inputs), T) as parts:
        write_stream(parts, str(out))
    got = pl.read_parquet(out)
    assert got.height == 144 + 206 + 24
    hours = got["ts"].dt.hour()
    assert hours.is_sorted()  # node order would start again at 00:00 for b and c
    key = ["node", "ts"]
    assert_frame_equal(got.sort(key), _file_rows(inputs).collect().sort(key))


def test_no_rows_write_an_empty_file_of_the_schema(tmp_path):
    out = tmp_path / "empty.parquet"
    with day_layout.hours(_file_rows(_node_day("a", 60)).clear(), T) as parts:
        write_stream(parts, str(out))
    assert pl.read_parquet(out).schema == T.file_schema


def test_compaction_merges_a_closed_day_in_hour_order(tmp_path):
    lake = tmp_path / "lake"
    w = LakeWriter(lake)
    for n in ("a", "b"):
        w.write_partitions("gpu_samples", _node_day(n, 30).with_columns(pl.col("ts").dt.date().alias("date")), n)
    r = compact(lake, today=DAY.date() + dt.timedelta(days=2))
    assert (r.files_in, r.files_out, r.rows) == (2, 1, 96)
    (merged,) = (lake / "gpu_samples" / "date=2026-11-29").glob("*.parquet")
    got = pl.read_parquet(merged)
    assert got["ts"].dt.hour().is_sorted() and got["node"].n_unique() == 2
    # Each row group within an hour: a reader of a few hours skips the rest of the day by its statistics.
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(merged).metadata
    spans = {
        (s.min.hour, s.max.hour)
        for g in range(meta.num_row_groups)
        if (s := meta.row_group(g).column(T.file_schema.names().index("ts")).statistics) is not None
    }
    assert len(spans) == 24 and all(lo == hi for lo, hi in spans)
