"""httpcore's network layer on asyncio's own streams, for every HTTP backend's connections.

httpcore reaches asyncio through anyio, whose stream layer costs more than the socket work it
wraps: each read and each write opens a cancel scope, a read either switches the transport's
reading on and off again (two system calls) or yields to the event loop once, and each reuse of
a pooled connection asks anyio's typed attributes for its socket. A streamed agent turn makes
a dozen such calls. Here a read of data already received returns at once from a
`StreamReader`, a write goes to the `StreamWriter` (and waits, under its timeout, only for what
the socket did not take at once), timeouts are asyncio's, and failures become
httpcore's exceptions as its own backends map them. TLS is the event loop's (`start_tls`). A
name's addresses are tried one after the other, as httpx's own synchronous client tries them
(uvloop's event loop, which the servers run on, has no happy eyeballs).

Opening a connection (the TCP connect, the TLS handshake) is noted in the `ConnectionSetup` of
the request that opens it (`noting_setup`): whether it opened one, and how long that took.
httpcore's trace hook told the same at the cost of a call for each of a request's ten steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import ssl
import time
from collections.abc import Iterable, Iterator
from contextlib import AbstractAsyncContextManager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpcore

# Socket options as httpcore passes them: (level, option, value).
SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)


@dataclass(slots=True)
class ConnectionSetup:
    """What opening connections cost one request: whether it began to open one, and the
    seconds its set-up steps (connecting, the TLS handshake) took, failed ones too."""

    opened: bool = False
    seconds: float = 0.0


_SETUP: ContextVar[ConnectionSetup | None] = ContextVar("connection_setup", default=None)


@contextlib.contextmanager
def noting_setup() -> Iterator[ConnectionSetup]:
    """The set-up of the connections opened within the block, by the task that runs it (the
    request's: httpcore opens a request's connection in the request's own task)."""
    setup = ConnectionSetup()
    token = _SETUP.set(setup)
    try:
        yield setup
    finally:
        _SETUP.reset(token)


@contextlib.contextmanager
def _timed_setup() -> Iterator[None]:
    setup = _SETUP.get()
    if setup is None:
        yield
        return
    setup.opened = True
    started = time.perf_counter()
    try:
        yield
    finally:
        setup.seconds += time.perf_counter() - started


class AsyncioStream(httpcore.AsyncNetworkStream):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            async with _within(timeout):
                return await self._reader.read(max_bytes)  # b"" at the end, as httpcore expects
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(exc) from exc
        except OSError as exc:
            raise httpcore.ReadError(exc) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        if self._writer.is_closing():
            # uvloop refuses the write with a RuntimeError; httpcore must see the error it sends
            # a pooled connection's request again for (a keep-alive connection the server closed).
            raise httpcore.WriteError("the connection is closed")
        try:
            self._writer.write(buffer)
            if not self._writer.transport.get_write_buffer_size():
                return  # all of it went to the socket at once: nothing to wait for, no timer
            async with _within(timeout):
                await self._writer.drain()
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(exc) from exc
        except OSError as exc:
            raise httpcore.WriteError(exc) from exc

    async def aclose(self) -> None:
        self._writer.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            with _timed_setup():
                async with _within(timeout):
                    await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except TimeoutError as exc:
            await self.aclose()
            raise httpcore.ConnectTimeout(exc) from exc
        except (OSError, ssl.SSLError) as exc:  # SSLError is an OSError; named for the reader
            await self.aclose()
            raise httpcore.ConnectError(exc) from exc
        return self

    def get_extra_info(self, info: str) -> Any:
        writer = self._writer
        if info == "ssl_object":
            return writer.get_extra_info("ssl_object")
        if info == "client_addr":
            return writer.get_extra_info("sockname")
        if info == "server_addr":
            return writer.get_extra_info("peername")
        if info == "socket":
            return writer.get_extra_info("socket")
        if info == "is_readable":
            return self._readable()
        return None

    def _readable(self) -> bool:
        """Whether a read would return at once: what httpcore asks of an idle pooled connection
        (anything to read then is the server closing it). The transport reads ahead into the
        reader, so the reader's end and errors count as well as the socket's own state."""
        reader = self._reader
        if reader.at_eof() or reader.exception() is not None or self._writer.is_closing():
            return True
        sock = self._writer.get_extra_info("socket")
        descriptor = -1 if sock is None else sock.fileno()
        if descriptor < 0:
            return True
        if not hasattr(select, "poll"):  # Windows
            readable, _, _ = select.select([descriptor], [], [], 0)
            return bool(readable)
        poll = select.poll()
        poll.register(descriptor, select.POLLIN)
        return bool(poll.poll(0))


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            with _timed_setup():
                async with _within(timeout):
                    reader, writer = await asyncio.open_connection(
                        host, port, local_addr=(local_address, 0) if local_address else None
                    )
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(exc) from exc
        except OSError as exc:
            raise httpcore.ConnectError(exc) from exc
        _set_options(writer, socket_options)  # asyncio's TCP sockets have TCP_NODELAY already
        return AsyncioStream(reader, writer)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            with _timed_setup():
                async with _within(timeout):
                    reader, writer = await asyncio.open_unix_connection(path)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(exc) from exc
        except OSError as exc:
            raise httpcore.ConnectError(exc) from exc
        _set_options(writer, socket_options)
        return AsyncioStream(reader, writer)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _within(timeout: float | None) -> AbstractAsyncContextManager[Any]:
    """A timeout for one network step; none at all when httpcore passes none."""
    return nullcontext() if timeout is None else asyncio.timeout(timeout)


def _set_options(writer: asyncio.StreamWriter, options: Iterable[SocketOption] | None) -> None:
    sock: socket.socket | None = writer.get_extra_info("socket")
    if sock is None:
        return
    for option in options or ():
        sock.setsockopt(*option)
