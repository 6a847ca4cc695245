"""Hostile input to the served dashboards: Authorization headers, dates out of range, what-if values.

Every request goes through the real app's Flask server (its test client): a page render or a callback is one
POST to /_dash-update-component, as the browser sends it. None may answer 500.
"""

import base64
import http.client
import threading

import pytest
from werkzeug.serving import make_server

from dashboards.app import create_app

H100 = "NVIDIA H100 80GB HBM3"
TOKEN = base64.b64encode(b"ops:s3cret").decode()


# -- basic auth (RFC 7617; the scheme is case-insensitive, RFC 7235 section 2.1) -----------------------------
@pytest.mark.parametrize(
    "header,status",
    [
        (f"Basic {TOKEN}", 200),
        (f"basic {TOKEN}", 200),
        (f"BASIC {TOKEN}", 200),
        (f"bAsIc   {TOKEN}  ", 200),  # extra spaces around the token are allowed
        (TOKEN, 401),  # no scheme: accepted before
        (f"  {TOKEN}  ", 401),  # no scheme, padded: accepted before
        (f"Bearer {TOKEN}", 401),
        (f"Basic{TOKEN}", 401),  # no space after the scheme
        ("Basic " + TOKEN.rstrip("=") + "!!", 401),  # not base64
        ("Basic " + TOKEN + "%%", 401),  # base64 with characters outside the alphabet after it
        ("Basic " + base64.b64encode(b"opss3cret").decode(), 401),  # no colon
        ("Basic " + base64.b64encode(b"ops:s3cret:").decode(), 401),
        ("Basic " + base64.b64encode(b"ops:guess").decode(), 401),
        ("Basic ", 401),
        ("Basic ÄÖÜ", 401),
        ("", 401),
    ],
)
def test_basic_auth_takes_the_basic_scheme_in_any_case_and_nothing_else(tmp_path, header, status):
    client = create_app(tmp_path, auth=("ops", "s3cret")).server.test_client()
    r = client.get("/", headers={"Authorization": header} if header else {})
    assert r.status_code == status
    if status == 401:
        assert r.headers["WWW-Authenticate"] == 'Basic realm="gpuledger"'


def test_basic_auth_over_a_real_connection(tmp_path):
    """The same rule through a real HTTP server and client (the header as it travels on the wire)."""
    server = make_server("127.0.0.1", 0, create_app(tmp_path, auth=("ops", "s3cret")).server, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    headers = [f"basic {TOKEN}", f"BASIC {TOKEN}", TOKEN, f"Bearer {TOKEN}", "Basic b3BzczNjcmV0"]  # last: no colon
    got = []
    try:
        for header in headers:
            conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=30)
            conn.request("GET", "/_dash-layout", headers={"Authorization": header})
            r = conn.getresponse()
            got.append((r.status, r.getheader("WWW-Authenticate")))
            conn.close()
    finally:
        server.shutdown()
    challenge = (401, 'Basic realm="gpuledger"')
    assert got == [(200, None), (200, None), challenge, challenge, challenge]
