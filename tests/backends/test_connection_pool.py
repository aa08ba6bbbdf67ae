"""The connection pool under many connections to one endpoint: idle connections are kept up to
the keep-alive limit however many others are busy, reused before a new one is opened, and
closed oldest first beyond the limit."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from bench.harness.fake_llm_server import FakeLLMServer
from lsp_server.backends.asyncio_network import AsyncioBackend
from lsp_server.backends.connection_pool import LinearConnectionPool

BUSY = 6
KEEP_ALIVE = 2


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(name="pool") as running:
        yield running


def pool() -> LinearConnectionPool:
    return LinearConnectionPool(
        max_connections=32,
        max_keepalive_connections=KEEP_ALIVE,
        network_backend=AsyncioBackend(),
    )


async def test_an_idle_connection_is_kept_and_reused_while_many_others_are_busy(
    server: FakeLLMServer,
) -> None:
    url = f"{server.base_url}/models"
    async with pool() as connections, contextlib.AsyncExitStack() as busy:
        streams = [
            await busy.enter_async_context(connections.stream("GET", url)) for _ in range(BUSY)
        ]
        for stream in streams:
            await stream.aread()  # read, not closed: its connection is still busy
        assert len(connections.connections) == BUSY
        assert not any(c.is_idle() for c in connections.connections)

        first = connections.connections[0]
        await streams[0].aclose()  # its connection falls idle; five others are still busy
        assert first in connections.connections and first.is_idle()

        async with connections.stream("GET", url) as again:
            assert again.status == 200
            assert len(connections.connections) == BUSY  # the idle one, not a new one
            assert not first.is_idle()


async def test_idle_connections_beyond_the_keep_alive_limit_are_closed_oldest_first(
    server: FakeLLMServer,
) -> None:
    url = f"{server.base_url}/models"
    async with pool() as connections:
        async with contextlib.AsyncExitStack() as busy:
            for _ in range(BUSY):
                await (await busy.enter_async_context(connections.stream("GET", url))).aread()
            opened = list(connections.connections)
        assert connections.connections == opened[-KEEP_ALIVE:]
        assert all(c.is_idle() for c in connections.connections)
        assert all(c.is_closed() for c in opened[:-KEEP_ALIVE])
