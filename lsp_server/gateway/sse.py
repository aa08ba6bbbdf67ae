"""Server-sent events as the gateway writes them: the data-only events of chat and completions
streams (ended by `[DONE]`), the named events of the Responses API, and the streaming response
that carries either."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from lsp_server import json_codec
from lsp_server.gateway.plumbing import ClientGone, ClientWatch


def sse_event(payload: dict[str, Any] | str) -> bytes:
    """One data-only event, as chat and completions streams send them."""
    data = payload.encode() if isinstance(payload, str) else json_codec.dumps(payload)
    return b"data: %s\n\n" % data


SSE_DONE = sse_event("[DONE]")


def named_sse_event(event: dict[str, Any]) -> bytes:
    """One server-sent event: the Responses API names each event after its `type`."""
    return b"event: %s\ndata: %s\n\n" % (event["type"].encode(), json_codec.dumps(event))


def named_sse_events(events: list[dict[str, Any]]) -> bytes:
    """Events made at the same moment, as one write: each write is a message through every
    ASGI layer and a system call, and a Responses turn opens and ends with several at once."""
    return b"".join(map(named_sse_event, events))


class LastEvents(bytes):
    """A stream's last events, written with the end of the body: one write instead of two
    (each write is a message through every ASGI layer, and a packet the client wakes for)."""


class EventStream(StreamingResponse):
    """Starlette's streaming response, with the client's leaving watched by one asyncio task
    instead of an anyio task group of two (which cost a short answer more than its own
    events): on a server of ASGI spec 2.3 (uvicorn's), the body is streamed by the request's
    own task, and a client that leaves stops it there, as Starlette's would. The watch is the
    one that guarded the wait for the first piece when there was one (`watch`), else its own.
    `LastEvents` end the body in the same write."""

    def __init__(self, *args: Any, watch: ClientWatch | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._watch = watch

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        spec = tuple(map(int, scope.get("asgi", {}).get("spec_version", "2.0").split(".")))
        if scope["type"] != "http" or spec >= (2, 4):
            if self._watch is not None:
                self._watch.stop()
            await super().__call__(scope, receive, send)  # a send to a gone client raises there
            return
        watch = self._watch
        if watch is None or (not watch.watching and not watch.gone):
            watch = ClientWatch(receive)
        try:
            with contextlib.suppress(ClientGone):
                await watch.guarding(self.stream_response(send))
        finally:
            watch.stop()
        if self.background is not None:
            await self.background()

    async def stream_response(self, send: Send) -> None:
        start = {"type": "http.response.start", "status": self.status_code}
        await send({**start, "headers": self.raw_headers})
        ended = False
        async for chunk in self.body_iterator:
            ended = isinstance(chunk, LastEvents)
            await send({"type": "http.response.body", "body": chunk, "more_body": not ended})
        if not ended:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


def event_stream(
    events: AsyncIterator[bytes],
    headers: dict[str, str],
    background: BackgroundTask | None = None,
    watch: ClientWatch | None = None,
) -> StreamingResponse:
    """Server-sent events, not cached or buffered on the way."""
    return EventStream(
        events,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **headers},
        background=background,
        watch=watch,
    )
