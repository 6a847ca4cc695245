"""tests/prometheus_server.py `api`: what a loaded Prometheus answers before it answers (a 503 "Service Unavailable"
while it starts: web.go testReady; a cut or empty body) is asked again within the deadline; a query it refuses fails
at once. A stand-in server plays the answers in order; no Prometheus is needed."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from prometheus_server import api

OK = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
REFUSED = json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"}).encode()


def serve(answers):
    """A server answering its requests with `answers` in order (status, body), the last one from then on."""
    asked = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            status, body = answers[min(len(asked), len(answers) - 1)]
            asked.append(self.path)
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}", asked


@pytest.mark.parametrize(
    "before",
    [
        [(503, b"Service Unavailable"), (503, b"Service Unavailable")],  # not ready yet (the failure seen under load)
        [(200, b"")],  # an empty body
        [(200, b'{"status": "succ')],  # a cut one
    ],
)
def test_no_answer_yet_is_asked_again(before):
    server, url, asked = serve([*before, (200, OK)])
    try:
        assert api(url, "query", query="up") == {"resultType": "vector", "result": []}
        assert len(asked) == len(before) + 1
    finally:
        server.shutdown()


def test_a_refused_query_fails_at_once_and_no_answer_fails_at_the_deadline():
    server, url, asked = serve([(400, REFUSED)])
    try:
        with pytest.raises(AssertionError, match="parse error"):
            api(url, "query", query="up{")
        assert len(asked) == 1
    finally:
        server.shutdown()
    server, url, asked = serve([(503, b"Service Unavailable")])
    try:
        t0 = time.monotonic()
        with pytest.raises(AssertionError, match="no answer in 1 s, last: HTTP 503: 'Service Unavailable'"):
            api(url, "query", timeout_s=1.0, query="up")
        assert 1.0 <= time.monotonic() - t0 < 5 and len(asked) >= 2
    finally:
        server.shutdown()
