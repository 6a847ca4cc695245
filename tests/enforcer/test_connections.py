"""Slow, silent and bloated clients over the served TLS endpoint: each request must arrive whole within the
deadline, or the server closes its connection, and a head over the size bound is a 431. The deadline is 1 s here;
the bounds the tests wait (30 s) only stop a hang, they time nothing: what is asserted is that the server closed
the connection."""

import json
import socket
import ssl
import threading
import time

import pytest
import uvicorn

from gpuledger.enforcer import certs
from gpuledger.enforcer.connections import MAX_HEAD_BYTES, REQUEST_DEADLINE_S, server_config
from gpuledger.enforcer.decide import Settings
from gpuledger.enforcer.server import Webhook, create_app

GIVE_UP_S = 30.0  # liveness bound only: far above the 1 s deadline
BODY = json.dumps(
    {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u-1", "kind": {"kind": "ConfigMap"}, "namespace": "ns", "object": {}},
    }
).encode()
HEAD = (
    b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tls = certs.write(certs.issue(["localhost", "127.0.0.1"]), tmp_path_factory.mktemp("tls"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(Webhook(Settings({"ns": "t"})))
    srv = uvicorn.Server(server_config(app, "127.0.0.1", port, str(tls["cert"]), str(tls["key"]), 1.0))
    t = threading.Thread(target=srv.run, daemon=True)
    t.start()
    deadline = time.monotonic() + GIVE_UP_S
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield port, ssl.create_default_context(cafile=str(tls["ca"]))
    srv.should_exit = True
    t.join(10)


def connect(server) -> ssl.SSLSocket:
    port, ctx = server
    sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
    sock.settimeout(0.2)
    return sock


def drip(sock: ssl.SSLSocket, data: bytes) -> bytes | None:
    """Send `data` a byte every 0.2 s, reading as it goes: b"" once the server closed the connection, the bytes
    of an answer if one came, None if all was sent (or GIVE_UP_S passed) with the connection still open."""
    stop = time.monotonic() + GIVE_UP_S
    for i in range(len(data)):
        if time.monotonic() > stop:
            return None
        try:
            sock.sendall(data[i : i + 1])
        except OSError:
            return b""
        try:
            return sock.recv(4096)
        except TimeoutError:
            pass
    return None


def wait_closed(sock: ssl.SSLSocket) -> bool:
    stop = time.monotonic() + GIVE_UP_S
    while time.monotonic() < stop:
        try:
            if sock.recv(4096) == b"":
                return True
        except TimeoutError:
            continue
        except OSError:
            return True
    return False


def test_the_default_deadline_is_under_the_api_servers_longest_webhook_timeout():
    assert REQUEST_DEADLINE_S <= 30  # timeoutSeconds is at most 30: a request slower than that helps nobody


def test_headers_sent_a_byte_at_a_time_get_the_connection_closed(server):
    with connect(server) as sock:
        # Headers that never end: a slowloris keeps adding one. 1 s at a byte per 0.2 s is a few bytes in.
        endless = HEAD[: HEAD.index(b"\r\n\r\n") + 2] + b"X-Slow: " + b"a" * 10_000
        assert drip(sock, endless) == b""


def test_a_body_sent_slowly_gets_the_connection_closed(server):
    with connect(server) as sock:
        sock.sendall(HEAD)
        assert drip(sock, BODY) == b""


def test_a_connection_that_sends_nothing_is_closed(server):
    with connect(server) as sock:
        assert wait_closed(sock)


def test_whole_requests_are_answered_and_the_deadline_does_not_cut_keep_alive(server):
    with connect(server) as sock:
        for _ in range(2):
            sock.sendall(HEAD + BODY)
            answer = b""
            while b"u-1" not in answer:
                answer += sock.recv(4096)
            assert answer.startswith(b"HTTP/1.1 200")
            time.sleep(1.5)  # idle past the request deadline, inside uvicorn's 5 s keep-alive: still open


def read_all(sock: ssl.SSLSocket) -> bytes:
    """What the server sends until it closes the connection."""
    out, stop = b"", time.monotonic() + GIVE_UP_S
    while time.monotonic() < stop:
        try:
            chunk = sock.recv(4096)
        except TimeoutError:
            continue
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    return out


def test_a_head_over_the_bound_is_431_and_closed(server):
    with connect(server) as sock:
        head = HEAD[: HEAD.index(b"\r\n\r\n") + 2] + b"X-Big: " + b"a" * (MAX_HEAD_BYTES + 1)
        try:
            sock.sendall(head)  # before: held in memory (80 MB of one header were taken before httptools gave up)
        except OSError:
            pass  # closed while sending: the answer is read below
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 431 ") and answer.endswith(b"request head over 65,536 bytes")


def test_a_big_body_arriving_with_its_head_is_not_taken_for_a_big_head(server):
    body = json.dumps({**json.loads(BODY), "padding": "x" * 1_000_000}).encode()
    head = HEAD.replace(str(len(BODY)).encode(), str(len(body)).encode())
    with connect(server) as sock:
        sock.sendall(head + body)
        answer = b""
        while b"u-1" not in answer:
            answer += sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 200")
