"""What every HTTP backend shares: one pooled client per endpoint, and the mapping of transport
failures and HTTP statuses onto `BackendError`, so the router sees one vocabulary of faults."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import re
import ssl
import time
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from functools import cache
from typing import Any

import httpx
from httpx_sse import ServerSentEvent

# httpx-sse's own decoders, as its `EventSource` uses them (see `sse_events`); the version is
# capped in pyproject.toml so that a change of its inner layout is met in review, not in use.
from httpx_sse._decoders import SSEDecoder, SSELineDecoder

from lsp_server import json_codec
from lsp_server.backends.asyncio_network import AsyncioBackend
from lsp_server.backends.base import BackendError, Usage
from lsp_server.backends.connection_pool import LinearConnectionPool
from lsp_server.config.model import EndpointConfig
from lsp_server.failures import FailureKind

# A completion body larger than this is not a completion: refuse it rather than buffer it.
MAX_BODY_BYTES = 4 * 1024 * 1024
# Connections to one endpoint at once. An editor needs a handful; a team's gateway holds one per
# streamed answer to an HTTP/1.1 upstream (llama.cpp, vLLM, a proxy), and 200 agents' turns
# at once queued behind 16 connections (seconds of wait, then "no free connection"). Idle
# ones beyond the kept-alive count are closed.
MAX_CONNECTIONS = 512
MAX_KEEPALIVE_CONNECTIONS = 64
JSON_TYPE = "application/json"
# One SSE event (and so one line) larger than this is not a token delta: the stream is refused
# before the line is buffered whole, so an endless line costs at most this much memory.
MAX_SSE_EVENT_BYTES = 1024 * 1024
# A compressed body is inflated off the event loop in steps of at most this many bytes.
INFLATE_STEP_BYTES = 256 * 1024
# How long to wait for the end of a body after `[DONE]` to keep the connection reusable.
DRAIN_TIMEOUT_S = 0.05


# The model list read by a warm-up call is small; more than this is not read.
MODEL_LIST_MAX_BYTES = 64 * 1024
# Connection set-up steps timed by `setup_timing` (httpcore trace events, without the prefix).
_SETUP_STEPS = ("connect_tcp", "connect_unix_socket", "start_tls")

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
    import the HTTP/2 layer and load the certificate store."""
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
        connected = _watch_connects(request)
        try:
            return await super().handle_async_request(request)
        except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError):
            if connected():
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


def _watch_connects(request: httpx.Request) -> Callable[[], bool]:
    """Note, through httpcore's trace hook, whether the request opened a new connection. The
    connection's events, every set-up step among them, go on to the request's own hook
    (`setup_timing`); the request's other steps are not passed on."""
    opened = False
    outer: Callable[[str, dict[str, Any]], Awaitable[None]] | None = request.extensions.get("trace")

    async def trace(event: str, info: dict[str, Any]) -> None:
        nonlocal opened
        if not event.startswith("connection."):
            return  # the request's own steps (ten a request); every set-up step is a connection's
        if event.startswith("connection.connect_") and event.endswith(".started"):
            opened = True
        if outer is not None:
            await outer(event, info)

    request.extensions["trace"] = trace
    return lambda: opened


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
    if usage is None:
        return {}
    started: dict[str, float] = {}

    async def trace(event: str, info: dict[str, Any]) -> None:
        _, _, rest = event.partition(".")
        step, _, phase = rest.rpartition(".")
        if step not in _SETUP_STEPS:
            return
        if phase == "started":
            started[step] = time.perf_counter()
        elif step in started:
            usage.setup_ms += (time.perf_counter() - started.pop(step)) * 1000

    hook: Callable[[str, dict[str, Any]], Awaitable[None]] = trace
    return {"trace": hook}


async def open_connection(client: httpx.AsyncClient, path: str, headers: dict[str, str]) -> None:
    """GET `path` (a model list: no user content) so the client's pool holds an open connection
    when the first keystroke comes. Any failure is left for that request to report."""
    with contextlib.suppress(httpx.HTTPError, BackendError):
        async with client.stream("GET", path, headers=headers) as response:
            await _read_limited("warm-up", response, MODEL_LIST_MAX_BYTES)


_TIMEOUT_MESSAGES: dict[type[Exception], str] = {
    httpx.ConnectTimeout: "no connection within the connect timeout",
    httpx.ReadTimeout: "no data within timeout_ms",
    httpx.WriteTimeout: "could not send the request within timeout_ms",
    httpx.PoolTimeout: "no free connection in the pool",
}


def transport_error(endpoint: str, exc: httpx.HTTPError) -> BackendError:
    """Translate an httpx exception; DNS and refused connections read as 'no network'."""
    if isinstance(exc, httpx.TimeoutException):
        return BackendError(
            endpoint, FailureKind.TIMEOUT, _TIMEOUT_MESSAGES.get(type(exc), "timed out")
        )
    if isinstance(exc, httpx.ConnectError | httpx.NetworkError):
        message = _refused_certificate(exc) or _short(str(exc)) or type(exc).__name__
        return BackendError(endpoint, FailureKind.NETWORK, message)
    if isinstance(exc, httpx.RemoteProtocolError | httpx.DecodingError):
        return BackendError(endpoint, FailureKind.PROTOCOL, _short(str(exc)) or "protocol error")
    return BackendError(endpoint, FailureKind.NETWORK, _short(str(exc)) or type(exc).__name__)


def _refused_certificate(exc: BaseException) -> str | None:
    """Why the endpoint's TLS certificate was refused, in words, when that is what failed the
    connection (ssl's own message names a C source line and no remedy)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            reason = cause.verify_message or cause.reason or "not valid"
            return (
                f"the endpoint's TLS certificate was refused: {reason} (a private certificate "
                "authority is trusted through SSL_CERT_FILE)"
            )
        cause = cause.__cause__ or cause.__context__
    return None


# An upstream's words for a conversation longer than its context (OpenAI, Anthropic, llama.cpp,
# vLLM, Ollama).
_CONTEXT_EXCEEDED = re.compile(
    r"context[_ ]length|context window|maximum context|context size|prompt is too long"
    r"|too many tokens|exceeds? the (?:available )?context",
    re.IGNORECASE,
)


def status_failure_kind(status: int, reason: str) -> FailureKind:
    """The kind of failure an HTTP error status (and the upstream's reason) tells."""
    if status in (401, 403):
        return FailureKind.AUTH
    if status == 404:
        return FailureKind.NOT_FOUND
    if status == 429:
        return FailureKind.RATE_LIMITED
    if status >= 500:
        return FailureKind.SERVER
    if status == 413 or (status in (400, 422) and _CONTEXT_EXCEEDED.search(reason)):
        return FailureKind.CONTEXT_OVERFLOW
    return FailureKind.PROTOCOL


async def raise_for_status(endpoint: str, response: httpx.Response) -> None:
    """Raise a `BackendError` for a non-2xx response, with the server's short reason."""
    if response.status_code < 400:
        return
    try:
        body = await _read_limited(endpoint, response, 2048)
    except BackendError:  # an undecodable error body: the status alone says enough
        body = b""
    reason = _error_message(body) or response.reason_phrase
    status = response.status_code
    raise BackendError(
        endpoint,
        status_failure_kind(status, reason),
        f"HTTP {status}: {_short(reason)}",
        status=status,
        retry_after_s=parse_retry_after(response.headers.get("retry-after")),
    )


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


async def read_json(endpoint: str, response: httpx.Response) -> dict[str, Any]:
    """A whole JSON body, bounded in size; malformed or oversized bodies are protocol faults."""
    body = await _read_limited(endpoint, response, MAX_BODY_BYTES + 1)
    if len(body) > MAX_BODY_BYTES:
        raise BackendError(endpoint, FailureKind.PROTOCOL, "response body too large")
    try:
        data = json.loads(body)
    except ValueError as exc:
        message = getattr(exc, "msg", "not UTF-8")
        raise BackendError(endpoint, FailureKind.PROTOCOL, f"malformed JSON: {message}") from None
    except RecursionError:
        raise BackendError(
            endpoint, FailureKind.PROTOCOL, "malformed JSON: nested too deep"
        ) from None
    if not isinstance(data, dict):
        raise BackendError(endpoint, FailureKind.PROTOCOL, "JSON body is not an object")
    return data


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
                    endpoint, FailureKind.SERVER, _short(_error_message(event.data.encode()))
                )
            yield payload
        else:
            raise BackendError(endpoint, FailureKind.PROTOCOL, "stream ended without [DONE]")
    except httpx.HTTPError as exc:
        raise transport_error(endpoint, exc) from None
    with contextlib.suppress(TimeoutError, httpx.HTTPError, BackendError):
        async with asyncio.timeout(DRAIN_TIMEOUT_S):
            async for _ in events:
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
    bounds = _EventBounds(endpoint)
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


class _EventBounds:
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


async def body_chunks(endpoint: str, response: httpx.Response) -> AsyncGenerator[bytes, None]:
    """The response body as it arrives, decoded.

    Bodies are asked for without compression; a gzip or deflate body sent anyway is inflated on
    a worker thread, in bounded steps, so a small body that inflates hugely neither stalls the
    event loop nor grows memory past `MAX_BODY_BYTES`. Other encodings are refused.
    """
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        async for chunk in response.aiter_raw():
            yield chunk
        return
    if encoding in ("gzip", "x-gzip"):
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif encoding == "deflate":
        inflater = zlib.decompressobj()
    else:
        raise BackendError(
            endpoint, FailureKind.PROTOCOL, f"unsupported content-encoding: {_short(encoding, 40)}"
        )
    produced = 0
    async for chunk in response.aiter_raw():
        pending = chunk
        while pending:
            try:
                out = await asyncio.to_thread(inflater.decompress, pending, INFLATE_STEP_BYTES)
            except zlib.error:
                raise BackendError(
                    endpoint, FailureKind.PROTOCOL, "corrupt compressed body"
                ) from None
            pending = inflater.unconsumed_tail
            produced += len(out)
            if produced > MAX_BODY_BYTES:
                raise BackendError(endpoint, FailureKind.PROTOCOL, "response body too large")
            if out:
                yield out


def is_event_stream(response: httpx.Response) -> bool:
    """Whether the media type (not a parameter of it) names an event stream, as httpx-sse
    checks it."""
    return "text/event-stream" in _media_type(response)


def _media_type(response: httpx.Response) -> str:
    content_type: str = response.headers.get("content-type", "")
    return content_type.partition(";")[0]


async def _read_limited(endpoint: str, response: httpx.Response, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async with contextlib.aclosing(body_chunks(endpoint, response)) as body:
        async for chunk in body:
            chunks.append(chunk)
            size += len(chunk)
            if size >= limit:
                break
    return b"".join(chunks)[:limit]


def _error_message(body: bytes) -> str:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return body.decode("utf-8", "replace").strip()
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            return str(error.get("message") or error.get("type") or "")
        return str(error)
    return ""


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
