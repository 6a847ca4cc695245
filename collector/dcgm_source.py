"""Source `dcgm`: scrape dcgm-exporter `/metrics` pages over HTTP (one node, or a central collector scraping many).

A round runs on one event loop in a thread of its own, over keep-alive connections (http_fetch.AsyncFetcher),
at most `concurrency` requests at a time: 10,000 endpoints of 8 GPUs x 40 fields take a few seconds on 2 cores
(benchmarks/dcgm_fleet.py). Each page becomes rows in one pass (dcgm/columns.py), or, for a page off that path,
through the parser and RowBuilder, which give the same rows or name the bad line. Past one core's worth of
targets (collector.dcgm_workers), the round is split across worker processes, each running this same round over
its share (dcgm/shards.py).

Each target fails alone: one that hangs, refuses, answers 500, sends the wrong content type or a malformed page
becomes a `scrape_error` health event naming the target and the reason (counted in gpuledger_scrape_errors), and
is retried with exponential backoff; the others' rows are written as usual. A hung target holds one request slot
for at most `timeout_s`, and the round stops starting requests at its deadline (the scrape interval): the targets
it did not reach are one scrape_error event and go first in the next round.

Rows leave in batches of about `chunk_rows` as the round goes, and the round waits while two batches are not yet
taken, so its memory does not grow with the number of targets.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field

from gpuledger.collector.dcgm.columns import FieldColumns, PageReader
from gpuledger.collector.dcgm.exposition import ExpositionError, parse
from gpuledger.collector.dcgm.rows import RowBuilder
from gpuledger.collector.dcgm.shards import ShardPool, deadline_detail
from gpuledger.collector.http_fetch import AsyncFetcher, FetchError, FetchTimeout, Response
from gpuledger.collector.source import Batch
from gpuledger.config import Config
from gpuledger.errors import SourceError
from gpuledger.store import LakeRef

log = logging.getLogger(__name__)
CONTENT_TYPES = ("text/plain", "application/openmetrics-text")
MAX_BACKOFF_S = 300.0
# Requests in flight. On loopback 32 already keeps the 2 cores busy parsing; a fleet's round trips of a few ms
# and exporters that take tens of ms to render need more, and each costs only a socket and one page buffer.
CONCURRENCY = 128
# gpu_fields rows per batch handed to the spool (~240 pages of 8 GPUs x 40 fields, about 10 MB of Python objects).
CHUNK_ROWS = 50_000
QUEUED_CHUNKS = 2
# Targets per worker process when collector.dcgm_workers is 0: about a second of one core a round (0.3 ms a page)
PER_WORKER = 3000


@dataclass
class Target:
    url: str
    node: str  # default node for series without a Hostname label: the target's host
    reader: PageReader  # its label sets and Xid state, kept between scrapes
    failures: int = 0
    retry_at: float = 0.0


@dataclass
class _Chunk:
    samples: list[dict] = field(default_factory=list)
    fields: FieldColumns = field(default_factory=FieldColumns)
    events: list[dict] = field(default_factory=list)
    errors: list[tuple[int, dict]] = field(default_factory=list)  # (place in the round, scrape_error event)

    def rows(self) -> int:
        return len(self.samples) + len(self.fields) + len(self.events) + len(self.errors)


class DcgmSource:
    name = "dcgm"
    example_url = "http://node:9400/metrics"

    def __init__(
        self,
        cfg: Config,
        urls: list[str] | tuple[str, ...],
        timeout_s: float = 5.0,
        concurrency: int = CONCURRENCY,
        deadline_s: float | None = None,
        chunk_rows: int = CHUNK_ROWS,
        workers: int | None = None,
    ):
        if not urls:
            raise SourceError(f"{self.name}: no URL (give --url {self.example_url} or collector.{self.name}_urls)")
        self.cfg = cfg
        self.cluster = cfg.cluster
        self.interval_s = cfg.collector.interval_s
        self.timeout_s = timeout_s
        self.concurrency = max(1, concurrency)
        self.deadline_s = max(timeout_s, cfg.collector.interval_s) if deadline_s is None else deadline_s
        self.chunk_rows = chunk_rows
        self.targets = []
        for u in urls:
            node = urllib.parse.urlparse(u).hostname or "unknown"
            self.targets.append(Target(u, node, self._reader(node)))
        self._first = 0  # where the next round starts: the first target a round cut by its deadline left out
        self._fetcher = AsyncFetcher(
            timeout_s, accept="text/plain;version=0.0.4", max_idle=_open_files(len(urls) + 512) - 256
        )
        self._loop: asyncio.AbstractEventLoop | None = None  # started by the first collect, not at construction
        self._thread: threading.Thread | None = None
        # Past one process: the targets are split across `workers` processes (dcgm/shards.py), made at first collect
        if workers is None:
            workers = cfg.collector.dcgm_workers or auto_workers(len(urls))
        self.workers = max(1, min(workers, len(urls)))
        self._shards: ShardPool | None = None
        # In a shard's worker process: scrape errors and the deadline's shortfall go to the parent apart
        self.apart: list[tuple[str, dict]] | None = None
        self.left: tuple[int, int, str | None] | None = None  # (not reached, due, first not reached): last round

    def shard_args(self) -> dict:
        """What a shard's worker process builds its DcgmSource from (dcgm/shards.py), but its URLs: the same
        limits, the requests in flight shared out."""
        return {
            "cfg": self.cfg,
            "timeout_s": self.timeout_s,
            "concurrency": -(-self.concurrency // self.workers),
            "deadline_s": self.deadline_s,
            "chunk_rows": self.chunk_rows,
            "workers": 1,
        }

    # -- one page ---------------------------------------------------------------------------------------------

    def _reader(self, node: str):
        """What turns one target's pages into rows, kept with the target between scrapes."""
        return PageReader(RowBuilder(self.cluster), node)

    @staticmethod
    def _text(target: Target, r: Response) -> str:
        """The page's text; SourceError naming the target when it is not an exposition page."""
        ctype = r.content_type.split(";")[0].strip().lower()
        if ctype not in CONTENT_TYPES:
            raise SourceError(f"{target.url}: wrong content type {r.content_type or '(none)'!r}, expected text/plain")
        try:
            return r.body.decode("utf-8")
        except UnicodeDecodeError as e:
            raise SourceError(f"{target.url}: page is not UTF-8 (byte {e.start})") from e

    def read_page(self, target: Target, r: Response, ts_us: int, chunk: _Chunk) -> None:
        """Check and read one fetched page into `chunk`; raises SourceError with the target and the reason."""
        text = self._text(target, r)
        samples = target.reader.read(text, ts_us, chunk.fields, chunk.events)
        if samples is not None:
            chunk.samples += samples
            return
        try:
            parsed = parse(text)
        except ExpositionError as e:
            raise SourceError(f"{target.url}: {e}") from e
        if not any(s[0].startswith(("DCGM_FI_", "DCGM_EXP_")) for s in parsed):
            # A 200 without one DCGM series is another exporter's page, or an empty one: a wrong URL, not an idle
            # node (every other series would be taken for a GPU's field).
            raise SourceError(f"{target.url}: no DCGM metrics on the page ({len(parsed)} samples, none DCGM_FI_*)")
        page = target.reader.builder.rows(parsed, ts_us, default_node=target.node)
        chunk.samples += page.samples
        chunk.events += page.events
        for row in page.fields:
            chunk.fields.node.append(row["node"])
            chunk.fields.gpu_uuid.append(row["gpu_uuid"])
            chunk.fields.field.append(row["field"])
            chunk.fields.value.append(row["value"])

    def _failed(self, t: Target, place: int, now_s: float, ts_us: int, e: Exception, chunk: _Chunk) -> None:
        t.failures += 1
        # The first retry is the next round (a blip); then interval x 2^(failures-1), at most MAX_BACKOFF_S.
        wait = min(self.interval_s * 2 ** (t.failures - 1), MAX_BACKOFF_S) if t.failures > 1 else 0.0
        t.retry_at = now_s + wait
        log.warning("%s: %s (failure %d; next try in %.0f s)", self.name, e, t.failures, wait)
        if self.apart is not None:
            self.apart.append((t.url, self._event(ts_us, t.node, str(e))))
        else:
            chunk.errors.append((place, self._event(ts_us, t.node, str(e))))

    def _event(self, ts_us: int, node: str | None, detail: str) -> dict:
        return {
            "ts": ts_us,
            "cluster": self.cluster,
            "node": node,
            "gpu_uuid": None,
            "kind": "scrape_error",
            "code": None,
            "detail": detail,
            "source": self.name,
        }

    def _batches(self, chunk: _Chunk, ts_us: int) -> list[Batch]:
        out = []
        if chunk.samples:
            out.append(Batch.from_rows("gpu_samples", chunk.samples))
        if len(chunk.fields):
            out.append(Batch("gpu_fields", chunk.fields.columns(ts_us, self.cluster, self.name)))
        # Scrape errors in the round's target order, not the order the answers came in: `collect --once` lists them
        events = chunk.events + [e for _, e in sorted(chunk.errors, key=lambda pe: pe[0])]
        if events:
            out.append(Batch.from_rows("health_events", events))
        return out

    # -- one round --------------------------------------------------------------------------------------------

    def collect(self, now_s: float) -> Iterator[Batch]:
        if self.workers > 1:
            if self._shards is None:
                self._shards = ShardPool(self, self.workers)
            yield from self._shards.collect(self.targets, now_s)
            return
        ts_us = int(now_s * 1e6)
        order = self.targets[self._first :] + self.targets[: self._first]
        due = [t for t in order if now_s >= t.retry_at]
        if not due:
            return
        loop = self._start_loop()
        out: queue.SimpleQueue = queue.SimpleQueue()
        rnd = _Round(self, due, now_s, ts_us, out)
        fut = asyncio.run_coroutine_threadsafe(rnd.run(), loop)
        try:
            while (batches := out.get()) is not None:
                yield from batches
                loop.call_soon_threadsafe(rnd.taken)
            fut.result()  # raises what the round raised, if anything went wrong beyond one target
        finally:
            fut.cancel()  # the consumer stopped early: stop the round too

    def _start_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            try:
                import uvloop  # a runtime dependency off Windows: a faster loop for thousands of sockets

                loop = uvloop.new_event_loop()
            except ImportError:
                loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=loop.run_forever, name="dcgm-scrape", daemon=True)
            self._thread.start()
            self._loop = loop
        return self._loop

    def close(self) -> None:
        shards, self._shards = self._shards, None
        if shards is not None:
            shards.close()
        loop, self._loop = self._loop, None
        if loop is None:
            return
        loop.call_soon_threadsafe(self._fetcher.close)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout=5)  # type: ignore[union-attr]
        if not loop.is_running():
            loop.close()


def auto_workers(targets: int) -> int:
    """`collector.dcgm_workers = 0`: one process per PER_WORKER targets, at most one per core this process may use."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, -(-targets // PER_WORKER)))


def _open_files(want: int) -> int:
    """How many files this process may open, raised toward the hard limit when short of `want`: a kept-alive
    connection per target is one (the usual soft limit of 1,024 would refuse most of 10,000 targets). Where it
    stays short, the connections past it are opened per request instead (the TCP handshake again, each round)."""
    try:
        import resource
    except ImportError:  # Windows
        return 1 << 30
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < want and soft != hard:
        try:
            new = want if hard == resource.RLIM_INFINITY else min(want, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            soft = new
        except (ValueError, OSError):
            pass
    return (1 << 30) if soft == resource.RLIM_INFINITY else soft


class _Round:
    """One round's targets, fetched by `concurrency` workers; full chunks go to `out` for the collect generator."""

    def __init__(self, src: DcgmSource, due: list[Target], now_s: float, ts_us: int, out: queue.SimpleQueue):
        self.src, self.due, self.now_s, self.ts_us, self.out = src, due, now_s, ts_us, out
        self.chunk = _Chunk()
        self.queued = 0
        self.room = asyncio.Event()
        self.room.set()
        self.left: list[Target] = []  # not reached before the deadline

    def taken(self) -> None:
        """The generator took one chunk (called on the loop's thread)."""
        self.queued -= 1
        if self.queued < QUEUED_CHUNKS:
            self.room.set()

    def _emit(self) -> None:
        chunk, self.chunk = self.chunk, _Chunk()
        self.out.put(self.src._batches(chunk, self.ts_us))
        self.queued += 1
        if self.queued >= QUEUED_CHUNKS:
            self.room.clear()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.src.deadline_s
        pending = enumerate(self.due)
        try:
            workers = [self._worker(pending, deadline) for _ in range(min(self.src.concurrency, len(self.due)))]
            await asyncio.gather(*workers)
            self._deadline_event()
            if self.chunk.rows():
                self._emit()
        finally:
            self.out.put(None)

    async def _worker(self, pending: Iterator[tuple[int, Target]], deadline: float) -> None:
        src, loop = self.src, asyncio.get_running_loop()
        for place, t in pending:  # shared by the workers: each target is taken once
            await self.room.wait()  # two full chunks wait for the spool: fetch no more until one is taken
            remaining = deadline - loop.time()
            if remaining <= 0:
                self.left.append(t)
                continue
            try:
                r = await src._fetcher.get(t.url, min(src.timeout_s, remaining))
                src.read_page(t, r, self.ts_us, self.chunk)
            except FetchTimeout as e:
                # Cut short by the round's deadline, not the request's own limit: say which limit it was.
                cut = FetchTimeout(f"{t.url}: no answer before the round's deadline of {src.deadline_s:g} s")
                src._failed(t, place, self.now_s, self.ts_us, cut if remaining < src.timeout_s else e, self.chunk)
            except (FetchError, SourceError) as e:
                src._failed(t, place, self.now_s, self.ts_us, e, self.chunk)
            else:
                t.failures, t.retry_at = 0, 0.0
            if len(self.chunk.fields) + len(self.chunk.samples) >= src.chunk_rows:
                self._emit()

    def _deadline_event(self) -> None:
        src = self.src
        src.left = (len(self.left), len(self.due), self.left[0].url if self.left else None)
        if not self.left:
            return
        src._first = src.targets.index(self.left[0])
        if src.apart is not None:
            return  # the parent words one event for every shard
        detail = deadline_detail(src.deadline_s, len(self.left), len(self.due), self.left[0].url)
        log.warning("%s", detail)
        self.chunk.errors.append((len(self.due), src._event(self.ts_us, None, detail)))


def from_config(cfg: Config, lake: LakeRef, now_s: float, urls: tuple[str, ...]) -> DcgmSource:
    """Entry point `dcgm` (collector/source.py SourceFactory): the --url pages, else the config's dcgm_urls, else
    the ready endpoints of the Service collector.dcgm_service (collector/k8s/endpoints.py)."""
    if not urls and cfg.collector.dcgm_service:
        from gpuledger.collector.k8s.endpoints import from_config as from_service  # needs the kubernetes client

        return from_service(cfg)
    return DcgmSource(cfg, urls or cfg.collector.dcgm_urls)
