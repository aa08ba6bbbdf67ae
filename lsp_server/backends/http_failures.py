"""Failures of an HTTP upstream in the router's one vocabulary of faults (`FailureKind` on a
`BackendError`): transport errors, HTTP statuses and the upstream's own reasons."""

from __future__ import annotations

import json
import re
import ssl
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

from lsp_server.backends.base import BackendError
from lsp_server.failures import FailureKind

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
        message = _refused_certificate(exc) or short(str(exc)) or type(exc).__name__
        return BackendError(endpoint, FailureKind.NETWORK, message)
    if isinstance(exc, httpx.RemoteProtocolError | httpx.DecodingError):
        return BackendError(endpoint, FailureKind.PROTOCOL, short(str(exc)) or "protocol error")
    return BackendError(endpoint, FailureKind.NETWORK, short(str(exc)) or type(exc).__name__)


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


def error_message(body: bytes) -> str:
    """The reason an error body gives (OpenAI's `{"error": {"message"}}` and the like), else
    the body itself."""
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


def short(text: str, limit: int = 160) -> str:
    """`text` on one line, cut to `limit` characters: an upstream's words in a message."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
