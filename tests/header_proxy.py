"""A sign-in proxy stand-in for the dashboards' tests, run as its own process: it forwards every request to one
upstream and sets the user and group headers, as oauth2-proxy does after a sign-in (--pass-user-headers: it
replaces whatever the browser sent in them).

    python tests/header_proxy.py UPSTREAM_URL HEADER=VALUE ...     (prints "listening on PORT", then serves)

The one fake is who signed in; the dashboards see a real HTTP peer at the proxy's address, as behind oauth2-proxy.
"""

from __future__ import annotations

import http.client
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "host"}


def serve(upstream: str, inject: dict[str, str]) -> None:
    target = urlsplit(upstream)
    injected = {k.lower() for k in inject}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP | injected}
            headers.update(inject)
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                r = conn.getresponse()
                data = r.read()
            finally:
                conn.close()
            self.send_response(r.status, r.reason)
            for k, v in r.getheaders():
                if k.lower() not in HOP | {"content-length"}:
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_HEAD = _forward

        def log_message(self, *args):  # quiet: the test reads only the port line
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    serve(sys.argv[1], dict(arg.split("=", 1) for arg in sys.argv[2:]))
