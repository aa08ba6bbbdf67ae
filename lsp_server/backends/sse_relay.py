"""A stream passed on as its own bytes, read only where something must be.

Parsing every event of an answer to JSON and writing it out again cost a streamed answer more
than the rest of its path. Here the body is cut into whole events (one is never passed on in
part, so that the end of the stream is always seen) and only these are parsed, by the
`EventReader` of the stream's API:

- the events before the first piece of the answer (the role's announcement), held back and
  passed on with it: the first thing a route sees is still a token, so its time is the first
  token's, and a hedge or a failover is still decided before anything reaches the client;
- an event whose bytes name a field the reader must see (`EventReader.worth_reading`: the
  usage, an error, a tool call), every event once the reader asks for them all
  (`attentive`), and `[DONE]`, which ends the stream and is not passed on (the front door writes
  its own end). The reader may pass on other bytes in a parsed event's place.

Every other event is passed on unread, counted as one token (the estimate where the upstream
reports no usage). The bounds of `sse_stream` hold: no event past `MAX_SSE_EVENT_BYTES`, no
stream past `MAX_BODY_BYTES`.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any, Protocol

import httpx

from lsp_server import json_codec
from lsp_server.backends.base import BackendError, Relayed, RelayedUsage, Usage
from lsp_server.backends.http_body import body_chunks
from lsp_server.backends.http_failures import error_message, short, transport_error
from lsp_server.backends.sse_stream import EventBounds, drain
from lsp_server.failures import FailureKind


class EventReader(Protocol):
    """What one API's relayed stream must be read for."""

    # Bytes that show an event must be parsed (besides `[DONE]`).
    worth_reading: re.Pattern[bytes]
    # Every event must be parsed from now on.
    attentive: bool

    def read(self, payload: dict[str, Any], usage: Usage, event: bytes) -> tuple[bool, bytes]:
        """Note what a parsed event says (usage, finish reason); whether it carries a piece of
        the answer, and the bytes to pass on in its place (`event` itself, mostly)."""
        ...

    def ending(self) -> bytes:
        """The events to pass on before `[DONE]`."""
        ...


_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_LINE_BREAK = re.compile(rb"\r\n|\r|\n")
_DONE = b"[DONE]"
_DATA = b"data:"


async def relay_sse(
    endpoint: str, response: httpx.Response, usage: Usage, reader: EventReader
) -> AsyncIterator[Relayed]:
    """The stream's events as they came, in runs of whole events (`RelayedUsage` apart); raises
    `BackendError` for an error event, a malformed event read, or a stream without `[DONE]`.
    After `[DONE]` the rest of the body is read for a moment, so the connection goes back to
    the pool instead of being closed half-read."""
    bounds = EventBounds(endpoint)
    relay = _Relay(endpoint, usage, reader)
    chunks = body_chunks(endpoint, response)
    try:
        try:
            async for chunk in chunks:
                bounds.count(chunk)
                for piece in relay.feed(chunk):
                    yield piece
                if relay.done:
                    break
            else:
                raise BackendError(endpoint, FailureKind.PROTOCOL, "stream ended without [DONE]")
        except httpx.HTTPError as exc:
            raise transport_error(endpoint, exc) from None
        await drain(chunks)
    finally:
        await chunks.aclose()


class _Relay:
    """Cuts a body into whole events and says which to pass on, reading as few as it can."""

    def __init__(self, endpoint: str, usage: Usage, reader: EventReader) -> None:
        self._endpoint = endpoint
        self._usage = usage
        self._reader = reader
        self._pending = b""  # the start of an event not yet whole
        self._held: list[bytes] = []  # the events before the first piece of the answer
        self._started = False
        self.done = False  # `[DONE]` came

    def feed(self, chunk: bytes) -> list[Relayed]:
        data = self._pending + chunk if self._pending else chunk
        end = _last_event_end(data)
        whole, self._pending = data[:end], data[end:]
        if not whole:
            return []
        if self._passes_unread(whole):
            if not self._usage.reported:
                self._usage.completion_tokens += whole.count(_DATA)
            return [Relayed(whole)]
        return self._events(whole)

    def _events(self, whole: bytes) -> list[Relayed]:
        """`whole`'s events, each parsed where it must be."""
        out: list[Relayed] = []
        run = self._held if not self._started else []  # events to pass on as one

        def flush() -> None:
            if run:
                out.append(Relayed(b"".join(run)))
                run.clear()

        start = 0
        for end in _EVENT_END.finditer(whole):
            event = whole[start : end.end()]
            data = _data_of(whole[start : end.start()])
            start = end.end()
            if data is None or not data.strip():
                run.append(event)
                continue
            if data.strip() == _DONE:
                self.done = True
                self._started = True  # an answer without a piece: what came, as it came
                if ending := self._reader.ending():
                    run.append(ending)
                break
            if self._passes_unread(event):
                if not self._usage.reported:
                    self._usage.completion_tokens += 1
                run.append(event)
                continue
            payload = self._parse(data)
            piece, event = self._reader.read(payload, self._usage, event)
            if piece and not self._usage.reported:
                self._usage.completion_tokens += 1
            if payload.get("choices") == [] and isinstance(payload.get("usage"), dict):
                flush()
                out.append(RelayedUsage(event))
                continue
            run.append(event)
            self._started = self._started or piece
        if self._started:
            flush()
        return out

    def _passes_unread(self, events: bytes) -> bool:
        reader = self._reader
        return (
            self._started
            and not reader.attentive
            and _DONE not in events
            and not reader.worth_reading.search(events)
        )

    def _parse(self, data: bytes) -> dict[str, Any]:
        try:
            payload = json_codec.loads(data)
        except (ValueError, RecursionError):
            raise BackendError(self._endpoint, FailureKind.PROTOCOL, "malformed SSE data") from None
        if not isinstance(payload, dict):
            raise BackendError(self._endpoint, FailureKind.PROTOCOL, "SSE data is not an object")
        if payload.get("error"):
            raise BackendError(self._endpoint, FailureKind.SERVER, short(error_message(data)))
        return payload


def _last_event_end(data: bytes) -> int:
    """Where the last whole event of `data` ends (0: none is whole yet)."""
    if b"\r" not in data:
        end = data.rfind(b"\n\n")
        return end + 2 if end >= 0 else 0
    ends = [match.end() for match in _EVENT_END.finditer(data)]
    return ends[-1] if ends else 0


def _data_of(event: bytes) -> bytes | None:
    """An event's data (its `data:` lines joined), None when it has none (a comment)."""
    values = [
        line[len(_DATA) :].removeprefix(b" ")
        for line in _LINE_BREAK.split(event)
        if line.startswith(_DATA)
    ]
    return b"\n".join(values) if values else None
