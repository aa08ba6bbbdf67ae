"""One pooled HTTP client per endpoint, as every HTTP backend makes it: keep-alive connections
reused across keystrokes, a transport that survives cancelled requests and dead pooled
connections, no cookies kept, and the connection set-up timed apart from the model's latency."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import ssl
from collections.abc import Mapping
from functools import cache
from typing import Any

import httpx

from lsp_server import json_codec
from lsp_server.backends.asyncio_network import AsyncioBackend, ConnectionSetup, noting_setup
from lsp_server.backends.base import BackendError, Usage
from lsp_server.backends.connection_pool import LinearConnectionPool
from lsp_server.backends.http_body import read_limited
from lsp_server.config.model import EndpointConfig
from lsp_server.failures import FailureKind

# The module anyio imports for its first event on asyncio (`anyio._core._eventloop`).
ANYIO_ASYNCIO_BACKEND = "anyio._backends._asyncio"
# Connections to one endpoint at once. An editor needs a handful; a team's gateway holds one per
# streamed answer to an HTTP/1.1 upstream (llama.cpp, vLLM, a proxy), and 200 agents' turns
# at once queued behind 16 connections (seconds of wait, then "no free connection"). Idle
# ones beyond the kept-alive count are closed.
MAX_CONNECTIONS = 512
MAX_KEEPALIVE_CONNECTIONS = 64
JSON_TYPE = "application/json"
# The model list read by a warm-up call is small; more than this is not read.
MODEL_LIST_MAX_BYTES = 64 * 1024
# The request extension that carries the `Usage` its connection set-up is added to.
_USAGE_EXTENSION = "gateway_ls.usage"

# A reasoning model may think for a long while before its first byte; the router's refactor
# deadline, not the per-read timeout, is what bounds a refactor.
REFACTOR_READ_TIMEOUT_S = 300.0


def endpoint_timeout_s(config: EndpointConfig) -> float:
    """`timeout_ms` bounds each read; a `refactor` endpoint gets a reasoning model's patience."""
    timeout_s = config.timeout_ms / 1000
    if "refactor" in config.roles:
        return max(timeout_s, REFACTOR_READ_TIMEOUT_S)
    return timeout_s


def bearer_headers(endpoint: str, config: EndpointConfig) -> dict[str, str]:
    """The `Authorization` header from the variable the user's config names; none when it
    names none, an AUTH failure when that variable is unset."""
    if not config.api_key_env:
        return {}
    key = config.api_key()
    if key is None:
        raise BackendError(
            endpoint, FailureKind.AUTH, f"environment variable {config.api_key_env} is not set"
        )
    return {"Authorization": f"Bearer {key}"}


def make_client(base_url: str, timeout_s: float) -> httpx.AsyncClient:
    """A keep-alive client: connections are reused across keystrokes; HTTP/2 where offered.

    Bodies are asked for uncompressed: completions are small, and inflating costs the event
    loop time that belongs to keystrokes (a server that compresses anyway: `body_chunks`).
    Cookies an endpoint sets are never kept (`_NoCookies`).
    """
    return _UpstreamClient(
        base_url=base_url.rstrip("/") + "/",
        timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 3.0)),
        transport=_transport(),
        headers={"Accept-Encoding": "identity"},
        trust_env=False,
    )


class _NoCookies(httpx.Cookies):
    """A cookie jar that no answer's `Set-Cookie` reaches: the gateway shares one client among
    all its clients, and a cookie from one client's answer must not ride on another's request.
    Nothing is read from an answer either: httpx would wrap every response and its request in
    urllib's types to find cookies to refuse (a tenth of a millisecond of an agent's turn)."""

    def extract_cookies(self, response: httpx.Response) -> None:
        return None


class _UpstreamClient(httpx.AsyncClient):
    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._cookies = _NoCookies()


class EndpointUrls:
    """The absolute URL of each path asked of one client's endpoint, made once: httpx parses a
    relative URL and merges it with the client's base URL on every request, in Python."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._base = client.base_url
        self._urls: dict[str, httpx.URL] = {}  # the endpoint's configured paths

    def __call__(self, path: str) -> httpx.URL:
        url = self._urls.get(path)
        if url is None:
            relative = httpx.URL(path)  # merged as httpx merges it
            raw_path = self._base.raw_path + relative.raw_path.lstrip(b"/")
            url = self._urls[path] = self._base.copy_with(raw_path=raw_path)
        return url


def prepare() -> None:
    """Do now, on any thread, what the first client would otherwise do on the event loop:
    import the HTTP/2 layer and anyio's asyncio backend (httpcore's pool makes an anyio event
    for the first request it queues, and anyio imports its backend then: a fifth of a second),
    and load the certificate store."""
    importlib.import_module(ANYIO_ASYNCIO_BACKEND)
    _transport()


def _transport() -> CancellationSafeTransport:
    limits = httpx.Limits(
        max_connections=MAX_CONNECTIONS,
        max_keepalive_connections=MAX_KEEPALIVE_CONNECTIONS,
        keepalive_expiry=60,
    )
    return CancellationSafeTransport(limits, _ssl_context())


@cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context for every endpoint: loading the certificate store takes a large part of
    a keystroke's budget, and each client would load it again."""
    return httpx.create_ssl_context()


class CancellationSafeTransport(httpx.AsyncHTTPTransport):
    """Takes back the pool slot a cancelled request can strand, and retries a request that a
    dead pooled connection failed.

    httpcore 1.0 can keep a connection whose request was cancelled between being given the
    connection and starting to use it (encode/httpcore#1093): no request holds it, yet it is
    neither idle nor available nor closed, so it is never handed out or reaped again. Keystroke
    traffic cancels most requests, so the slots run out within minutes and every request then
    fails with PoolTimeout. Such connections are closed and dropped from the pool here.

    A keep-alive connection can die unnoticed (the upstream restarted or crashed). A request
    that failed on such a reused connection before any response came back is sent once more,
    on a fresh connection: the other idle ones are as suspect and are dropped first.
    """

    def __init__(self, limits: httpx.Limits, ssl_context: ssl.SSLContext) -> None:
        super().__init__(http2=True, limits=limits, verify=ssl_context, trust_env=False)
        # The pool httpx makes, on asyncio's own streams instead of anyio's (`asyncio_network`),
        # its bookkeeping linear in the connections open (`connection_pool`).
        self._pool = LinearConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=True,
            network_backend=AsyncioBackend(),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        with noting_setup() as setup:
            try:
                return await self._retrying(request, setup)
            finally:
                usage = request.extensions.get(_USAGE_EXTENSION)
                if isinstance(usage, Usage):
                    usage.setup_ms += setup.seconds * 1000

    async def _retrying(self, request: httpx.Request, setup: ConnectionSetup) -> httpx.Response:
        try:
            return await super().handle_async_request(request)
        except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError):
            if setup.opened:
                raise  # a fresh connection failed: the upstream's fault, not the pool's
        except asyncio.CancelledError:
            await _close_stranded_connections(self._pool)
            raise
        await _close_idle_connections(self._pool)
        try:
            return await super().handle_async_request(request)
        except asyncio.CancelledError:
            await _close_stranded_connections(self._pool)
            raise


async def _close_idle_connections(pool: Any) -> None:
    connections = getattr(pool, "_connections", None)
    if not isinstance(connections, list):
        return
    idle = [c for c in connections if c.is_idle()]
    for connection in idle:
        connections.remove(connection)
    for connection in idle:
        with contextlib.suppress(Exception):
            await connection.aclose()


async def _close_stranded_connections(pool: Any) -> None:
    connections = getattr(pool, "_connections", None)
    requests = getattr(pool, "_requests", None)
    if not isinstance(connections, list) or not isinstance(requests, list):
        return
    in_use = {id(getattr(r, "connection", None)) for r in requests}
    stranded = [
        c
        for c in connections
        if id(c) not in in_use and not (c.is_available() or c.is_idle() or c.is_closed())
    ]
    for connection in stranded:
        connections.remove(connection)
    for connection in stranded:
        with contextlib.suppress(Exception):
            await connection.aclose()


def json_content(body: Any, headers: Mapping[str, str]) -> dict[str, Any]:
    """The arguments of a request carrying `body` as JSON (with `headers`), written by orjson:
    an agent's 40 KB turn in a fraction of `json`'s time."""
    return {"content": json_codec.dumps(body), "headers": {**headers, "Content-Type": JSON_TYPE}}


def setup_timing(usage: Usage | None) -> dict[str, Any]:
    """Request extensions that add the time spent opening a connection (TCP connect, TLS
    handshake) to `usage.setup_ms`, so the router does not count it as model latency."""
    return {} if usage is None else {_USAGE_EXTENSION: usage}


async def open_connection(client: httpx.AsyncClient, path: str, headers: dict[str, str]) -> None:
    """GET `path` (a model list: no user content) so the client's pool holds an open connection
    when the first keystroke comes. Any failure is left for that request to report."""
    with contextlib.suppress(httpx.HTTPError, BackendError):
        async with client.stream("GET", path, headers=headers) as response:
            await read_limited("warm-up", response, MODEL_LIST_MAX_BYTES)
