"""The Anthropic Messages API (`kind = "anthropic"`): streamed chat with tool calls (translated
to and from the OpenAI shapes by `anthropic_wire`), and inline completion asked for in words,
since the API has no fill-in-the-middle mode."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from lsp_server.backends import http_body, http_client, http_failures, sse_stream
from lsp_server.backends.anthropic_wire import MessagesEvents, finish_reason, messages_body
from lsp_server.backends.base import (
    Backend,
    BackendError,
    ChatEvent,
    ChatRequest,
    CompletionRequest,
    Usage,
    token_count,
)
from lsp_server.backends.fim_instruction import fim_chat_messages
from lsp_server.config.model import EndpointConfig
from lsp_server.config.providers import chat_path
from lsp_server.failures import FailureKind
from lsp_server.permit import Permit

ANTHROPIC_VERSION = "2023-06-01"
MODELS_PATH = "v1/models"

# The `type` of an Anthropic error object, as the router's vocabulary of faults.
_ERROR_KINDS = {
    "rate_limit_error": FailureKind.RATE_LIMITED,
    "overloaded_error": FailureKind.SERVER,
    "api_error": FailureKind.SERVER,
    "authentication_error": FailureKind.AUTH,
    "permission_error": FailureKind.AUTH,
    "not_found_error": FailureKind.NOT_FOUND,
    "invalid_request_error": FailureKind.PROTOCOL,
    "request_too_large": FailureKind.PROTOCOL,
}


class AnthropicBackend(Backend):
    def __init__(self, config: EndpointConfig) -> None:
        self.config = config
        self.name = config.name
        self._client = http_client.make_client(
            config.base_url, http_client.endpoint_timeout_s(config)
        )

    async def complete(
        self, request: CompletionRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        permit.check_remote(self.name)
        stop = request.stop + (("\n",) if request.single_line else ())
        chat = ChatRequest(
            messages=fim_chat_messages(request, self.config.context_tokens),
            max_tokens=request.max_tokens,
            temperature=request.temperature,
            stop=stop,
        )
        async for text in self.chat(chat, usage, permit=permit):
            yield text

    async def chat(
        self, request: ChatRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        async with contextlib.aclosing(self.chat_events(request, usage, permit=permit)) as events:  # type: ignore[type-var]
            async for event in events:
                if isinstance(event, str):
                    yield event

    async def chat_events(
        self, request: ChatRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[ChatEvent]:
        """The answer's text and tool calls, translated from the Messages stream."""
        permit.check_remote(self.name)
        key = self._api_key()
        headers = {
            "x-api-key": key,
            "anthropic-version": ANTHROPIC_VERSION,
            "accept": "text/event-stream",
        }
        stops = _StopScanner(request.stop)
        try:
            async with self._client.stream(
                "POST",
                chat_path(self.config).lstrip("/"),
                **http_client.json_content(messages_body(self.config.model, request), headers),
                extensions=http_client.setup_timing(usage),
            ) as response:
                await http_body.raise_for_status(self.name, response)
                if not sse_stream.is_event_stream(response):
                    content_type = response.headers.get("content-type", "none")
                    raise BackendError(
                        self.name, FailureKind.PROTOCOL, f"not an event stream: {content_type}"
                    )
                async for event in self._stream_events(response, usage or Usage()):
                    if not isinstance(event, str):
                        yield event
                        continue
                    text, stopped = stops.feed(event)
                    if text:
                        yield text
                    if stopped:
                        return
                if held_back := stops.flush():
                    yield held_back
        except httpx.HTTPError as exc:
            raise _without_secret(http_failures.transport_error(self.name, exc), key) from None
        except BackendError as exc:
            raise _without_secret(exc, key) from None

    async def connect(self, *, permit: Permit) -> None:
        permit.check_remote(self.name)
        key = self.config.api_key()
        if not key:
            return  # the first request reports the missing key
        headers = {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}
        await http_client.open_connection(self._client, MODELS_PATH, headers)

    async def aclose(self) -> None:
        await self._client.aclose()

    def _api_key(self) -> str:
        key = self.config.api_key()
        if key:
            return key
        if not self.config.api_key_env:
            reason = "no API key: set api_key_env to the environment variable that holds it"
        else:
            reason = f"no API key: the environment variable {self.config.api_key_env} is not set"
        raise BackendError(self.name, FailureKind.AUTH, reason)

    async def _stream_events(
        self, response: httpx.Response, usage: Usage
    ) -> AsyncIterator[ChatEvent]:
        """The text and tool-call pieces of a Messages stream; usage is filled as its events
        arrive."""
        reader = MessagesEvents(self.name)
        async for event in sse_stream.sse_events(self.name, response):
            if not event.data.strip():
                continue
            payload = self._event_payload(event.data)
            kind = payload.get("type") or event.event
            if kind == "content_block_start":
                for piece in reader.block_start(payload):
                    yield piece
            elif kind == "content_block_delta":
                for piece in reader.block_delta(payload):
                    yield piece
            elif kind == "message_start":
                message = payload.get("message")
                _count_usage(message.get("usage") if isinstance(message, dict) else None, usage)
            elif kind == "message_delta":
                _count_usage(payload.get("usage"), usage)
                delta = payload.get("delta")
                stop_reason = delta.get("stop_reason") if isinstance(delta, dict) else None
                if isinstance(stop_reason, str) and stop_reason:
                    usage.finish_reason = finish_reason(stop_reason)
            elif kind == "message_stop":
                for piece in reader.finish():
                    yield piece
                return
            elif kind == "error":
                raise stream_error(self.name, payload.get("error"))
        raise BackendError(self.name, FailureKind.PROTOCOL, "truncated stream")

    def _event_payload(self, data: str) -> dict[str, Any]:
        try:
            payload = json.loads(data)
        except (ValueError, RecursionError):
            raise BackendError(self.name, FailureKind.PROTOCOL, "malformed SSE data") from None
        if not isinstance(payload, dict):
            raise BackendError(self.name, FailureKind.PROTOCOL, "SSE data is not an object")
        return payload


def stream_error(endpoint: str, error: Any) -> BackendError:
    """The `BackendError` for an `error` event sent in the middle of a stream."""
    error = error if isinstance(error, dict) else {}
    error_type = str(error.get("type") or "api_error")
    message = str(error.get("message") or error_type)
    kind = _ERROR_KINDS.get(error_type, FailureKind.SERVER)
    return BackendError(endpoint, kind, f"{error_type}: {message}"[:200])


def _count_usage(fields: Any, usage: Usage) -> None:
    """Usage is advisory: a field that is not a sane count is ignored, never fatal."""
    if not isinstance(fields, dict):
        return
    prompt_parts = [
        token_count(fields.get(part))
        for part in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    ]
    if any(part is not None for part in prompt_parts):
        usage.prompt_tokens = sum(part or 0 for part in prompt_parts)
    if (output_tokens := token_count(fields.get("output_tokens"))) is not None:
        usage.completion_tokens = output_tokens
        usage.reported = usage.completion_tokens > 0


def _without_secret(error: BackendError, secret: str) -> BackendError:
    """`error`, or a copy of it whose message no longer quotes `secret` (a server may echo it)."""
    if secret not in error.message:
        return error
    return BackendError(
        error.endpoint,
        error.kind,
        error.message.replace(secret, "[redacted]"),
        status=error.status,
        retry_after_s=error.retry_after_s,
    )


class _StopScanner:
    """Cuts a stream of text at the first stop string, even one split across chunks, holding
    back only the text that could still turn out to start a stop string."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self._stops = tuple(stop for stop in stops if stop)
        self._pending = ""

    def feed(self, text: str) -> tuple[str, bool]:
        """The text that is safe to emit now, and whether a stop string was reached."""
        buffer = self._pending + text
        cuts = [buffer.find(stop) for stop in self._stops if stop in buffer]
        if cuts:
            self._pending = ""
            return buffer[: min(cuts)], True
        hold = max((_overlap(buffer, stop) for stop in self._stops), default=0)
        self._pending = buffer[len(buffer) - hold :]
        return buffer[: len(buffer) - hold], False

    def flush(self) -> str:
        pending, self._pending = self._pending, ""
        return pending


def _overlap(text: str, stop: str) -> int:
    """The length of the longest end of `text` that is a proper beginning of `stop`."""
    for length in range(min(len(text), len(stop) - 1), 0, -1):
        if stop.startswith(text[len(text) - length :]):
            return length
    return 0
