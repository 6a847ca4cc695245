"""What page checksums cost: the lake's writer (pyarrow, CRC32 per data page: gpuledger.store.base.write_parquet)
against polars' own writer (no checksums, the baseline), and the check of a file before it is trusted
(gpuledger.lake_check.verify_bytes: each page's checksum and header walked by gpuledger/parquet_pages.py, the
schema) against polars reading it, and against the check it replaced (pyarrow decoding every page, CRCs verified).

Two frame sizes: a collector's flush (a node's 8 GPUs for 30 s at 10 s) and a day of a 125-node fleet at 60 s
(1,000 GPUs x 1,440 samples). Also how many single-bit flips in the pages each encoding lets through as other
values with no error.

    python benchmarks/parquet_checksums.py [--tiny] [--reps 5]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from gpuledger import schema  # noqa: E402
from gpuledger.lake import conform  # noqa: E402
from gpuledger.lake_check import decoded, verify_bytes  # noqa: E402
from gpuledger.store.base import COMPRESSION, parquet_bytes  # noqa: E402


def samples(gpus: int, steps: int, seed: int = 7) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    n = gpus * steps
    t0 = 1_793_491_200_000_000  # 2026-11-01T00:00:00Z in us
    frame = pl.DataFrame(
        {
            "ts": np.repeat(t0 + np.arange(steps) * 60_000_000, gpus),
            "cluster": ["default"] * n,
            "node": [f"node-{i // 8:03d}" for i in np.tile(np.arange(gpus), steps)],
            "gpu_uuid": [f"GPU-{i:05d}" for i in np.tile(np.arange(gpus), steps)],
            "util_gpu_pct": rng.uniform(0, 100, n).round(0),
            "mem_used_bytes": rng.integers(0, 80 << 30, n),
            "power_w": rng.uniform(60, 700, n).round(1),
            "energy_j": np.cumsum(rng.uniform(0, 4e4, n)),
            "source": ["dcgm"] * n,
        }
    ).with_columns(pl.col("ts").cast(schema.UTC_US))
    return conform("gpu_samples", frame, file_only=True)


def timed(fn, reps: int) -> float:
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def polars_bytes(frame: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.write_parquet(buf, compression=COMPRESSION, statistics=True)
    return buf.getvalue()


def pages_end(data: bytes) -> int:
    """Where the column chunks end and the footer (which no checksum covers) begins."""
    import pyarrow.parquet as pq

    return len(data) - 8 - pq.ParquetFile(io.BytesIO(data)).metadata.serialized_size


def flips_read_silently(data: bytes, read, tries: int = 40) -> tuple[int, int]:
    """(flips read back as other values with no error, flips tried): one bit at each of `tries` offsets spread
    evenly over the column chunks (page headers included: a few dozen bytes each, which no page checksum covers).
    `read(bytes)` returns None where it takes the file (then read back by polars and compared), else a reason."""
    end = pages_end(data)
    offsets = list(range(4, end, max(1, (end - 4) // tries)))[:tries]
    want = pl.read_parquet(io.BytesIO(data))
    silent = 0
    for i in offsets:
        bad = bytearray(data)
        bad[i] ^= 0x01
        try:
            if read(bytes(bad)) is None and not pl.read_parquet(io.BytesIO(bytes(bad))).equals(want):
                silent += 1
        except Exception:  # noqa: BLE001 - counting the reads that fail
            pass
    return silent, len(offsets)


def flip_frame(rows: int) -> pl.DataFrame:
    """Measurements as a node writes them: a timestamp, a node, a float with no repeats, a counter."""
    rng = np.random.default_rng(1)
    return pl.DataFrame(
        {"node": rng.choice(["n1", "n2", "n3"], rows), "util": rng.random(rows), "energy_j": np.arange(rows)}
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="small frames, one repetition (the test suite's run)")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    reps = 1 if a.tiny else a.reps
    verify_bytes(schema.table("gpu_samples"), parquet_bytes(samples(8, 1)))  # pyarrow's first use: not timed
    sizes = {"flush (8 GPUs x 3)": (8, 3), "day (1,000 GPUs x 1,440)": (1000, 1440)}
    if a.tiny:
        sizes = {"flush (8 GPUs x 3)": (8, 3), "day (50 GPUs x 60)": (50, 60)}
    t = schema.table("gpu_samples")
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'frame':<26} {'rows':>10} {'polars write':>13} {'lake write':>11} {'ratio':>6} {'bytes ratio':>11}")
    for name, (gpus, steps) in sizes.items():
        frame = samples(gpus, steps)
        base, lake = polars_bytes(frame), parquet_bytes(frame)
        tw_base = timed(lambda f=frame: polars_bytes(f), reps)
        tw_lake = timed(lambda f=frame: parquet_bytes(f), reps)
        print(
            f"{name:<26} {frame.height:>10,} {tw_base * 1e3:>10.1f} ms {tw_lake * 1e3:>8.1f} ms "
            f"{tw_lake / tw_base:>5.2f}x {len(lake) / len(base):>10.2f}x"
        )
        tr_base = timed(lambda d=base: pl.read_parquet(io.BytesIO(d)), reps)
        tr_check = timed(lambda d=lake: verify_bytes(t, d), reps)
        tr_decode = timed(lambda d=lake: (decoded(d), pl.read_parquet_schema(io.BytesIO(d))), reps)
        print(
            f"{'':<26} {'':>10} {'polars read':>13} {'check':>11} {tr_check / tr_base:>5.2f}x"
            f"   ({tr_base * 1e3:.1f} ms, {tr_check * 1e3:.1f} ms)"
        )
        print(
            f"{'':<26} {'':>10} {'decoding':>13} {'check':>11} {tr_check / tr_decode:>5.2f}x"
            f"   (pyarrow decoding every page {tr_decode * 1e3:.1f} ms, the page walk {tr_check * 1e3:.1f} ms)"
        )
    frame = flip_frame(10_000 if a.tiny else 1_000_000)
    silent_base, n_base = flips_read_silently(polars_bytes(frame), lambda d: (pl.read_parquet(io.BytesIO(d)), None)[1])
    flip_table = schema.Table("flips", "", "energy_j", tuple(schema.Column(c, d, "") for c, d in frame.schema.items()))
    silent_lake, n_lake = flips_read_silently(parquet_bytes(frame), lambda d: verify_bytes(flip_table, d))
    print(
        f"single-bit flips in the pages read back silently as other values: polars {silent_base} of {n_base}, "
        f"lake + check {silent_lake} of {n_lake}"
    )


if __name__ == "__main__":
    main()
