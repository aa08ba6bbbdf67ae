"""A routed call whose pieces stream to the client as they come, for every generation route.

`EventFeed.start` returns once the first piece came or the call ended, so the HTTP status can
still say how it went; `serving` is then the endpoint being listened to. Unless the call failed
first, the watch of the client that guarded that wait goes on to guard the stream (`response`),
also when the answer came whole: one task a request watches the client. The pieces are then
read in batches, each written to the client at once. What was sent cannot be
taken back, so a route that meets a failure after the first piece ends its stream with an error
event instead of starting over elsewhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Generic, TypeVar

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse

from lsp_server.gateway.metering import Meter, meter_of
from lsp_server.gateway.plumbing import ClientWatch
from lsp_server.gateway.sse import event_stream

E = TypeVar("E")  # a streamed piece: text, or a tool call's delta
T = TypeVar("T")  # what the call returns once it ends


class EventFeed(Generic[E, T]):
    def __init__(
        self,
        work: asyncio.Task[T],
        queue: asyncio.Queue[E | None],
        serving: str,
        watch: ClientWatch,
        meter: Meter | None,
    ):
        self.work = work
        self.first: E | None = None
        self.serving = serving
        self._queue = queue
        # Watches the client from the wait for the first piece to the stream's end.
        self._watch = watch
        self._meter = meter

    @classmethod
    async def start(
        cls,
        request: Request,
        call: Callable[[Callable[[E], None], Callable[[str], None]], Coroutine[Any, Any, T]],
        *,
        serving: str = "",
    ) -> EventFeed[E, T]:
        """Run `call(on_piece, on_attempt)`; `serving` names the endpoint until one is asked."""
        queue: asyncio.Queue[E | None] = asyncio.Queue()
        asked = [serving]
        meter = meter_of(request)

        def asking(endpoint: str) -> None:
            asked[0] = endpoint
            if meter is not None:
                meter.asking(endpoint)

        # Set once the first piece is queued, or the end: waited on without a task of its own.
        came: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def piece(event: E) -> None:
            if meter is not None:
                meter.streamed(event)
            queue.put_nowait(event)
            if not came.done():
                came.set_result(None)

        work = asyncio.create_task(call(piece, asking))

        def finished(task: asyncio.Task[T]) -> None:
            queue.put_nowait(None)
            if not came.done():
                came.set_result(None)
            if not task.cancelled():
                task.exception()  # read here too, in case the client left before the stream

        work.add_done_callback(finished)
        watch = ClientWatch(request.receive)
        feed = cls(work, queue, serving, watch, meter)
        try:
            await watch.guarding(came)
        except BaseException:
            watch.stop()
            work.cancel()
            raise
        feed.first = queue.get_nowait()
        feed.serving = asked[0]
        if feed.first is None and (work.cancelled() or work.exception() is not None):
            watch.stop()  # failed before a piece: the error is answered, not streamed
        return feed

    @property
    def ended(self) -> bool:
        """Whether the call has ended: once it has, every piece it made is in a batch read
        or to be read."""
        return self.work.done()

    def stop(self) -> None:
        """Stop the routed call, once: cancelling it again while it closes its upstream
        connection would leave that open."""
        if not self.work.done() and not self.work.cancelling():
            self.work.cancel()

    async def batches(self) -> AsyncIterator[list[E]]:
        """The pieces as they come, until the call ends: each batch holds every piece that had
        come by the time the last batch was sent, so pieces that arrive together (an upstream's
        events read in one go) go out in one write instead of one each."""
        queue = self._queue
        batch = [self.first] if self.first is not None else []
        while batch:
            while not queue.empty():
                piece = queue.get_nowait()
                if piece is None:
                    yield batch
                    return
                batch.append(piece)
            yield batch
            piece = await queue.get()
            batch = [piece] if piece is not None else []

    def response(
        self, events: AsyncIterator[bytes], headers: dict[str, str], *, relayed: bool = False
    ) -> StreamingResponse:
        """The stream to the client; `relayed`: its events are the upstream's own, passed on
        (`/metrics` counts every other stream as written by the gateway, `metering`)."""
        if relayed and self._meter is not None:
            self._meter.stream_path = "relay"

        async def stop_upstream() -> None:
            self.stop()  # the client left, possibly before the stream started

        return event_stream(
            events, headers, background=BackgroundTask(stop_upstream), watch=self._watch
        )
