"""Measure each way our libraries read and write the lake's Parquet on an S3-protocol server (moto, its own process
on loopback) against the same work on local disk: `python tests/objectstore/measure_clients.py [NODES]`.

A day of a NODES x 4-GPU fleet at 60 s (make_lake), copied to a bucket under the same keys. Prints seconds and
rows/s per step. Loopback moto is single-process Python: it, not the client, bounds the S3 figures.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import duckdb  # noqa: E402
import polars as pl  # noqa: E402
import pyarrow.dataset as pads  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from fsspec.implementations.arrow import ArrowFSWrapper  # noqa: E402

from builders import make_lake  # noqa: E402
from s3_server import KEY_ID, REGION, SECRET, MotoServer  # noqa: E402


class S3Wrapper(ArrowFSWrapper):
    protocol = ("s3",)  # DuckDB routes a path to a registered fsspec filesystem by its protocol

    @classmethod
    def _strip_protocol(cls, path):
        return super()._strip_protocol(path.removeprefix("s3://")) if isinstance(path, str) else path


def timed(label, rows, fn, results, repeat=3):
    """The median of `repeat` runs (the first pays for connections and metadata caches)."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    s = sorted(times)[len(times) // 2]
    results.append((label, s, rows / s if rows else None))
    print(f"{label:<58} {s:8.3f} s  {f'{rows / s:,.0f} rows/s' if rows else ''}", flush=True)
    return out


def main(nodes: int = 30) -> None:
    tmp = Path(tempfile.mkdtemp())
    lake = tmp / "lake"
    make_lake(lake, nodes=nodes, gpus=4, days=1)
    # The simulator writes one gpu_samples file per date; the collectors write one per node and flush, so the day is
    # split per node into files named as a collector's (writer + time range), the layout readers list and glob.
    samples = sorted((lake / "gpu_samples").rglob("*.parquet"))
    day = pl.concat([pl.read_parquet(f, hive_partitioning=False) for f in samples])
    for f in samples:
        f.unlink()
    for (node,), part in day.group_by("node", maintain_order=True):
        for (date,), chunk in part.group_by(pl.col("ts").dt.date(), maintain_order=True):
            folder = lake / "gpu_samples" / f"date={date}"
            folder.mkdir(parents=True, exist_ok=True)
            chunk.write_parquet(folder / f"part-{node}-1793491200-1793577600.parquet")
    files = sorted(lake.rglob("*.parquet"))
    samples = sorted((lake / "gpu_samples").rglob("*.parquet"))
    rows = day.height
    print(f"lake: {len(files)} files, gpu_samples {len(samples)} files, {rows:,} rows")
    results: list = []
    with MotoServer() as srv:
        bucket, prefix = "lake-bench", "p"
        srv.create_bucket(bucket)
        fs = srv.filesystem()
        base = f"{bucket}/{prefix}"

        def upload():
            for f in files:
                with fs.open_output_stream(f"{base}/{f.relative_to(lake).as_posix()}") as out:
                    out.write(f.read_bytes())

        timed(f"upload {len(files)} lake files (pyarrow fs)", 0, upload, results)
        opts = {
            "aws_endpoint_url": srv.url,
            "aws_access_key_id": KEY_ID,
            "aws_secret_access_key": SECRET,
            "aws_region": REGION,
            "aws_allow_http": "true",
        }
        out_local = tmp / "w" / "part.parquet"
        out_local.parent.mkdir()
        timed("write a day of gpu_samples: local polars", rows, lambda: day.write_parquet(out_local), results)
        timed(
            "write a day of gpu_samples: polars -> s3",
            rows,
            lambda: day.write_parquet(f"s3://{base}/w/polars.parquet", storage_options=opts),
            results,
        )
        table = day.to_arrow()
        parts = [(node, part) for (node,), part in day.group_by("node", maintain_order=True)]

        def per_node(base_url, **kw):
            for node, part in parts:
                part.write_parquet(f"{base_url}/part-{node}.parquet", **kw)

        (tmp / "pn").mkdir()
        timed(
            f"write {len(parts)} per-node files one after another: local polars",
            rows,
            lambda: per_node(tmp / "pn"),
            results,
        )
        timed(
            f"write {len(parts)} per-node files one after another: polars -> s3",
            rows,
            lambda: per_node(f"s3://{base}/pn", storage_options=opts),
            results,
        )
        timed(
            "write a day of gpu_samples: pyarrow fs -> s3",
            rows,
            lambda: pq.write_table(table, f"{base}/w/arrow.parquet", filesystem=fs),
            results,
        )
        glob_l = str(lake / "gpu_samples" / "**" / "*.parquet")
        glob_s = f"s3://{base}/gpu_samples/**/*.parquet"
        timed(
            "read gpu_samples: local polars scan",
            rows,
            lambda: pl.scan_parquet(glob_l, hive_partitioning=True).collect(),
            results,
        )
        timed(
            f"read gpu_samples, {len(samples)} files: polars scan s3",
            rows,
            lambda: pl.scan_parquet(glob_s, storage_options=opts, hive_partitioning=True).collect(),
            results,
        )
        got = timed(
            "read gpu_samples: pyarrow dataset s3",
            rows,
            lambda: pads.dataset(f"{base}/gpu_samples", filesystem=fs, partitioning="hive").to_table(),
            results,
        )
        assert got.num_rows == rows
        q = "SELECT node, count(*), avg(power_w) FROM read_parquet('{}', hive_partitioning=true) GROUP BY node"
        con = duckdb.connect()
        timed(
            "duckdb query over the gpu_samples files: local",
            rows,
            lambda: con.sql(q.format(glob_l)).fetchall(),
            results,
        )
        con.register_filesystem(S3Wrapper(fs))
        got = timed(
            "duckdb query over the gpu_samples files: s3 (fsspec on pyarrow)",
            rows,
            lambda: con.sql(q.format(glob_s)).fetchall(),
            results,
        )
        assert len(got) == nodes, got
        timed(
            "duckdb glob listing only: s3",
            0,
            lambda: con.sql(f"SELECT count(*) FROM glob('{glob_s}')").fetchall(),
            results,
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
