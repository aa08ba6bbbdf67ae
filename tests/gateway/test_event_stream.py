"""The gateway's streaming response on its own: what it writes, what a client that leaves
stops, and that a cancellation from elsewhere is not taken for the client leaving."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from starlette.background import BackgroundTask
from starlette.types import Message

from lsp_server.gateway.sse import LastEvents, event_stream

pytestmark = pytest.mark.unit

SCOPE: dict[str, Any] = {"type": "http", "asgi": {"spec_version": "2.3"}}


class Client:
    """An ASGI server's side of one response: what was sent, and a disconnect on demand."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self.gone = asyncio.Event()

    async def receive(self) -> Message:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    def bodies(self) -> list[tuple[bytes, bool]]:
        return [(m["body"], m["more_body"]) for m in self.sent if m["type"] == "http.response.body"]


async def test_the_last_events_end_the_body_in_the_same_write() -> None:
    async def events() -> AsyncIterator[bytes]:
        yield b"data: 1\n\n"
        yield LastEvents(b"data: 2\n\ndata: [DONE]\n\n")

    client = Client()
    await event_stream(events(), {})(SCOPE, client.receive, client.send)
    assert client.bodies() == [(b"data: 1\n\n", True), (b"data: 2\n\ndata: [DONE]\n\n", False)]


async def test_a_stream_without_last_events_is_ended_by_an_empty_write() -> None:
    async def events() -> AsyncIterator[bytes]:
        yield b"data: 1\n\n"

    client = Client()
    await event_stream(events(), {})(SCOPE, client.receive, client.send)
    assert client.bodies() == [(b"data: 1\n\n", True), (b"", False)]


async def test_a_client_that_leaves_stops_the_stream_and_the_background_runs() -> None:
    stopped = asyncio.Event()
    closed: list[str] = []

    async def events() -> AsyncIterator[bytes]:
        try:
            yield b"data: 1\n\n"
            await asyncio.Event().wait()  # an upstream that says no more
            yield b"never"
        finally:
            closed.append("events")

    async def stop() -> None:
        stopped.set()

    client = Client()
    response = event_stream(events(), {}, background=BackgroundTask(stop))
    serving = asyncio.create_task(response(SCOPE, client.receive, client.send))
    await asyncio.sleep(0.01)
    client.gone.set()
    await asyncio.wait_for(serving, timeout=5)  # ends normally: the client left
    assert closed == ["events"]
    assert stopped.is_set()
    assert client.bodies() == [(b"data: 1\n\n", True)]


async def test_a_cancellation_from_elsewhere_still_cancels_the_response() -> None:
    async def events() -> AsyncIterator[bytes]:
        yield b"data: 1\n\n"
        await asyncio.Event().wait()
        yield b"never"

    client = Client()
    serving = asyncio.create_task(event_stream(events(), {})(SCOPE, client.receive, client.send))
    await asyncio.sleep(0.01)
    serving.cancel()  # the server stopping, not the client
    with pytest.raises(asyncio.CancelledError):
        await serving
