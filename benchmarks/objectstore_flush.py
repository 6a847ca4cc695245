"""The collector's flush (spool -> Parquet in the lake) into an object-store lake against the same flush into a local
lake, same machine, same run: rows/s and milliseconds per flush for each, and the ratio.

    python benchmarks/objectstore_flush.py [--nodes 4] [--gpus 8] [--scrapes 3] [--flushes 20] [--tiny]
    (--tiny: 1 node, 2 flushes, so the test suite runs this script)

The batches are the simulated fleet's live scrapes (every table the sim source writes), the same ones for both lakes;
a flush takes `--scrapes` scrapes (the defaults' 30 s flush over 10 s scrapes is 3). The object store is moto's S3
server on loopback (tests/s3_server.py): single-process Python, so it, not the client, bounds the S3 figure; a real
store adds network latency per PUT instead. Local and S3 flushes alternate, so load on the shared host hits both.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from gpuledger.collector.sim_source import SimSource  # noqa: E402
from gpuledger.config import SimConfig, defaults  # noqa: E402
from gpuledger.lake import LakeWriter  # noqa: E402
from gpuledger.spool import Spool  # noqa: E402
from gpuledger.store import open_store  # noqa: E402

from s3_server import MotoServer  # noqa: E402

T0 = 1_793_491_200.0  # 2026-11-01T00:00:00Z


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--scrapes", type=int, default=3, help="scrapes per flush")
    ap.add_argument("--flushes", type=int, default=20)
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    if a.tiny:
        a.nodes, a.flushes = 1, 2
    tmp = Path(tempfile.mkdtemp())
    cfg = replace(defaults(), simulator=SimConfig(nodes=a.nodes, gpus_per_node=a.gpus, models=("H100",)))
    src = SimSource(cfg, tmp / "simstate", T0)
    rounds = [
        [b for s in range(a.scrapes) for b in src.collect(T0 + 10 * (f * a.scrapes + s + 1)) if b.rows]
        for f in range(a.flushes)
    ]
    rows_per_flush = [sum(b.rows for b in r) for r in rounds]
    with MotoServer() as srv:
        srv.create_bucket("lake-bench")
        os.environ.update(srv.env())
        lakes = {"local": tmp / "lake", "s3": open_store("s3://lake-bench/p")}
        spools, writers = {}, {}
        for name, root in lakes.items():
            spools[name], writers[name] = Spool(tmp / f"spool-{name}", "bench"), LakeWriter(root)
            writers[name].init()
            spools[name].open()
        secs: dict[str, list[float]] = {name: [] for name in lakes}
        load = os.getloadavg()
        for batches in rounds:
            for name in lakes:  # alternate, so both see the same load
                for b in batches:
                    spools[name].append(b.table, b.columns)
                t = time.perf_counter()
                spools[name].flush(writers[name])
                secs[name].append(time.perf_counter() - t)
        for s in spools.values():
            s.close()
        load = max(load[0], os.getloadavg()[0])
    rows = sum(rows_per_flush)
    print(
        f"{a.flushes} flushes of {a.scrapes} scrapes of {a.nodes} node(s) x {a.gpus} GPUs: "
        f"{rows:,} rows, {statistics.mean(rows_per_flush):,.0f} per flush; load average {load:.2f} "
        f"on {os.cpu_count()} CPUs"
    )
    rate = {}
    for name in lakes:
        rate[name] = rows / sum(secs[name])
        ms = statistics.median(secs[name]) * 1e3
        print(f"flush to {name + ' lake':<10} {rate[name]:>12,.0f} rows/s   median {ms:.1f} ms per flush")
    print(f"ratio local/s3 {rate['local'] / rate['s3']:.2f}x")


if __name__ == "__main__":
    main()
