"""A model endpoint that misbehaves at the byte level, for the reliability suite.

`FakeLLMServer` speaks well-formed HTTP through uvicorn; the faults here need bytes no framework
would write: a line that never ends, a compressed body sent to a client that asked for none, a
kept-alive connection that dies when it is used again, usage fields that are not numbers. It is a
plain asyncio server on 127.0.0.1 in a background thread; every request is answered by one
`Mode`, swappable while it runs, and everything it sends is bounded (`MAX_SEND_BYTES`) and stops
when the client goes away or the server stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

MAX_SEND_BYTES = 512 * 1024 * 1024
SEND_CHUNK = 64 * 1024
BOMB_INFLATED_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    connection_requests: int  # requests served on this connection before this one

    @property
    def json(self) -> dict[str, Any]:
        try:
            payload = json.loads(self.body)
        except ValueError:
            return {}
        return payload if isinstance(payload, dict) else {}


@dataclass
class HostileUpstream:
    mode: Mode
    requests: list[Request] = field(default_factory=list)
    bytes_sent: int = 0
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _server: asyncio.Server | None = None
    _thread: threading.Thread | None = None
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> HostileUpstream:
        started = threading.Event()

        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]
            started.set()
            async with self._server:
                with contextlib.suppress(asyncio.CancelledError):
                    await self._server.serve_forever()

        self._thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError("the hostile upstream did not start")
        return self

    def __exit__(self, *exc_info: object) -> None:
        loop, server, thread = self._loop, self._server, self._thread
        if loop is None or server is None or thread is None:
            return

        def stop() -> None:
            server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            for task in asyncio.all_tasks(loop):
                task.cancel()

        loop.call_soon_threadsafe(stop)
        thread.join(10)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        served = 0
        try:
            while True:
                request = await _read_request(reader, served)
                if request is None:
                    return
                self.requests.append(request)
                if not await self.mode(request, Sender(self, writer)):
                    return
                served += 1
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return  # the client left, or the upstream is stopping
        finally:
            self._writers.discard(writer)
            writer.transport.abort()


class Sender:
    """The writer a mode gets: counts what it sends and waits for the client to take it."""

    def __init__(self, upstream: HostileUpstream, writer: asyncio.StreamWriter) -> None:
        self._upstream = upstream
        self._writer = writer

    async def send(self, data: bytes) -> None:
        if self._upstream.bytes_sent > MAX_SEND_BYTES:
            raise ConnectionError("enough sent")
        self._writer.write(data)
        self._upstream.bytes_sent += len(data)
        await self._writer.drain()

    def close(self) -> None:
        self._writer.transport.abort()


async def _read_request(reader: asyncio.StreamReader, served: int) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name:
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Request(method, path, headers, body, served)


Mode = Callable[[Request, Sender], Awaitable[bool]]  # True: keep the connection open


# --- response pieces -----------------------------------------------------------------------


def response_head(
    status: str = "200 OK",
    content_type: str = "text/event-stream",
    *,
    length: int | None = None,
    extra: str = "",
) -> bytes:
    framing = f"content-length: {length}\r\n" if length is not None else "connection: close\r\n"
    return (f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\n{framing}{extra}\r\n").encode()


def completion_chunk(request: Request, text: str, usage: str | None = None) -> bytes:
    """One SSE event of a chat or FIM stream; `usage` is spliced in raw (it may not be JSON
    that Python would write, such as `1e400`)."""
    if request.path.endswith("chat/completions"):
        choice = {"index": 0, "delta": {"content": text}, "finish_reason": None}
    else:
        choice = {"index": 0, "text": text, "finish_reason": None}
    body = json.dumps({"id": "x", "object": "chunk", "choices": [choice]})
    if usage is not None:
        body = body[:-1] + f', "usage": {usage}}}'
    return f"data: {body}\n\n".encode()


def json_body(request: Request, text: str) -> bytes:
    if request.path.endswith("chat/completions"):
        choice = {"index": 0, "message": {"role": "assistant", "content": text}}
    else:
        choice = {"index": 0, "text": text}
    return json.dumps({"id": "x", "object": "completion", "choices": [choice]}).encode()


@cache
def gzip_bomb() -> bytes:
    """A gzip body of `BOMB_INFLATED_BYTES` of JSON-looking text, about 250 KB on the wire."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [compressor.compress(b'{"choices": [{"text": "')]
    block = b"a" * (1024 * 1024)
    parts += [compressor.compress(block) for _ in range(BOMB_INFLATED_BYTES // len(block))]
    parts.append(compressor.compress(b'"}]}'))
    parts.append(compressor.flush())
    return b"".join(parts)


# --- modes ---------------------------------------------------------------------------------


def endless_line() -> Mode:
    """An SSE stream whose first line never ends."""

    async def mode(request: Request, writer: Sender) -> bool:
        await writer.send(response_head() + b"data: ")
        chunk = b"x" * SEND_CHUNK
        while True:
            await writer.send(chunk)

    return mode


def compressed_bomb() -> Mode:
    """A JSON body gzip-encoded although the client asked for identity."""
    body = gzip_bomb()  # built now: it takes a moment

    async def mode(request: Request, writer: Sender) -> bool:
        head = response_head(
            content_type="application/json", length=len(body), extra="content-encoding: gzip\r\n"
        )
        await writer.send(head)
        for start in range(0, len(body), SEND_CHUNK):
            await writer.send(body[start : start + SEND_CHUNK])
        return True

    return mode


def streams_text(text: str, *, usage: str | None = None) -> Mode:
    """A well-formed stream of `text`, with `usage` (raw JSON, possibly nonsense) at its end."""

    async def mode(request: Request, writer: Sender) -> bool:
        body = completion_chunk(request, text)
        if usage is not None:
            body += completion_chunk(request, "", usage)
        body += b"data: [DONE]\n\n"
        await writer.send(response_head(length=len(body)) + body)
        return True

    return mode


def dies_when_reused(text: str) -> Mode:
    """Answers the first request on a connection and keeps it alive; a request that comes on
    a kept-alive connection finds it dead (closed before any byte of a response)."""

    async def mode(request: Request, writer: Sender) -> bool:
        if request.connection_requests > 0:
            writer.close()
            return False
        await streams_text(text)(request, writer)
        return True

    return mode


def stalls() -> Mode:
    """Reads the request and never answers."""

    async def mode(request: Request, writer: Sender) -> bool:
        await asyncio.Event().wait()
        return False

    return mode
