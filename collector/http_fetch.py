"""HTTP GET for the scraping sources: a time limit, a size limit, and failures turned into one-line reasons
(refused, timed out, HTTP 500, wrong content type) instead of tracebacks.

`get` is one blocking request (urllib). `AsyncFetcher` serves a central collector scraping thousands of targets a
round from one event loop over keep-alive connections: 10,000 dcgm-exporter pages a round cost about a tenth of
what a thread pool of urllib requests does (benchmarks/dcgm_fleet.py).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

import httptools

MAX_BYTES = 64 << 20  # a dcgm page of 8 GPUs x 40 fields is ~100 KB; anything near this is not a metrics page


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n:,} bytes"


class FetchError(Exception):
    """Why a GET failed, in words fit for a health event."""


class FetchTimeout(FetchError):
    """No answer within the time allowed (the caller may know a better name for that limit)."""


@dataclass(frozen=True)
class Response:
    body: bytes
    content_type: str


def get(url: str, timeout_s: float, accept: str = "*/*") -> Response:
    req = urllib.request.Request(url, headers={"Accept": accept, "User-Agent": "gpuledger"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            body = r.read(MAX_BYTES + 1)
            if len(body) > MAX_BYTES:
                raise FetchError(f"{url}: response larger than {_size(MAX_BYTES)}")
            return Response(body, r.headers.get("Content-Type", ""))
    except urllib.error.HTTPError as e:
        raise FetchError(f"{url}: HTTP {e.code} {e.reason}") from e
    except urllib.error.URLError as e:
        reason = e.reason
        if isinstance(reason, (socket.timeout, TimeoutError)):
            raise FetchError(f"{url}: no answer within {timeout_s:g} s") from e
        if isinstance(reason, ConnectionRefusedError):
            raise FetchError(f"{url}: connection refused") from e
        raise FetchError(f"{url}: {reason}") from e
    except (socket.timeout, TimeoutError) as e:
        raise FetchError(f"{url}: no answer within {timeout_s:g} s") from e
    except (ConnectionError, OSError) as e:
        raise FetchError(f"{url}: {e.strerror or e}") from e


class _Exchange(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; httptools (uvicorn's parser, a runtime dependency) reads the responses,
    Content-Length or chunked."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.done: asyncio.Future | None = None
        self.got_bytes = False  # the response began: a reused connection closed before that may be retried
        self._reset()

    def _reset(self) -> None:
        self.reason, self.content_type, self.body, self.size, self.length_known = b"", b"", [], 0, False
        self.keep_alive = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._fail(FetchError(f"bad HTTP response ({e})"))

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.done is not None and not self.done.done():
            if self.got_bytes and self.reason and not self.length_known:
                self._complete()  # neither Content-Length nor chunked: the body ends where the connection does
            else:
                self.done.set_exception(ConnectionResetError("connection closed by the target"))

    def _fail(self, e: Exception) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(e)
        self.close()

    def _complete(self) -> None:
        if self.done is not None and not self.done.done():
            self.keep_alive = self.parser.should_keep_alive()  # read now: llhttp forgets it once the message ends
            self.done.set_result((self.parser.get_status_code(), self.reason, self.content_type, b"".join(self.body)))
            self.body = []

    # httptools callbacks
    def on_status(self, status: bytes) -> None:
        self.reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-type":
            self.content_type = value
        elif name == b"content-length" or (name == b"transfer-encoding" and b"chunked" in value.lower()):
            self.length_known = True

    def on_body(self, body: bytes) -> None:
        self.size += len(body)
        if self.size > self.max_bytes:
            self._fail(FetchError(f"response larger than {_size(self.max_bytes)}"))
        else:
            self.body.append(body)

    def on_message_complete(self) -> None:
        self._complete()

    async def request(self, head: bytes) -> tuple[int, bytes, bytes, bytes]:
        self._reset()
        self.got_bytes = False
        done = self.done = asyncio.get_running_loop().create_future()
        self.transport.write(head)  # type: ignore[union-attr]
        try:
            return await done
        finally:
            self.done = None  # an idle connection holds no page: 10,000 of them held 1 GB

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class AsyncFetcher:
    """GETs for a central collector scraping many targets from one event loop: one keep-alive connection per
    target, kept between rounds (no TCP handshake per scrape, as Prometheus does), with the time limit, size limit
    and one-line reasons of `get`. Not thread-safe: use it from one event loop."""

    def __init__(self, timeout_s: float, accept: str = "*/*", max_bytes: int = MAX_BYTES, max_idle: int = 1 << 30):
        self.timeout_s = timeout_s
        self.accept = accept
        self.max_bytes = max_bytes
        self.max_idle = max_idle  # idle connections kept; past it a connection is closed after its answer
        self._idle: dict[str, _Exchange] = {}
        self._heads: dict[str, tuple[str, str, int, bytes]] = {}
        self._tls: ssl.SSLContext | None = None

    def _target(self, url: str) -> tuple[str, str, int, bytes]:
        t = self._heads.get(url)
        if t is None:
            u = urllib.parse.urlsplit(url)
            port = u.port or (443 if u.scheme == "https" else 80)
            path = (u.path or "/") + (f"?{u.query}" if u.query else "")
            head = (
                f"GET {path} HTTP/1.1\r\nHost: {u.netloc.rpartition('@')[2]}\r\nAccept: {self.accept}\r\n"
                "User-Agent: gpuledger\r\n\r\n"
            ).encode()
            t = self._heads[url] = (u.scheme, u.hostname or "", port, head)
        return t

    async def get(self, url: str, timeout_s: float | None = None) -> Response:
        """The body and content type of a 2xx answer; raises FetchError naming the URL and the reason."""
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        conn = self._idle.pop(url, None)
        try:
            async with asyncio.timeout(timeout_s):
                if conn is not None and not conn.closed:
                    try:
                        status, reason, ctype, body = await self._exchange(conn, url)
                    except ConnectionError:
                        if conn.got_bytes:
                            raise
                        conn = None  # the target closed the idle connection between rounds: once more, anew
                if conn is None or conn.closed:
                    conn = await self._connect(url)
                    status, reason, ctype, body = await self._exchange(conn, url)
        except TimeoutError as e:
            self._drop(conn)
            raise FetchTimeout(f"{url}: no answer within {timeout_s:g} s") from e
        except FetchError as e:
            self._drop(conn)
            raise FetchError(f"{url}: {e}") from e
        except ConnectionRefusedError as e:
            raise FetchError(f"{url}: connection refused") from e
        except (ConnectionError, OSError) as e:
            self._drop(conn)
            raise FetchError(f"{url}: {e.strerror or e}") from e
        if conn.keep_alive and not conn.closed and len(self._idle) < self.max_idle:
            self._idle[url] = conn
        else:
            conn.close()
        if not 200 <= status < 300:
            raise FetchError(f"{url}: HTTP {status} {reason.decode('latin-1')}")
        return Response(body, ctype.decode("latin-1"))

    async def _connect(self, url: str) -> _Exchange:
        scheme, host, port, _ = self._target(url)
        tls = None
        if scheme == "https":
            tls = self._tls = self._tls or ssl.create_default_context()
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(lambda: _Exchange(self.max_bytes), host, port, ssl=tls)
        return conn

    async def _exchange(self, conn: _Exchange, url: str) -> tuple[int, bytes, bytes, bytes]:
        return await conn.request(self._target(url)[3])

    @staticmethod
    def _drop(conn: _Exchange | None) -> None:
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Close the idle connections (call from the loop's thread, or once the loop has stopped)."""
        for conn in self._idle.values():
            conn.close()
        self._idle.clear()
