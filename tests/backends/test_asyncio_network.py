"""httpcore's network layer on asyncio's streams, on the loop the servers run on (uvloop)."""

from __future__ import annotations

import asyncio

import httpcore
import pytest

from lsp_server.backends.asyncio_network import AsyncioBackend
from lsp_server.event_loop import run_on_fastest_loop


def test_a_write_to_a_closed_connection_is_a_write_error_on_the_servers_loop() -> None:
    """uvloop refuses a write to a closed transport with RuntimeError; httpcore sends a pooled
    connection's request again only for its own errors (a keep-alive connection the server
    closed), so the write must fail with one of them."""

    async def write_after_close() -> None:
        server = await asyncio.start_server(lambda _reader, _writer: None, "127.0.0.1", 0)
        async with server:
            port = server.sockets[0].getsockname()[1]
            stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
            await stream.aclose()
            await asyncio.sleep(0)  # the loop closes the transport's handle
            with pytest.raises(httpcore.WriteError):
                await stream.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", timeout=5)

    run_on_fastest_loop(write_after_close())
