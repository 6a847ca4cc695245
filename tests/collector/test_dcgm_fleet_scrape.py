"""A central collector scraping many dcgm-exporter endpoints (real HTTP servers on loopback, one port each, started
here): the rows are the reference path's rows for the same pages, exactly, over rounds; a failing target backs
off and recovers (the clock is the `now_s` each round is given); a dead target does not hold up the others; the
round's deadline; keep-alive connections the target closes; the rows come in bounded batches."""

import asyncio
import os
import re
import signal
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuledger.collector.dcgm.exposition import parse_reference
from gpuledger.collector.dcgm.rows import RowBuilder
from gpuledger.collector.dcgm.shards import shard_of
from gpuledger.collector.dcgm_source import DcgmSource
from gpuledger.collector.http_fetch import AsyncFetcher, FetchError
from gpuledger.config import CollectorConfig, Config

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"
CFG = Config(collector=CollectorConfig(interval_s=10))
T = 1_800_000_000.0


def node_page(node: int, xid: int = 0, pods: bool = True) -> bytes:
    """An 8-GPU page in dcgm-exporter's shape, from the real L4 capture's label sets (as benchmarks/dcgm_fleet.py)."""
    lines = [ln for ln in (FIX / "l4-aws-kops-gpu-operator-580.105.08.prom").read_text().splitlines() if ln[:1] != "#"]
    out = []
    for ln in [*lines, f'DCGM_FI_DEV_XID_ERRORS{{gpu="0",UUID="GPU-0",Hostname="h"}} {xid}']:
        name, rest = ln.split("{", 1)
        labels, value = rest.rsplit("} ", 1)
        for g in range(8):
            lab = re.sub(r'gpu="0"', f'gpu="{g}"', labels)
            lab = re.sub(r'UUID="GPU-[0-9a-f-]+"', f'UUID="GPU-{node:08x}-{g:04x}"', lab)
            lab = re.sub(r'Hostname="[^"]+"', f'Hostname="node-{node}"', lab)
            if pods and g % 2:
                lab += f',container="main",namespace="team-{g}",pod="train-{node}-{g}"'
            out.append(f"{name}{{{lab}}} {value}")
    return ("\n".join(out) + "\n").encode()


# Off the one-pass path (escapes, blanks, a timestamp): these go through the parser and RowBuilder.
SLOW_PAGE = (
    b'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-s",note="a \\"q\\""} 3\n'
    b'DCGM_FI_DEV_GPU_TEMP{ gpu = "0", UUID="GPU-s", note="a \\"q\\"" } 40 1800000000000\n'
)


class Endpoint(ThreadingHTTPServer):
    """One exporter on its own port, over keep-alive HTTP/1.1 like dcgm-exporter's Go server; `chunked` answers
    as Go does for a page past its buffer. `fail` answers 500 that many times; `hold` makes it wait first."""

    daemon_threads = True

    def __init__(self, page: bytes, chunked: bool = False):
        super().__init__(("127.0.0.1", 0), Handler)
        self.page, self.chunked = page, chunked
        self.fail = 0
        self.hold: threading.Event | None = None
        self.hits = 0
        self.connections = 0
        self.close_reused = False  # close a kept-alive connection when its second request comes, unanswered
        self.url = f"http://127.0.0.1:{self.server_address[1]}/metrics"
        threading.Thread(target=self.serve_forever, daemon=True).start()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Endpoint

    def log_message(self, *a):
        pass

    def do_GET(self):
        s = self.server
        self.requests = getattr(self, "requests", 0) + 1
        s.connections += self.requests == 1
        if s.close_reused and self.requests > 1:
            self.close_connection = True
            return
        s.hits += 1
        if s.hold is not None:
            s.hold.wait(60)
        if s.fail:
            s.fail -= 1
            body = b"exporter down"
            self.send_response(500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        if s.chunked:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(s.page), 4096):
                part = s.page[i : i + 4096]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(s.page)))
            self.end_headers()
            self.wfile.write(s.page)


@pytest.fixture
def endpoints():
    made: list[Endpoint] = []

    def make(page: bytes, chunked: bool = False) -> Endpoint:
        made.append(Endpoint(page, chunked))
        return made[-1]

    yield make
    for e in made:
        e.shutdown()
        e.server_close()


def silent_port() -> tuple[socket.socket, str]:
    """A port that takes connections (the kernel's backlog) and never answers: a hung exporter."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}/metrics"


def refused_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/metrics"


def table_rows(batches) -> dict[str, Counter]:
    """Rows per table as a multiset, a None column the same as one left out (as the lake reads both)."""
    out: dict[str, Counter] = {}
    for b in batches:
        for values in zip(*b.columns.values(), strict=True):
            row = {k: v for k, v in zip(b.columns, values, strict=True) if v is not None}
            out.setdefault(b.table, Counter())[repr(sorted(row.items()))] += 1
    return out


def reference_rows(pages: dict[str, bytes], builders: dict[str, RowBuilder], ts_us: int) -> dict[str, Counter]:
    rows: dict[str, list] = {"gpu_samples": [], "gpu_fields": [], "health_events": []}
    for url, page in pages.items():
        got = builders[url].rows(parse_reference(page.decode()), ts_us, default_node="127.0.0.1")
        rows["gpu_samples"] += got.samples
        rows["gpu_fields"] += got.fields
        rows["health_events"] += got.events
    out: dict[str, Counter] = {}
    for table, rs in rows.items():
        for r in rs:
            out.setdefault(table, Counter())[repr(sorted((k, v) for k, v in r.items() if v is not None))] += 1
    return out


def test_rows_are_the_reference_rows_over_rounds(endpoints):
    pages = [p.read_bytes() for p in sorted(FIX.glob("*.prom"))] + [node_page(n) for n in range(6)] + [SLOW_PAGE]
    eps = [endpoints(p, chunked=i % 2 == 1) for i, p in enumerate(pages)]
    src = DcgmSource(CFG, [e.url for e in eps], concurrency=5, chunk_rows=500)
    builders = {e.url: RowBuilder(CFG.cluster) for e in eps}
    try:
        for step in range(3):
            if step == 1:  # an Xid appears on two nodes, a node's pods go away, a capture changes its values
                eps[11].page, eps[12].page, eps[13].page = (
                    node_page(0, xid=79),
                    node_page(1, xid=13),
                    node_page(2, pods=False),
                )
                eps[0].page = eps[0].page.replace(b"} 0\n", b"} 7\n")
            batches = list(src.collect(T + 10 * step))
            want = reference_rows({e.url: e.page for e in eps}, builders, int((T + 10 * step) * 1e6))
            assert table_rows(batches) == want
            assert max(b.rows for b in batches if b.table == "gpu_fields") <= 500 + 8 * 40  # a chunk and a page
        assert "health_events" not in want  # round 3: the Xids were reported once, in round 2
    finally:
        src.close()


def test_a_failing_target_backs_off_then_recovers(endpoints):
    flaky, steady = endpoints(node_page(1)), endpoints(node_page(2))
    flaky.fail = 3
    src = DcgmSource(CFG, [flaky.url, steady.url])
    tried, errors = [], []
    try:
        for step in range(0, 110, 10):
            hits = flaky.hits
            got = table_rows(src.collect(T + step))
            if flaky.hits > hits:
                tried.append(step)
            errors.append(sum(got.get("health_events", Counter()).values()))
            nodes = {r for r in got["gpu_samples"] if "node-2" in r}
            assert len(nodes) == 8  # the steady target every round
    finally:
        src.close()
    # failure 1 at 0 s: again next round; failure 2 at 10 s: wait 20 s; failure 3 at 30 s: wait 40 s; then well.
    assert tried == [0, 10, 30, 70, 80, 90, 100]
    assert errors == [1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0]
    assert (flaky.hits, steady.hits) == (7, 11)


def test_backoff_is_capped():
    src = DcgmSource(Config(collector=CollectorConfig(interval_s=100)), [refused_url()])
    tried = []
    try:
        for step in range(0, 2000, 100):
            if any(b.table == "health_events" for b in src.collect(T + step)):
                tried.append(step)
    finally:
        src.close()
    # waits 0, 200, 300 (400 capped at MAX_BACKOFF_S), 300, ...
    assert tried == [0, 100, 300, 600, 900, 1200, 1500, 1800]


def test_a_dead_target_does_not_hold_up_the_others(endpoints):
    hung = [endpoints(node_page(90)), endpoints(node_page(91))]
    release = threading.Event()
    for h in hung:
        h.hold = release
    silent, silent_url = silent_port()
    good = [endpoints(node_page(n)) for n in range(8)]
    urls = [h.url for h in hung] + [silent_url, refused_url()] + [g.url for g in good]
    src = DcgmSource(CFG, urls, timeout_s=30, concurrency=5, chunk_rows=1)
    seen, all_good_while_held = set(), False
    try:
        for b in src.collect(T):
            if b.table == "gpu_samples":
                seen |= set(b.columns["node"])
            if seen >= {f"node-{n}" for n in range(8)} and not release.is_set():
                all_good_while_held = True  # every good page is in while the hung ones still hold their slots
                release.set()
                silent.close()
    finally:
        release.set()
        src.close()
    assert all_good_while_held
    assert {"node-90", "node-91"} <= seen  # released, they answer in the same round


def test_the_round_deadline_stops_new_requests_and_the_rest_go_first_next_round(endpoints):
    silent, silent_url = silent_port()
    a, b = endpoints(node_page(1)), endpoints(node_page(2))
    src = DcgmSource(CFG, [silent_url, a.url, b.url], timeout_s=30, concurrency=1, deadline_s=2)
    try:
        details = [d for x in src.collect(T) if x.table == "health_events" for d in x.columns["detail"]]
        assert details == [
            f"{silent_url}: no answer before the round's deadline of 2 s",
            f"dcgm: the round's deadline of 2 s passed before 2 of 3 targets were scraped (first {a.url}); "
            "they go first next round",
        ]
        assert (a.hits, b.hits) == (0, 0)
        got = table_rows(src.collect(T + 10))  # a and b first; the silent one again last, cut by the deadline
        assert (a.hits, b.hits) == (1, 1)
        assert len(got["gpu_samples"]) == 16
    finally:
        silent.close()
        src.close()


def test_a_kept_alive_connection_the_target_closes_is_opened_again(endpoints):
    e = endpoints(node_page(3))
    e.close_reused = True
    src = DcgmSource(CFG, [e.url])
    try:
        for step in range(3):
            got = table_rows(src.collect(T + 10 * step))
            assert "health_events" not in got and len(got["gpu_samples"]) == 8
    finally:
        src.close()
    assert e.hits == 3


def test_fetch_errors_name_the_url_and_the_reason(endpoints):
    big, down = endpoints(node_page(4)), endpoints(b"")
    down.fail = 1
    garbage, garbage_url = silent_port()

    async def run():
        f = AsyncFetcher(timeout_s=5, max_bytes=1000)
        got = []
        for url in (big.url, down.url, refused_url()):
            with pytest.raises(FetchError) as e:
                await f.get(url)
            got.append(str(e.value))
        f.close()
        return got

    def answer_garbage():
        conn, _ = garbage.accept()
        conn.recv(4096)
        conn.sendall(b"hello, this is not HTTP\r\n\r\n")
        conn.close()

    threading.Thread(target=answer_garbage, daemon=True).start()
    msgs = asyncio.run(run())
    assert msgs[:2] == [f"{big.url}: response larger than 1,000 bytes", f"{down.url}: HTTP 500 Internal Server Error"]
    assert msgs[2].endswith(": connection refused")

    async def bad():
        with pytest.raises(FetchError, match=rf"^{re.escape(garbage_url)}: bad HTTP response"):
            await AsyncFetcher(timeout_s=5).get(garbage_url)

    asyncio.run(bad())
    garbage.close()


@pytest.mark.parametrize("max_idle, connections", [(10, 1), (0, 3)])
def test_connections_are_kept_up_to_max_idle(endpoints, max_idle, connections):
    # Each kept connection is an open file: past max_idle (what the open-files limit allows) one is closed after
    # its answer, and the next request opens another.
    e = endpoints(node_page(5))

    async def run():
        f = AsyncFetcher(timeout_s=5, max_idle=max_idle)
        for _ in range(3):
            assert len((await f.get(e.url)).body) == len(e.page)
        f.close()

    asyncio.run(run())
    assert (e.hits, e.connections) == (3, connections)


# -- the round split across worker processes (collector/dcgm/shards.py) ---------------------------------------------


def test_two_workers_give_the_rows_of_one_process_over_rounds(endpoints):
    pages = [p.read_bytes() for p in sorted(FIX.glob("*.prom"))] + [node_page(n) for n in range(6)] + [SLOW_PAGE]
    eps = [endpoints(p) for p in pages]
    urls = [e.url for e in eps]
    assert len({shard_of(u, 2) for u in urls}) == 2  # both workers have targets
    one, two = DcgmSource(CFG, urls, chunk_rows=500), DcgmSource(CFG, urls, chunk_rows=500, workers=2)
    try:
        for step in range(3):
            if step == 1:  # an Xid appears, a node's pods go away: state kept in the worker between rounds
                eps[11].page, eps[12].page = node_page(0, xid=79), node_page(2, pods=False)
            if step == 2:
                eps[0].page = eps[0].page.replace(b"} 0\n", b"} 7\n")
            got_one, got_two = table_rows(one.collect(T + 10 * step)), table_rows(two.collect(T + 10 * step))
            assert got_two == got_one
            assert sum(got_two["gpu_samples"].values()) > 48
            assert ("health_events" in got_two) == (step > 0)  # Xid 79, then the capture's Xid 7
    finally:
        one.close()
        two.close()


def test_dcgm_workers_from_the_config(endpoints):
    # The workers are built from the same config: they must not split their share again
    eps = [endpoints(node_page(n)) for n in range(4)]
    cfg = Config(collector=CollectorConfig(interval_s=10, dcgm_workers=2))
    src = DcgmSource(cfg, [e.url for e in eps])
    try:
        assert src.workers == 2
        got = table_rows(src.collect(T))
    finally:
        src.close()
    assert "health_events" not in got and len(got["gpu_samples"]) == 32


def test_two_workers_back_off_a_failing_target_and_word_errors_in_target_order(endpoints):
    flaky, steady = endpoints(node_page(1)), endpoints(node_page(2))
    flaky.fail = 3
    dead = [refused_url() for _ in range(6)]
    urls = [*dead[:3], flaky.url, steady.url, *dead[3:]]
    src = DcgmSource(CFG, urls, workers=2)
    tried = []
    try:
        for step in range(0, 110, 10):
            hits = flaky.hits
            got = list(src.collect(T + step))
            if flaky.hits > hits:
                tried.append(step)
            if step == 0:  # every target failed once: one event each, in the order of the target list
                details = [d for b in got if b.table == "health_events" for d in b.columns["detail"]]
                assert [d.split(": ")[0] for d in details] == [*dead[:3], flaky.url, *dead[3:]]
    finally:
        src.close()
    assert tried == [0, 10, 30, 70, 80, 90, 100]  # as in one process: again, then 20 s, then 40 s
    assert (flaky.hits, steady.hits) == (7, 11)


def in_both_shards(make, n: int) -> list:
    """n things made by `make` (each with a `url`, or a (socket, url) pair) whose URLs hash to both of 2 workers."""
    made: list = []
    url = lambda m: m[1] if isinstance(m, tuple) else m.url  # noqa: E731
    while len(made) < n:
        m = make()
        if len(made) < n - 1 or len({shard_of(url(x), 2) for x in [*made, m]}) == 2:
            made.append(m)
        elif isinstance(m, tuple):
            m[0].close()
    return made


def test_two_workers_word_one_deadline_event(endpoints):
    silent = in_both_shards(silent_port, 4)  # ports are random: a few more tries may be needed
    urls = [u for _, u in silent]
    src = DcgmSource(CFG, urls, timeout_s=30, concurrency=2, deadline_s=1, workers=2)
    try:
        details = [d for b in src.collect(T) if b.table == "health_events" for d in b.columns["detail"]]
    finally:
        src.close()
        for sock, _ in silent:
            sock.close()
    # Each worker (one request in flight each) waited on one silent target and reached no other before 1 s: one
    # event per target cut short, then one for the round (not one per worker)
    cut = [d.split(": ")[0] for d in details if d.endswith(": no answer before the round's deadline of 1 s")]
    assert len(details) == 3 and len(cut) == 2
    assert {shard_of(u, 2) for u in cut} == {0, 1}
    assert details[2].startswith("dcgm: the round's deadline of 1 s passed before 2 of 4 targets were scraped")


def test_a_killed_worker_costs_its_targets_one_round(endpoints):
    made = iter(range(100))
    eps = in_both_shards(lambda: endpoints(node_page(next(made))), 6)
    urls = [e.url for e in eps]
    src = DcgmSource(CFG, urls, workers=2)
    try:
        assert len(table_rows(src.collect(T))["gpu_samples"]) == 48
        victim = src._shards.workers[0]
        os.kill(victim.proc.pid, signal.SIGKILL)
        victim.proc.join(10)
        assert len(table_rows(src.collect(T + 10))["gpu_samples"]) == 48  # a new worker, before the round
        # Killed during a round: the others' rows come, and one event names the worker
        hold = threading.Event()
        mine = [e for e in eps if shard_of(e.url, 2) == 1]
        for e in mine:
            e.hold = hold
        got: list = []

        def kill_when_held():
            while not any(e.hits > 2 for e in mine):
                time.sleep(0.01)
            os.kill(src._shards.workers[1].proc.pid, signal.SIGKILL)
            hold.set()

        threading.Thread(target=kill_when_held, daemon=True).start()
        got = list(src.collect(T + 20))
        rows = table_rows(got)
        assert sum(rows["gpu_samples"].values()) == 8 * (6 - len(mine))
        (event,) = [d for b in got if b.table == "health_events" for d in b.columns["detail"]]
        assert event.startswith("dcgm: scrape worker 2 of 2 exited (code -9) during the round")
        assert len(table_rows(src.collect(T + 30))["gpu_samples"]) == 48
    finally:
        src.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_requests_in_flight_stay_within_concurrency(endpoints, workers):
    # Bounded memory: at most `concurrency` pages are on their way at once (each worker gets its share)
    lock, state = threading.Lock(), {"now": 0, "max": 0}
    eps = [endpoints(node_page(n)) for n in range(12)]

    class Gate:
        def wait(self, _timeout):
            with lock:
                state["now"] += 1
                state["max"] = max(state["max"], state["now"])
            time.sleep(0.05)  # long enough for the others to pile up, were there no bound
            with lock:
                state["now"] -= 1

    for e in eps:
        e.hold = Gate()
    src = DcgmSource(CFG, [e.url for e in eps], concurrency=4, workers=workers)
    try:
        assert len(table_rows(src.collect(T))["gpu_samples"]) == 96
    finally:
        src.close()
    assert 1 <= state["max"] <= 4
