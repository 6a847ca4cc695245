"""The page walk (gpuledger/parquet_pages.py) against the library it stands in for: pyarrow decoding every page with
its checksum verified (lake_check.decoded). Every single-bit flip that pyarrow's check refuses, lake_check's check
refuses too; an intact file passes both. Files of gpu_samples' columns in both data page versions, with dictionary
pages, nulls and many pages per column chunk."""

from __future__ import annotations

import datetime as dt
import io

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpuledger import parquet_pages, schema
from gpuledger.lake import conform
from gpuledger.lake_check import decoded, schema_problem, verify_bytes
from gpuledger.store.base import _dictionary_columns

T = schema.table("gpu_samples")


def _samples(n: int = 240) -> pa.Table:
    t0 = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    rows = pl.DataFrame(
        {
            "ts": [t0 + dt.timedelta(seconds=10 * (i // 4)) for i in range(n)],
            "cluster": ["c"] * n,
            "node": [f"node-{i % 3}" for i in range(n)],  # dictionary-encoded
            "gpu_uuid": [f"GPU-{i % 4}" for i in range(n)],
            "util_gpu_pct": [float((i * 37) % 101) if i % 11 else None for i in range(n)],  # with nulls
            "energy_j": [1000.0 + i for i in range(n)],
            "source": ["dcgm"] * n,
        }
    )
    return conform("gpu_samples", rows, file_only=True).to_arrow()


def _bytes(version: str, checksums: bool = True) -> bytes:
    """Version 1.0 pages with the lake's dictionaries (all but numbers: gpuledger.store.base), 2.0 with pyarrow's
    (every column)."""
    table = _samples()
    lake = _dictionary_columns(pl.from_arrow(table).schema) if version == "1.0" else True
    buf = io.BytesIO()
    pq.write_table(
        table,
        buf,
        compression="zstd",
        data_page_size=256,  # several pages per column chunk
        write_batch_size=32,
        data_page_version=version,
        write_page_checksum=checksums,
        use_dictionary=lake,
    )
    return buf.getvalue()


def _levels(data: bytes) -> list[tuple[int, int]]:
    schema = pq.ParquetFile(io.BytesIO(data)).schema
    return [(c.physical_type, c.max_definition_level, c.max_repetition_level) for c in schema]


def _by_pyarrow(data: bytes) -> str | None:
    """The check before the walk: pyarrow decodes every page, then the table's schema."""
    try:
        decoded(data)
        return schema_problem(T, pl.read_parquet_schema(io.BytesIO(data)))
    except (pa.ArrowException, OSError, ValueError, pl.exceptions.PolarsError, pl.exceptions.PanicException) as e:
        return str(e)


# The lake writes version 1.0 pages: every third byte there; a 2.0 page is decoded by pyarrow in both checks.
@pytest.mark.parametrize("version, every", [("1.0", 3), ("2.0", 7)])
def test_every_flip_pyarrow_refuses_the_walk_refuses(version, every):
    good = _bytes(version)
    assert verify_bytes(T, good) is None and _by_pyarrow(good) is None
    missed, both = [], 0
    for i in range(4, len(good) - 8, every):  # not the magic numbers and the footer's length; each bit in turn
        bad = bytearray(good)
        bad[i] ^= 1 << (i % 8)
        if _by_pyarrow(bytes(bad)) is not None:
            if verify_bytes(T, bytes(bad)) is None:
                missed.append(i)
            else:
                both += 1
    assert missed == [], f"flips pyarrow refused and the walk let through, at bytes {missed}"
    assert both > len(good) // every // 2  # most flips are damage that both see


def test_a_chunk_with_many_pages_is_walked_to_its_end():
    data = _bytes("1.0")
    ts = pq.read_metadata(io.BytesIO(data)).row_group(0).column(0)
    assert ts.total_compressed_size > 3 * 256 // 8  # several pages
    assert parquet_pages.check(data, _levels(data)) is None
    cut = data[: ts.data_page_offset + 10] + data[ts.data_page_offset + 11 :]  # a byte gone inside a page
    assert parquet_pages.check(cut, _levels(data)) is not None and _by_pyarrow(cut) is not None


def test_pages_without_checksums_are_left_to_pyarrow():
    plain = _bytes("1.0", checksums=False)
    with pytest.raises(parquet_pages.Unverifiable, match="has no checksum"):
        parquet_pages.check(plain, _levels(plain))
    assert verify_bytes(T, plain) is None  # decoded instead (a file from before the lake wrote checksums)
    bad = bytearray(plain)
    bad[len(plain) // 3] ^= 0xFF
    assert (verify_bytes(T, bytes(bad)) is None) == (_by_pyarrow(bytes(bad)) is None)


def test_what_is_not_a_parquet_file_is_named():
    good = _bytes("1.0")
    assert parquet_pages.check(b"PAR1", _levels(good)) == "footer cannot be read (not a Parquet file)"
    assert parquet_pages.check(good[:-8] + (10**6).to_bytes(4, "little") + b"PAR1", _levels(good)) == (
        "footer cannot be read (footer longer than the file)"
    )
    assert verify_bytes(T, good[: len(good) // 2]).startswith("cannot be read whole (Parquet magic bytes not found")
