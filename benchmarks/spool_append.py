"""Spool append + fsync of one 8-GPU scrape, against the bare cost of the disk.

    python benchmarks/spool_append.py [--n 2000] [--dir DIR] [--tiny]
    (--tiny: n=20, so the test suite runs this script)

The batch is a real one: the 8 GPU rows the simulated fleet's live source produces for one scrape (all
gpu_samples columns). Baseline: os.write + fdatasync of the same bytes on the same disk, which is the floor
any durable append pays. Also shown: the JSON encoding alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from gpuledger.collector.sim_source import SimSource
from gpuledger.config import SimConfig, defaults
from gpuledger.spool import Spool


def one_scrape(tmp: Path) -> dict:
    from dataclasses import replace

    cfg = replace(defaults(), simulator=SimConfig(nodes=1, gpus_per_node=8, models=("H100",)))
    src = SimSource(cfg, tmp / "lake", time.time())
    batches = {b.table: b for b in src.collect(time.time() + 1)}
    return batches["gpu_samples"].columns


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--dir", type=Path, default=None, help="a directory on the disk to measure [a temp dir]")
    ap.add_argument("--tiny", action="store_true", help="n=20: checks it runs")
    a = ap.parse_args()
    if a.tiny:
        a.n = 20
    tmp = Path(tempfile.mkdtemp(dir=a.dir))
    cols = one_scrape(tmp)
    assert len(cols["gpu_uuid"]) == 8
    sp = Spool(tmp / "spool", "bench")
    sp.open()
    t_append = []
    for _ in range(a.n):
        t0 = time.perf_counter()
        sp.append("gpu_samples", cols)
        t_append.append(time.perf_counter() - t0)
    payload = json.dumps({"t": "gpu_samples", "c": cols}, separators=(",", ":")).encode()
    fd = os.open(tmp / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    t_raw = []
    for _ in range(a.n):
        t0 = time.perf_counter()
        os.write(fd, payload)
        os.fdatasync(fd)
        t_raw.append(time.perf_counter() - t0)
    os.close(fd)
    t_json = []
    for _ in range(a.n):
        t0 = time.perf_counter()
        json.dumps({"t": "gpu_samples", "c": cols}, separators=(",", ":")).encode()
        t_json.append(time.perf_counter() - t0)
    ms = 1000
    med_a, med_r = statistics.median(t_append), statistics.median(t_raw)
    print(f"spool append + fdatasync of one 8-GPU scrape ({len(payload):,} bytes), n={a.n}")
    print(f"  spool append     median {med_a * ms:.3f} ms   p99 {pct(t_append, 0.99) * ms:.3f} ms")
    print(
        f"  baseline (disk)  median {med_r * ms:.3f} ms   p99 {pct(t_raw, 0.99) * ms:.3f} ms "
        "(os.write + fdatasync of the same bytes)"
    )
    print(f"  json encode      median {statistics.median(t_json) * ms:.3f} ms")
    print(f"  ratio            {med_a / med_r:.2f}x the bare durable write")
    sp.close()


if __name__ == "__main__":
    main()
