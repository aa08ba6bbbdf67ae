"""Server-sent events from an upstream, bounded before they are parsed: no event (and so no
line) may pass `MAX_SSE_EVENT_BYTES`, nor the whole stream `MAX_BODY_BYTES`."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import re
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import Any

import httpx
from httpx_sse import ServerSentEvent

# httpx-sse's own decoders, as its `EventSource` uses them (see `sse_events`); the version is
# capped in pyproject.toml so that a change of its inner layout is met in review, not in use.
from httpx_sse._decoders import SSEDecoder, SSELineDecoder

from lsp_server import json_codec
from lsp_server.backends.base import BackendError
from lsp_server.backends.http_body import MAX_BODY_BYTES, body_chunks
from lsp_server.backends.http_failures import error_message, short, transport_error
from lsp_server.failures import FailureKind

# One SSE event (and so one line) larger than this is not a token delta: the stream is refused
# before the line is buffered whole, so an endless line costs at most this much memory.
MAX_SSE_EVENT_BYTES = 1024 * 1024
# How long to wait for the end of a body after `[DONE]` to keep the connection reusable.
DRAIN_TIMEOUT_S = 0.05


async def iter_sse_json(
    endpoint: str, response: httpx.Response
) -> AsyncGenerator[dict[str, Any], None]:
    """The JSON payloads of an SSE stream, which must end with `[DONE]`.

    After `[DONE]` the rest of the body (normally just the chunked-encoding trailer) is read
    for a moment, so the connection goes back to the pool for the next keystroke instead of
    being closed half-read.
    """
    events = sse_events(endpoint, response)
    try:
        async for event in events:
            if event.data.strip() == "[DONE]":
                break
            if not event.data.strip():
                continue
            try:
                payload = json_codec.loads(event.data)
            except (ValueError, RecursionError):
                raise BackendError(endpoint, FailureKind.PROTOCOL, "malformed SSE data") from None
            if not isinstance(payload, dict):
                raise BackendError(endpoint, FailureKind.PROTOCOL, "SSE data is not an object")
            if payload.get("error"):
                raise BackendError(
                    endpoint, FailureKind.SERVER, short(error_message(event.data.encode()))
                )
            yield payload
        else:
            raise BackendError(endpoint, FailureKind.PROTOCOL, "stream ended without [DONE]")
    except httpx.HTTPError as exc:
        raise transport_error(endpoint, exc) from None
    await drain(events)


async def drain(rest: AsyncIterator[object]) -> None:
    """Read what follows `[DONE]` (normally the chunked-encoding trailer) for a moment, so the
    connection goes back to the pool instead of being closed half-read."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError, BackendError):
        async with asyncio.timeout(DRAIN_TIMEOUT_S):
            async for _ in rest:
                pass


async def sse_events(endpoint: str, response: httpx.Response) -> AsyncIterator[ServerSentEvent]:
    """The events of an SSE response, bounded before parsing: no event (and so no line) may
    pass `MAX_SSE_EVENT_BYTES`, nor the whole stream `MAX_BODY_BYTES`.

    What httpx-sse's `EventSource.aiter_sse` does, with its own line and event decoders, fed
    straight from the body: through `EventSource` each chunk went through four more generators
    (httpx's bytes, text and line layers over a response made to carry the bounds), which cost
    more than the parsing itself on every event of every stream."""
    if not is_event_stream(response):
        raise BackendError(
            endpoint,
            FailureKind.PROTOCOL,
            "not an SSE stream: Expected response header Content-Type to contain "
            f"'text/event-stream', got {_media_type(response)!r}",
        )
    bounds = EventBounds(endpoint)
    text = codecs.getincrementaldecoder(response.encoding or "utf-8")(errors="replace")
    lines, events = SSELineDecoder(), SSEDecoder()
    chunks = body_chunks(endpoint, response)
    try:
        async for chunk in chunks:
            bounds.count(chunk)
            for event in _events_completed(text.decode(chunk), lines, events):
                yield event
        for event in _events_completed(text.decode(b"", True), lines, events, at_end=True):
            yield event
    finally:
        await chunks.aclose()


def _events_completed(
    text: str, lines: SSELineDecoder, events: SSEDecoder, *, at_end: bool = False
) -> Iterator[ServerSentEvent]:
    """The events that `text`, read on from where the decoders stand, completes; `at_end`, the
    stream's last text, also ends its last line."""
    read = lines.decode(text) if text else []
    if at_end:
        read += lines.flush()
    for line in read:
        if (event := events.decode(line)) is not None:
            yield event


_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


class EventBounds:
    """Counts an SSE body chunk by chunk and refuses it as soon as one event, or the whole
    stream, grows past its bound: a line without end is never buffered whole."""

    def __init__(self, endpoint: str) -> None:
        self._endpoint = endpoint
        self._total = 0
        self._line = 0  # bytes of the line being received
        self._event = 0  # bytes of the event being received, its current line included
        self._after_cr = False  # the last chunk ended in "\r", perhaps half of a "\r\n"

    def count(self, chunk: bytes) -> None:
        self._total += len(chunk)
        if self._total > MAX_BODY_BYTES:
            raise BackendError(self._endpoint, FailureKind.PROTOCOL, "stream too large")
        if b"\r" in chunk or self._after_cr or self._event + len(chunk) > MAX_SSE_EVENT_BYTES:
            self._count_lines(chunk)
            return
        # Line breaks are "\n" alone and the chunk cannot pass the bound: where the event and
        # the line stand after it is found by searches from its end, not line by line.
        last_break = chunk.rfind(b"\n")
        if last_break == -1:
            self._line += len(chunk)
            self._event += len(chunk)
            return
        blank = chunk.rfind(b"\n\n")
        if blank != -1:
            ended = blank + 1  # the break that ends the chunk's last empty line
        elif chunk[0] == 10 and self._line == 0:
            ended = 0  # its first byte ends an empty line
        else:
            ended = -1
        after = ended + 1
        if ended == -1:
            self._event += len(chunk) - chunk.count(b"\n")
        else:
            self._event = len(chunk) - after - chunk.count(b"\n", after)
        self._line = len(chunk) - last_break - 1

    def _count_lines(self, chunk: bytes) -> None:
        """`count`'s reading of any chunk, line break by line break."""
        position = 0
        for match in _LINE_BREAK.finditer(chunk):
            if self._after_cr and match.start() == 0 and match.group() == b"\n":
                position, self._after_cr = 1, False
                continue
            self._grow(match.start() - position)
            if self._line == 0:
                self._event = 0  # an empty line ends the event
            self._line = 0
            position = match.end()
        self._grow(len(chunk) - position)
        self._after_cr = chunk.endswith(b"\r")

    def _grow(self, size: int) -> None:
        self._line += size
        self._event += size
        if self._event > MAX_SSE_EVENT_BYTES:
            raise BackendError(
                self._endpoint, FailureKind.PROTOCOL, "malformed stream: an SSE event too large"
            )


def is_event_stream(response: httpx.Response) -> bool:
    """Whether the media type (not a parameter of it) names an event stream, as httpx-sse
    checks it."""
    return "text/event-stream" in _media_type(response)


def _media_type(response: httpx.Response) -> str:
    content_type: str = response.headers.get("content-type", "")
    return content_type.partition(";")[0]
