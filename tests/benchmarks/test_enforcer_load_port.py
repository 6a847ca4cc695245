"""benchmarks/enforcer_load.py's server port stays its own while the server starts.

A port found with bind(0) and closed could be handed to any process binding port 0 in the seconds the enforcer
takes to start, which then stopped with "address already in use" (a run that failed once and passed again).
"""

from __future__ import annotations

import asyncio
import errno
import importlib.util
import socket

import pytest

from conftest import REPO


def _enforcer_load():
    spec = importlib.util.spec_from_file_location("enforcer_load", REPO / "benchmarks" / "enforcer_load.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reserved_port_is_refused_to_others_and_given_to_the_server():
    port = _enforcer_load().reserved_port()
    # Another program asking for that port (as a client's or a probe's bind does) is refused ...
    with socket.socket() as other, pytest.raises(OSError) as refused:
        other.bind(("127.0.0.1", port))
    assert refused.value.errno == errno.EADDRINUSE

    # ... while a server binding it as uvicorn does (asyncio, SO_REUSEADDR) gets it and listens.
    async def serve() -> int:
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", port)
        bound = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        return bound

    assert asyncio.run(serve()) == port
