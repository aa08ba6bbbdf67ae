"""An upstream's response body, read bounded: decoded as it arrives (a compressed one inflated
off the event loop), read whole up to a limit, as a JSON object, or as an error's reason."""

from __future__ import annotations

import asyncio
import contextlib
import json
import zlib
from collections.abc import AsyncGenerator
from typing import Any, cast

import httpx

from lsp_server.backends.base import BackendError
from lsp_server.backends.http_failures import (
    error_message,
    parse_retry_after,
    short,
    status_failure_kind,
)
from lsp_server.failures import FailureKind

# A completion body larger than this is not a completion: refuse it rather than buffer it.
MAX_BODY_BYTES = 4 * 1024 * 1024
# A compressed body is inflated off the event loop in steps of at most this many bytes.
INFLATE_STEP_BYTES = 256 * 1024


async def raise_for_status(endpoint: str, response: httpx.Response) -> None:
    """Raise a `BackendError` for a non-2xx response, with the server's short reason."""
    if response.status_code < 400:
        return
    try:
        body = await read_limited(endpoint, response, 2048)
    except BackendError:  # an undecodable error body: the status alone says enough
        body = b""
    reason = error_message(body) or response.reason_phrase
    status = response.status_code
    raise BackendError(
        endpoint,
        status_failure_kind(status, reason),
        f"HTTP {status}: {short(reason)}",
        status=status,
        retry_after_s=parse_retry_after(response.headers.get("retry-after")),
    )


async def read_json(endpoint: str, response: httpx.Response) -> dict[str, Any]:
    """A whole JSON body, bounded in size; malformed or oversized bodies are protocol faults."""
    body = await read_limited(endpoint, response, MAX_BODY_BYTES + 1)
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


def body_chunks(endpoint: str, response: httpx.Response) -> AsyncGenerator[bytes, None]:
    """The response body as it arrives, decoded: an uncompressed one as httpx reads it, with
    no generator of its own between (each is a step for every chunk of a stream).

    Bodies are asked for without compression; a gzip or deflate body sent anyway is inflated on
    a worker thread, in bounded steps, so a small body that inflates hugely neither stalls the
    event loop nor grows memory past `MAX_BODY_BYTES`. Other encodings are refused.
    """
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        # httpx types its generator as a mere iterator; it is an async generator (`aclose`).
        return cast(AsyncGenerator[bytes, None], response.aiter_raw())
    if encoding in ("gzip", "x-gzip"):
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif encoding == "deflate":
        inflater = zlib.decompressobj()
    else:
        raise BackendError(
            endpoint, FailureKind.PROTOCOL, f"unsupported content-encoding: {short(encoding, 40)}"
        )
    return _inflated(endpoint, response, inflater)


async def _inflated(
    endpoint: str, response: httpx.Response, inflater: Any
) -> AsyncGenerator[bytes, None]:
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


async def read_limited(endpoint: str, response: httpx.Response, limit: int) -> bytes:
    """At most `limit` bytes of the body, decoded; the rest is left unread."""
    chunks: list[bytes] = []
    size = 0
    async with contextlib.aclosing(body_chunks(endpoint, response)) as body:
        async for chunk in body:
            chunks.append(chunk)
            size += len(chunk)
            if size >= limit:
                break
    return b"".join(chunks)[:limit]
