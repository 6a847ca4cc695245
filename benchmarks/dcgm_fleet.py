"""A central collector scraping many dcgm-exporter endpoints: time for one full round.

    python benchmarks/dcgm_fleet.py [--endpoints 1000] [--rounds 3] [--tiny]
    (--tiny: 4 endpoints, 4 threads, one round, so the test suite runs this script)

A separate process serves `--endpoints` loopback ports, each a realistic dcgm-exporter page: 8 GPUs x 40 fields
with dcgm-exporter's real label sets (built from tests/fixtures/dcgm/l4-aws-kops-...prom, the full default
scrape, plus a pod on half the GPUs). The real DcgmSource fetches, parses and turns every page into lake rows.
Baseline in the same run: the same round with the reference parser (prometheus_client) in place of the fast one.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CAPTURE = REPO / "tests" / "fixtures" / "dcgm" / "l4-aws-kops-gpu-operator-580.105.08.prom"
FIELDS = 40


def page(node: int) -> bytes:
    """8 GPUs x 40 fields: the 23 families of the real L4 scrape, plus 17 more profiling fields."""
    lines = [ln for ln in CAPTURE.read_text().splitlines() if ln and not ln.startswith("#")]
    base = []
    for ln in lines:
        name, rest = ln.split("{", 1)
        labels, value = rest.rsplit("} ", 1)
        base.append((name, labels, value))
    extra = [f"DCGM_FI_PROF_EXTRA_{i}" for i in range(FIELDS - len(base))]
    out = []
    for name, labels, value in base + [(n, base[0][1], "0.5") for n in extra]:
        for g in range(8):
            lab = re.sub(r'gpu="0"', f'gpu="{g}"', labels)
            lab = re.sub(r'UUID="GPU-[0-9a-f-]+"', f'UUID="GPU-{node:08x}-0000-4000-8000-{g:012x}"', lab)
            lab = re.sub(r'Hostname="[^"]+"', f'Hostname="node-{node:04d}"', lab)
            if g % 2:
                lab += f',container="main",namespace="team-{g}",pod="train-{node}-{g}"'
            out.append(f"{name}{{{lab}}} {value}")
    return ("\n".join(out) + "\n").encode()


def serve(ports_q, n: int, ready) -> None:
    async def main():
        body = page(0)
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\nConnection: close\r\n\r\n"
        )

        async def handle(reader, writer):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(head + body)
            await writer.drain()
            writer.close()

        servers = [await asyncio.start_server(handle, "127.0.0.1", 0, backlog=256) for _ in range(n)]
        ports_q.put([s.sockets[0].getsockname()[1] for s in servers])
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def round_s(src) -> float:
    t0 = time.perf_counter()
    batches = list(src.collect(time.time()))
    dt = time.perf_counter() - t0
    errors = [b for b in batches if b.table == "health_events"]
    assert not errors, errors[0].columns["detail"][:3]
    return dt, sum(b.rows for b in batches if b.table == "gpu_samples")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoints", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=64)
    ap.add_argument("--tiny", action="store_true", help="4 endpoints, one round: checks it runs")
    a = ap.parse_args()
    if a.tiny:
        a.endpoints, a.rounds, a.workers = 4, 1, 4
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (8192, 8192))
    sys.path.insert(0, str(REPO))
    from gpuledger.collector.dcgm import exposition
    from gpuledger.collector.dcgm_source import DcgmSource
    from gpuledger.config import Config

    q, ready = mp.Queue(), mp.Event()
    server = mp.Process(target=serve, args=(q, a.endpoints, ready), daemon=True)
    server.start()
    ports = q.get(timeout=60)
    urls = [f"http://127.0.0.1:{p}/metrics" for p in ports]
    src = DcgmSource(Config(), urls, timeout_s=30, workers=a.workers)
    samples_per_page = len(exposition.parse(page(0).decode()))
    fast = [round_s(src) for _ in range(a.rounds)]
    import gpuledger.collector.dcgm_source as ds

    ds.parse, saved = exposition.parse_reference, ds.parse
    try:
        ref = [round_s(src) for _ in range(a.rounds)]
    finally:
        ds.parse = saved
    server.terminate()
    med_fast = statistics.median(t for t, _ in fast)
    med_ref = statistics.median(t for t, _ in ref)
    print(
        f"central collector: {a.endpoints} dcgm-exporter endpoints x {samples_per_page} samples "
        f"(8 GPUs x {FIELDS} fields), {a.workers} fetch threads, {a.rounds} rounds"
    )
    print(f"  one round, fast parser          median {med_fast:.2f} s   ({fast[0][1]:,} GPU rows per round)")
    print(f"  one round, reference parser     median {med_ref:.2f} s   (prometheus_client, same pages)")
    print(f"  samples per second (fast)       {a.endpoints * samples_per_page / med_fast:,.0f}")
    print(f"  ratio reference / fast          {med_ref / med_fast:.2f}x")


if __name__ == "__main__":
    main()
