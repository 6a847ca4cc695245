"""The webhook's HTTP connections: each request must arrive whole within a deadline, or its connection is closed.

uvicorn closes a connection only when it idles after a response (timeout_keep_alive). A client that opens a
connection and sends nothing, or a header byte every few seconds (slowloris), or a body slowly, holds the
connection and a file descriptor for as long as it likes: a few thousand of them starve the replica the API server
needs. Here the head and body of a request must arrive within `REQUEST_DEADLINE_S` of its first byte (of the
connection, for the first request); the deadline stops once the request is whole, so the handler is never cut.
The TLS handshake before it is bounded by asyncio (ssl_handshake_timeout, 60 s).

The head is also bounded in size: httptools keeps whatever header bytes arrive (80 MB of one header were held
before it gave up), so a head over `MAX_HEAD_BYTES` is answered 431 and the connection closed. The body's
bound is the handler's (6 MiB, read in chunks).
"""

from __future__ import annotations

import asyncio
import logging

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)

# The API server gives up on a webhook call after timeoutSeconds (3 in our manifest, 30 at most): a request that
# took longer than 10 s to arrive is answered to nobody.
REQUEST_DEADLINE_S = 10.0
# The API server's webhook requests carry a handful of short headers; Go's own server allows 1 MiB, h11 16 KiB.
MAX_HEAD_BYTES = 64 * 1024


class DeadlineProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a per-request arrival deadline (see the module's docstring)."""

    deadline_s = REQUEST_DEADLINE_S
    _deadline: asyncio.TimerHandle | None = None
    _in_head = True  # the bytes arriving are a request's head (until its headers are complete)
    _head_bytes = 0

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm()  # a connection that never sends a byte

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)  # a chunk that ends the head may carry body bytes: counted after the feed
        super().data_received(data)
        if self._in_head and self._head_bytes > MAX_HEAD_BYTES and not self.transport.is_closing():
            msg = f"request head over {MAX_HEAD_BYTES:,} bytes".encode()
            self.transport.write(
                b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
                b"connection: close\r\ncontent-length: " + str(len(msg)).encode() + b"\r\n\r\n" + msg
            )
            self.transport.close()

    def on_headers_complete(self) -> None:
        self._in_head, self._head_bytes = False, 0
        super().on_headers_complete()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._deadline is None:  # the first request's clock started with the connection
            self._arm()

    def on_message_complete(self) -> None:
        self._disarm()
        self._in_head = True  # what comes next on the connection is the next request's head
        super().on_message_complete()

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.deadline_s, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            log.info("enforcer: closed a connection from %s: no whole request in %.0f s", self.client, self.deadline_s)
            self.transport.close()


def deadline_protocol(deadline_s: float) -> type[DeadlineProtocol]:
    return type("DeadlineProtocol", (DeadlineProtocol,), {"deadline_s": deadline_s})


def server_config(
    app,
    host: str,
    port: int,
    cert: str | None = None,
    key: str | None = None,
    request_deadline_s: float = REQUEST_DEADLINE_S,
) -> uvicorn.Config:
    """How `enforcer serve` runs the app (the tests serve it the same way): TLS when a certificate is given."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        ssl_certfile=cert,
        ssl_keyfile=key,
        http=deadline_protocol(request_deadline_s),
        log_level="warning",
        timeout_graceful_shutdown=5,  # the API server keeps connections open; do not wait on them forever
    )
