"""One small HTTP GET helper for the scraping sources: a time limit, a size limit, and failures turned into
one-line reasons (refused, timed out, HTTP 500, wrong content type) instead of tracebacks."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from dataclasses import dataclass

MAX_BYTES = 64 << 20  # a dcgm page of 8 GPUs x 40 fields is ~100 KB; anything near this is not a metrics page


class FetchError(Exception):
    """Why a GET failed, in words fit for a health event."""


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
                raise FetchError(f"{url}: response larger than {MAX_BYTES >> 20} MiB")
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
