"""HTTP plumbing of the gateway: bearer-token check per client, bounded body reads, client
disconnects and errors in OpenAI's shape, so the request handlers only speak about routing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from lsp_server.gateway.client_tokens import ClientTokens
from lsp_server.gateway.openai_wire import GatewayError, error_body

MAX_BODY_BYTES = 8 * 1024 * 1024
# Routes a liveness probe may reach without the token; they reveal nothing.
OPEN_PATHS = frozenset({"/healthz"})
# Routes that are not a client's work: reading the status does not count as a request.
UNCOUNTED_PATHS = frozenset({"/v1/gateway-ls/status", "/v1/gateway-ls/usage", "/metrics"})
METRICS_PATH = "/metrics"
CLIENT_KEY = "gateway_ls_client"  # in the ASGI scope's state: who sent the request

T = TypeVar("T")


class ClientGone(Exception):
    """The client closed the connection before the answer was ready."""


class BearerAuth:
    """ASGI middleware: with client tokens configured, every request needs
    `Authorization: Bearer <token>`; each accepted request is counted for its client, whose
    name the request carries on (`CLIENT_KEY` in the scope's state) to the routes, which hand
    it to the core with the request's `Origin`.
    `public_metrics` says whether `/metrics` is open to anyone."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        clients: ClientTokens | None,
        public_metrics: Callable[[], bool] = lambda: False,
    ) -> None:
        self.app = app
        self._clients = clients if clients else None
        self._public_metrics = public_metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            self._clients is None
            or scope["type"] != "http"
            or scope["path"] in OPEN_PATHS
            or (scope["path"] == METRICS_PATH and self._public_metrics())
        ):
            await self.app(scope, receive, send)
            return
        client = self._client(scope)
        if client is not None:
            if scope["path"] not in UNCOUNTED_PATHS:
                self._clients.requests[client] += 1
            scope.setdefault("state", {})[CLIENT_KEY] = client
            await self.app(scope, receive, send)
            return
        self._clients.refused += 1
        error = GatewayError(
            401,
            "missing or invalid API key: send `Authorization: Bearer <token>`",
            code="invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )
        await error_response(error)(scope, receive, send)

    def _client(self, scope: Scope) -> str | None:
        assert self._clients is not None
        header = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        scheme, _, presented = header.partition(b" ")
        if scheme.lower() != b"bearer":
            return None
        return self._clients.identify(presented.strip())


async def read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The whole request body, refused with 413 as soon as it passes `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> GatewayError:
    return GatewayError(
        413, f"the request body is larger than {limit // (1024 * 1024)} MB", code="too_large"
    )


class ClientWatch:
    """The one task of a request that waits for its client to leave. While a task awaits work
    on the client's behalf (`guarding`), the client's leaving cancels it there; the same watch
    may guard the wait for an answer's first piece and then its stream (`EventFeed`), one task
    where each would start its own. It ends by itself once the answer is over (the server then
    tells the app the client is gone).

    Only valid once the body has been read: from then on the ASGI server's next message is the
    disconnect.
    """

    def __init__(self, receive: Receive) -> None:
        self.gone = False
        self._guarded: asyncio.Task[Any] | None = None
        self._task = asyncio.get_running_loop().create_task(self._watch(receive))

    @property
    def watching(self) -> bool:
        return not self._task.done()

    async def guarding(self, work: Awaitable[T]) -> T:
        """Await `work` in this task; `ClientGone` when the client leaves first, the work
        cancelled (and its upstream calls with it)."""
        task = asyncio.current_task()
        assert task is not None
        if self.gone:
            if isinstance(work, Coroutine):
                work.close()
            raise ClientGone
        self._guarded = task
        try:
            return await work
        except asyncio.CancelledError:
            if self.gone and task.uncancel() == 0:
                raise ClientGone from None
            raise  # cancelled from elsewhere too (the server stopping)
        finally:
            self._guarded = None

    def stop(self) -> None:
        self._task.cancel()

    async def _watch(self, receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self.gone = True
        if self._guarded is not None:
            self._guarded.cancel()  # it is waiting on its work: this task runs only then


async def cancel_on_disconnect(request: Request, work: Awaitable[T]) -> T:
    """Await `work` in the request's own task, cancelling it (and its upstream calls) if the
    client goes away first: one task a request watches the client, none runs the work apart.
    Only valid once the body has been read."""
    watch = ClientWatch(request.receive)
    try:
        return await watch.guarding(work)
    finally:
        watch.stop()


def error_response(error: GatewayError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


async def on_gateway_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GatewayError)
    return error_response(exc)


async def on_http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 and 405, in OpenAI's shape."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"no such route: {request.method} {request.url.path}"
    elif exc.status_code == 405:
        message = f"method {request.method} is not allowed on {request.url.path}"
    else:
        message = str(exc.detail)
    body = error_body(
        exc.status_code, message, code="unknown_url" if exc.status_code == 404 else None
    )
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


async def on_client_gone(request: Request, exc: Exception) -> Response:
    return Response(status_code=499)  # nobody is listening; the status is for the access log


async def on_unexpected(request: Request, exc: Exception) -> Response:
    """The client gets no stack trace; the ASGI server logs it after this response is sent."""
    return JSONResponse(error_body(500, "internal error; see the gateway's log"), status_code=500)
