"""A central collector's round split across worker processes, one event loop and connection pool each.

One process reads about 3,000 dcgm-exporter pages a second (benchmarks/dcgm_fleet.py): the GIL keeps a round on
one core however many threads it has. With `workers` > 1, target i goes to the worker its URL hashes to (so it
stays there when a discovered list changes, and keeps its label sets, Xid state and backoff), and each worker runs
the same in-process round (DcgmSource with one worker) over its share. Batches come back pickled over a pipe, as
they are made; a worker blocks on its pipe until the parent takes its last batch, so memory stays bounded by the
batch as in one process. The parent words what spans workers: scrape errors in the order of the target list, and
one event for the round's deadline.

A worker that dies (killed, out of memory) costs its targets one round: a scrape_error event names it, and the
next round starts a new one, which knows its targets' state afresh.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing as mp
import pickle
import zlib
from collections.abc import Iterator
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING

from gpuledger.collector.dcgm.rows import RowBuilder
from gpuledger.collector.source import Batch

if TYPE_CHECKING:
    from gpuledger.collector.dcgm_source import DcgmSource, Target

log = logging.getLogger(__name__)


def shard_of(url: str, workers: int) -> int:
    return zlib.crc32(url.encode()) % workers


def deadline_detail(deadline_s: float, left: int, due: int, first: str) -> str:
    """The one event of a round cut by its deadline, in one process or across workers."""
    return (
        f"dcgm: the round's deadline of {deadline_s:g} s passed before {left} of {due} targets were scraped "
        f"(first {first}); they go first next round"
    )


class _Worker:
    def __init__(self, src: DcgmSource, n: int):
        self.n = n
        parent, child = mp.Pipe()
        # spawn: the collector has threads (the scheduler, event loops), which fork would copy half-held
        self.proc = mp.get_context("spawn").Process(
            target=_serve,
            args=(child, src.shard_args()),
            name=f"dcgm-shard-{n}",
            daemon=True,
        )
        self.proc.start()
        child.close()
        self.conn: Connection = parent
        self.urls: tuple[str, ...] | None = None  # the target list it was last sent

    def close(self) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(timeout=5)
        self.conn.close()


class ShardPool:
    """The worker processes of one DcgmSource (made at its first collect, ended by its close)."""

    def __init__(self, src: DcgmSource, workers: int):
        self.src = src
        self.workers: list[_Worker | None] = [None] * workers

    def collect(self, targets: list[Target], now_s: float) -> Iterator[Batch]:
        src, n = self.src, len(self.workers)
        index = {t.url: i for i, t in enumerate(targets)}
        shares: list[list[tuple[str, str]]] = [[] for _ in range(n)]
        for t in targets:
            shares[shard_of(t.url, n)].append((t.url, t.node))
        live: dict[Connection, _Worker] = {}
        errors: list[tuple[int, dict]] = []
        for w, share in enumerate(shares):
            if not share:
                continue
            worker = self.workers[w]
            if worker is None or not worker.proc.is_alive():
                worker = self.workers[w] = _Worker(src, w)
            urls = tuple(u for u, _ in share)
            try:
                if worker.urls != urls:
                    worker.conn.send(("targets", share))
                    worker.urls = urls
                worker.conn.send(("round", now_s))
            except OSError:  # it died since the check: its share waits for the next round, as below
                errors.append((len(targets), self._died(worker, len(share), now_s)))
                continue
            live[worker.conn] = worker
        left, due, first = 0, 0, None
        try:
            while live:
                for conn in wait(list(live)):
                    worker = live[conn]
                    try:
                        kind, payload = pickle.loads(conn.recv_bytes())
                    except (EOFError, OSError):
                        del live[conn]
                        errors.append((len(targets), self._died(worker, len(shares[worker.n]), now_s)))
                        continue
                    if kind == "batches":
                        yield from payload
                    elif kind == "errors":
                        errors += [(index.get(url, len(targets)), e) for url, e in payload]
                    else:  # "done": (not reached, due, first not reached), or None when none was due
                        del live[conn]
                        if payload is not None:
                            left, due = left + payload[0], due + payload[1]
                            url = payload[2]
                            if url is not None and (first is None or index.get(url, 0) < index.get(first, 0)):
                                first = url
        finally:
            for conn in live:  # the consumer stopped early: the workers finish their round unread
                self._drain(live[conn])
        if first is not None:
            detail = deadline_detail(src.deadline_s, left, due, first)
            log.warning("%s", detail)
            errors.append((len(targets), src._event(int(now_s * 1e6), None, detail)))
        if errors:
            errors.sort(key=lambda pe: pe[0])
            yield Batch.from_rows("health_events", [e for _, e in errors])

    def _died(self, worker: _Worker, targets: int, now_s: float) -> dict:
        worker.proc.join(timeout=5)
        worker.conn.close()
        self.workers[worker.n] = None
        detail = (
            f"dcgm: scrape worker {worker.n + 1} of {len(self.workers)} exited (code {worker.proc.exitcode}) "
            f"during the round; its {targets} targets are scraped by a new worker next round"
        )
        log.error("%s", detail)
        return self.src._event(int(now_s * 1e6), None, detail)

    @staticmethod
    def _drain(worker: _Worker) -> None:
        try:
            while pickle.loads(worker.conn.recv_bytes())[0] != "done":
                pass
        except (EOFError, OSError):
            pass

    def close(self) -> None:
        for w in self.workers:
            if w is not None:
                w.close()
        self.workers = [None] * len(self.workers)


def _serve(conn: Connection, args: dict) -> None:
    """A worker's loop: ("targets", [(url, node)]) sets its share, ("round", now_s) scrapes it, None ends it."""
    from gpuledger.collector.dcgm.columns import PageReader
    from gpuledger.collector.dcgm_source import DcgmSource, Target

    src: DcgmSource | None = None
    try:
        while (msg := conn.recv()) is not None:
            if msg[0] == "targets":
                if src is None:
                    src = DcgmSource(urls=[u for u, _ in msg[1]], **args)
                    src.apart = []
                old = {t.url: t for t in src.targets}
                src.targets = [
                    old.get(url) or Target(url, node, PageReader(RowBuilder(src.cluster), node)) for url, node in msg[1]
                ]
                src._first = 0
                continue
            assert src is not None  # the parent sends the targets before the first round
            src.apart, src.left = [], None
            for batch in src.collect(msg[1]):
                _send(conn, "batches", [batch])
            if src.apart:
                _send(conn, "errors", src.apart)
            _send(conn, "done", src.left)
            # What survives a round is the targets' state: out of the collector's way in every later round
            gc.collect()
            gc.freeze()
    except (EOFError, OSError, KeyboardInterrupt):
        pass  # the parent went away
    finally:
        if src is not None:
            src.close()


def _send(conn: Connection, kind: str, payload: object) -> None:
    conn.send_bytes(pickle.dumps((kind, payload), protocol=pickle.HIGHEST_PROTOCOL))
