"""Server-sent events as the gateway writes them: the data-only events of chat and completions
streams (ended by `[DONE]`), the named events of the Responses API, and the streaming response
that carries either."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse

from lsp_server import json_codec


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


def event_stream(
    events: AsyncIterator[bytes], headers: dict[str, str], background: BackgroundTask | None = None
) -> StreamingResponse:
    """Server-sent events, not cached or buffered on the way."""
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **headers},
        background=background,
    )
