"""What a slow or stalled client may cost the gateway: a bounded time and a bounded share.

uvicorn times out idle keep-alive connections and caps concurrency, but it waits forever for
the head of a request: a client that connects and sends nothing, or one header byte at a time,
holds a connection (and, in numbers, the whole server) without ever needing the token. Two
guards close that:

- `head_timeout_protocol`: uvicorn's own HTTP protocol, which answers 408 and closes the
  connection when a request's head (request line and headers) is not complete within the
  timeout, counted from the connection or from the first byte of the next request on it, and
  431 when the head grows past `MAX_HEAD_BYTES`. One address may hold only so many connections
  whose head is still coming (half-open); past that, its oldest half-open connection is closed.
  The oldest, not the newest: a healthy client behind the same address (a NAT, a proxy) sends
  its head at once, so its connection is never the oldest waiting one, and it is served while
  a slow one from its address churns through its own quota.
- `BodyDeadline`: ASGI middleware; a request body not received whole within its timeout is
  answered 408 and the connection closed.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from lsp_server.gateway.openai_wire import GatewayError

# A request line and headers beyond this are not an API client's.
MAX_HEAD_BYTES = 64 * 1024


def _closing_response(status: str, text: str) -> bytes:
    body = text.encode()
    head = (
        f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\n"
        f"connection: close\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


_HEAD_TIMEOUT = _closing_response("408 Request Timeout", "the request head came too slowly\n")
_HEAD_TOO_LARGE = _closing_response(
    "431 Request Header Fields Too Large", "the request head is too large\n"
)
_TOO_MANY_WAITING = _closing_response(
    "408 Request Timeout", "too many connections from this address are waiting for a request\n"
)


def head_timeout_protocol(timeout_s: float, *, max_half_open_per_ip: int) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (httptools or h11, as uvicorn would pick) with a head timeout and
    at most `max_half_open_per_ip` connections per client address waiting for their head."""
    # The connections whose head is still coming, by client address, oldest first.
    half_open: dict[str, dict[HeadTimeoutProtocol, None]] = {}

    class HeadTimeoutProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        _head_timer: asyncio.TimerHandle | None = None
        _head_bytes = 0
        _address = ""

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            self._address = self.client[0] if self.client else ""
            self._arm()

        def data_received(self, data: bytes) -> None:
            before = self.cycle
            # The first bytes of the next request on this connection: it is timed only when
            # its head did not come whole with them (a timer a request is a wake-up's cost).
            next_request = self._head_timer is None and (before is None or before.response_complete)
            super().data_received(data)
            if next_request and self.cycle is before and not self.transport.is_closing():
                self._arm()
            if self._head_timer is None:
                return
            if self.cycle is not before:
                self._disarm()  # the head is complete: the request is the app's now
                return
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse(_HEAD_TOO_LARGE)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._head_bytes = 0
            self._head_timer = self.loop.call_later(timeout_s, self._refuse, _HEAD_TIMEOUT)
            waiting = half_open.setdefault(self._address, {})
            waiting[self] = None
            if len(waiting) > max_half_open_per_ip:
                next(iter(waiting))._refuse(_TOO_MANY_WAITING)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            waiting = half_open.get(self._address)
            if waiting is not None:
                waiting.pop(self, None)
                if not waiting:
                    del half_open[self._address]

        def _refuse(self, response: bytes) -> None:
            self._disarm()
            if not self.transport.is_closing():
                self.transport.write(response)
                self.transport.close()

    return HeadTimeoutProtocol


class BodyDeadline:
    """ASGI middleware: the request body must arrive whole within `timeout_s` of the first read.

    Reads after the body (an app waiting for the client to leave) are not limited.
    """

    def __init__(self, app: ASGIApp, *, timeout_s: float) -> None:
        self.app = app
        self._timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        body_done = False

        async def receive_in_time() -> Message:
            nonlocal deadline, body_done
            if body_done:
                return await receive()
            if deadline is None:
                deadline = loop.time() + self._timeout_s
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise _body_timeout(self._timeout_s) from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        await self.app(scope, receive_in_time, send)


def _body_timeout(timeout_s: float) -> GatewayError:
    return GatewayError(
        408,
        f"the request body did not arrive within {timeout_s:g} s",
        code="request_timeout",
        headers={"Connection": "close"},
    )
