"""A central collector scraping many dcgm-exporter endpoints: time, peak memory and rows per second of a round.

    python benchmarks/dcgm_fleet.py [--endpoints 1000] [--rounds 3] [--concurrency 128] [--workers 1]
                                    [--spool DIR] [--close] [--reference]
    (--tiny: 4 endpoints, one round, so the test suite runs this script)

A separate process serves `--endpoints` loopback ports, each a realistic dcgm-exporter page: 8 GPUs x 40 fields
with dcgm-exporter's real label sets (built from tests/fixtures/dcgm/l4-aws-kops-...prom, the full default
scrape, plus a pod on half the GPUs), over keep-alive HTTP/1.1 as dcgm-exporter's Go server does (--close: a new
connection per request). It shares the machine's cores with the collector; its CPU per round is printed apart.
The real DcgmSource fetches, parses and turns every page into lake rows, its batches taken as the runner takes them
(one at a time, then dropped, or appended to a real spool with --spool: the runner's append, an Arrow record for a
batch of 512 rows or more, and fdatasync per batch).
--workers N splits the targets across N worker processes (collector/dcgm/shards.py); their CPU and peak RSS are
counted with the collector's. Baseline in the same run: a round with the reference path (prometheus_client's
parser, then RowBuilder) with --reference or --tiny (about 25 ms a page: 250 s a round of 10,000).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CAPTURE = REPO / "tests" / "fixtures" / "dcgm" / "l4-aws-kops-gpu-operator-580.105.08.prom"
FIELDS = 40
PER_SERVER = 4000


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


def serve(ports_q, n: int, close: bool) -> None:
    async def main():
        body = page(0)
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: "
            + str(len(body)).encode()
            + (b"\r\nConnection: close" if close else b"")
            + b"\r\n\r\n"
        )

        async def handle(reader, writer):
            try:
                while True:
                    req = await reader.readuntil(b"\r\n\r\n")
                    writer.write(head + body)
                    await writer.drain()
                    if close or b"connection: close" in req.lower():
                        break
            except (asyncio.IncompleteReadError, ConnectionError):
                pass  # the client closed a kept-alive connection
            writer.close()

        servers = [await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024) for _ in range(n)]
        ports_q.put([s.sockets[0].getsockname()[1] for s in servers])
        await asyncio.Event().wait()

    try:
        import uvloop

        uvloop.run(main())
    except ImportError:
        asyncio.run(main())


def raise_nofile(endpoints: int, concurrency: int) -> None:
    """Each kept-alive endpoint holds two descriptors on the server side (listener, connection) and one here; a
    server process serves at most PER_SERVER endpoints so that every process stays within `ulimit -Hn`."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    want = max(endpoints, 2 * min(endpoints, PER_SERVER)) + concurrency + 256
    if hard != resource.RLIM_INFINITY and hard < want:
        sys.exit(f"--endpoints {endpoints} needs {want} open files; this shell allows {hard} (ulimit -Hn)")
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def start_servers(endpoints: int, close: bool = False) -> tuple[list, list[str]]:
    """Page server processes for `endpoints` loopback ports, and the URLs of their pages."""
    ctx = mp.get_context("spawn")  # fresh interpreters: the page servers share nothing with the collector
    q = ctx.Queue()
    sizes = [min(PER_SERVER, endpoints - i) for i in range(0, endpoints, PER_SERVER)]
    servers = [ctx.Process(target=serve, args=(q, n, close), daemon=True) for n in sizes]
    for p in servers:
        p.start()
    ports = [port for _ in servers for port in q.get(timeout=300)]
    return servers, [f"http://127.0.0.1:{p}/metrics" for p in ports]


def cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of processes so far (Linux /proc)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def worker_pids(src) -> list[int]:
    shards = getattr(src, "_shards", None)
    return [w.proc.pid for w in shards.workers if w is not None] if shards is not None else []


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def one_round(src, server_pids: list[int], spool=None) -> tuple[float, int, float, float, float]:
    """(seconds, lake rows, collector CPU s, server CPU s, spool append s) of one round, its batches taken one at
    a time. Collector CPU counts the worker processes: a new worker's start (spawn, imports) falls in its round."""
    import resource

    def own() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime + cpu_s(worker_pids(src))

    c0, s0, t0 = own(), cpu_s(server_pids), time.perf_counter()
    rows, spool_s = 0, 0.0
    for b in src.collect(time.time()):
        assert b.table != "health_events", b.columns["detail"][:3]
        rows += b.rows
        if spool is not None:
            a = time.perf_counter()
            spool.append(b.table, b.columns)
            spool_s += time.perf_counter() - a
    return time.perf_counter() - t0, rows, own() - c0, cpu_s(server_pids) - s0, spool_s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoints", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--workers", type=int, default=1, help="worker processes the targets are split across")
    ap.add_argument("--spool", type=Path, help="append every batch to a spool in this (empty) directory, fsynced")
    ap.add_argument("--close", action="store_true", help="the servers close the connection after each page")
    ap.add_argument("--reference", action="store_true", help="also time a round of the reference path")
    ap.add_argument("--tiny", action="store_true", help="4 endpoints, one round: checks it runs")
    a = ap.parse_args()
    if a.tiny:
        a.endpoints, a.rounds, a.concurrency = 4, 1, 4
    import resource

    raise_nofile(a.endpoints, a.concurrency)
    sys.path.insert(0, str(REPO))
    import gpuledger.collector.dcgm_source as ds
    from gpuledger.collector.dcgm import exposition
    from gpuledger.collector.dcgm.columns import PageReader
    from gpuledger.config import Config

    servers, urls = start_servers(a.endpoints, a.close)
    samples_per_page = len(exposition.parse(page(0).decode()))
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    spool = None
    if a.spool is not None:
        from gpuledger.spool import Spool

        spool = Spool(a.spool, "bench")
        spool.open()
    worker_rss: list[float] = []

    def rounds(workers: int) -> list[tuple[float, int, float, float, float]]:
        src = ds.DcgmSource(Config(), urls, timeout_s=30, concurrency=a.concurrency, deadline_s=3600, workers=workers)
        try:
            out = [one_round(src, [p.pid for p in servers], spool) for _ in range(a.rounds)]
            worker_rss[:] = [peak_rss_mb(pid) for pid in worker_pids(src)]
            return out
        finally:
            src.close()

    load = Path("/proc/loadavg").read_text().split()[:3]
    fast = rounds(a.workers)
    load_after = Path("/proc/loadavg").read_text().split()[:3]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ref = []
    if a.reference or a.tiny:
        # The reference path for every page: the one-pass reader declines, the reference parser reads.
        saved = PageReader.read, ds.parse
        PageReader.read, ds.parse = (lambda *args: None), exposition.parse_reference
        try:
            ref = rounds(1)
        finally:
            PageReader.read, ds.parse = saved
    for p in servers:
        p.terminate()
    med = statistics.median(t for t, *_ in fast)
    rows = fast[0][1]
    cpu = statistics.median(c for _, _, c, _, _ in fast)
    srv = statistics.median(s for _, _, _, s, _ in fast)
    print(
        f"central collector: {a.endpoints} dcgm-exporter endpoints x {samples_per_page} samples "
        f"(8 GPUs x {FIELDS} fields), {a.concurrency} requests in flight, "
        f"{'a connection per request' if a.close else 'keep-alive'}, {a.rounds} rounds, "
        f"{a.workers} worker process{'es' if a.workers > 1 else ''}"
    )
    print(f"  load average                    {' '.join(load)} before, {' '.join(load_after)} after")
    print(f"  every round: wall, CPU          {', '.join(f'{t:.2f} s / {c:.2f} s' for t, _, c, _, _ in fast)}")
    print(f"  one round, fast parser          median {med:.2f} s   ({rows:,} lake rows per round)")
    if ref:
        print(f"  one round, reference parser     median {statistics.median(t for t, *_ in ref):.2f} s")
    else:
        print("  one round, reference parser     not run (--reference runs it: about 25 ms a page)")
    print(f"  lake rows per second            {rows / med:,.0f}")
    print(f"  samples per second              {a.endpoints * samples_per_page / med:,.0f}")
    print(
        f"  CPU per round                   collector {cpu:.2f} s, page servers {srv:.2f} s "
        f"({len(servers)} processes; all on the same {os.cpu_count()} cores)"
    )
    print(f"  peak RSS, collector process     {rss:.0f} MB ({rss0:.0f} MB before the first round)")
    if worker_rss:
        print(f"  peak RSS, worker processes      {', '.join(f'{r:.0f}' for r in worker_rss)} MB")
    if spool is not None:
        spooled = statistics.median(x for *_, x in fast)
        size = sum(f.stat().st_size for f in a.spool.glob("seg-*.wal"))
        mb = size / a.rounds / 1e6
        print(f"  spool append (+ fdatasync)      median {spooled:.2f} s a round, in the round; {mb:.0f} MB a round")
        print("                                  (wall time: the scrape's thread holds the GIL meanwhile)")
        spool.close()


if __name__ == "__main__":
    main()
