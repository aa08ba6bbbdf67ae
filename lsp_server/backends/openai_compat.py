"""OpenAI-compatible endpoints (OpenAI, Mercury, Codestral, DeepSeek, vLLM, Ollama's /v1, …).

FIM endpoints get the kind's FIM path (`/completions`, Mercury's and Codestral's
`/fim/completions`, DeepSeek's `/beta/completions`, or the endpoint's `fim_path`) with `prompt`
+ `suffix` (context beyond the file as path-comment blocks before the prefix); the others get
the chat path with a fill-in-the-middle instruction (context as a section of the user message).
Both stream over
SSE; a server that ignores `stream` and answers with one JSON body is handled too. A chat whose
caller passes the stream on (`relay_events`) gets the upstream's own events, read only for the
usage, the first token and the end (`sse_relay`), from the kinds whose streams report usage.
A FIM answer may come in the text-completion shape (`choices[].text`) or, as Codestral's
does, in the chat-completion shape (`message` / `delta`): both are read.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from lsp_server.backends.base import (
    Backend,
    BackendError,
    ChatEvent,
    ChatRequest,
    CompletionRequest,
    EditCall,
    Usage,
    context_within,
    estimate_tokens,
)
from lsp_server.backends.chat_body import MAX_STOP_SEQUENCES, chat_body
from lsp_server.backends.context_prompt import path_comment_blocks
from lsp_server.backends.fim_instruction import fim_chat_messages
from lsp_server.backends.http_body import raise_for_status, read_json
from lsp_server.backends.http_client import (
    EndpointUrls,
    bearer_headers,
    endpoint_timeout_s,
    json_content,
    make_client,
    open_connection,
    setup_timing,
)
from lsp_server.backends.http_failures import transport_error
from lsp_server.backends.openai_chunks import as_list, count_usage, first_choice, tool_call_pieces
from lsp_server.backends.openai_relay import ChatRelayReader
from lsp_server.backends.sse_relay import relay_sse
from lsp_server.backends.sse_stream import is_event_stream, iter_sse_json
from lsp_server.backends.tool_calls import ToolCallStream
from lsp_server.config.model import EndpointConfig
from lsp_server.config.providers import chat_path, fim_path
from lsp_server.failures import FailureKind
from lsp_server.permit import Permit

# Kinds whose streams report usage in a last chunk when asked (`stream_options`); other
# servers may refuse the field, and are counted by estimate. Their chat streams are relayed.
STREAM_USAGE_KINDS = frozenset({"openai", "deepseek", "llamacpp"})


class OpenAICompatibleBackend(Backend):
    def __init__(self, config: EndpointConfig) -> None:
        self.name = config.name
        self.config = config
        self._client = make_client(config.base_url, endpoint_timeout_s(config))
        self._url = EndpointUrls(self._client)

    def complete(
        self, request: CompletionRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        permit.check_remote(self.name)
        max_tokens = min(request.max_tokens, self.config.max_tokens)
        if self.config.fim:
            return self._stream(relative(fim_path(self.config)), self._fim_body(request), usage)
        chat = ChatRequest(
            messages=fim_chat_messages(request, self.config.context_tokens),
            max_tokens=max_tokens,
            temperature=request.temperature,
            stop=request.stop,
        )
        return self.chat(chat, usage, permit=permit)

    def edit(
        self, call: EditCall, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        """Mercury's edit API and chat APIs take the messages as a chat body; a raw prompt
        goes to a completions API as `prompt` alone. Either answer is read as it streams."""
        permit.check_remote(self.name)
        if call.prompt is None:
            body = chat_body(self.config, call.as_chat())
        else:
            body = {
                "model": self.config.model,
                "prompt": call.prompt,
                "max_tokens": call.max_tokens,
                "temperature": 0.0,
                "stream": True,
            }
            if call.stop:
                body["stop"] = list(call.stop)[:MAX_STOP_SEQUENCES]
        return self._stream(relative(call.path), body, usage)

    def _fim_body(self, request: CompletionRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "prompt": self.prompt_with_context(request),
            "max_tokens": min(request.max_tokens, self.config.max_tokens),
            "temperature": request.temperature,
            "stream": True,
        }
        if request.has_suffix:
            body["suffix"] = request.suffix
        if request.stop:
            body["stop"] = list(request.stop)[:MAX_STOP_SEQUENCES]
        return body

    def prompt_with_context(self, request: CompletionRequest) -> str:
        """The prefix after path-comment blocks of the context that fits this endpoint."""
        chunks = context_within(request.context, self.config.context_tokens)
        blocks = path_comment_blocks(chunks, request.language, request.workspace_path)
        return blocks + request.prefix

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
        """The answer's text and tool calls, as the upstream streams them (or sends them in
        one body); tool-call pieces are made regular (`ToolCallStream`)."""
        permit.check_remote(self.name)
        usage = usage if usage is not None else Usage()
        calls = ToolCallStream(self.name)
        path = relative(chat_path(self.config))
        payloads = self._payloads(path, chat_body(self.config, request), usage)
        async with contextlib.aclosing(payloads):  # type: ignore[type-var]
            async for payload, streamed in payloads:
                for event in _chat_events_of(payload, streamed, usage, calls):
                    yield event
        for delta in calls.finish():
            yield delta

    def relay_events(
        self, request: ChatRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[ChatEvent]:
        """The upstream's own events (`Relayed`) where its kind reports usage in its stream,
        which metering needs; else the parsed pieces of `chat_events`."""
        if self.config.kind not in STREAM_USAGE_KINDS:
            return self.chat_events(request, usage, permit=permit)
        return self._relay(request, usage if usage is not None else Usage(), permit)

    async def _relay(
        self, request: ChatRequest, usage: Usage, permit: Permit
    ) -> AsyncIterator[ChatEvent]:
        permit.check_remote(self.name)
        path = relative(chat_path(self.config))
        async with self._response(path, chat_body(self.config, request), usage) as response:
            if is_event_stream(response):
                relayed = relay_sse(self.name, response, usage, ChatRelayReader(self.name))
                async with contextlib.aclosing(relayed):  # type: ignore[type-var]
                    async for piece in relayed:
                        yield piece
                return
            calls = ToolCallStream(self.name)
            payload = await self._one_body(response)
            for event in _chat_events_of(payload, False, usage, calls):
                yield event
            for delta in calls.finish():
                yield delta

    async def _stream(
        self, path: str, body: dict[str, Any], usage: Usage | None
    ) -> AsyncIterator[str]:
        usage = usage if usage is not None else Usage()
        payloads = self._payloads(path, body, usage)
        async with contextlib.aclosing(payloads):  # type: ignore[type-var]
            async for payload, streamed in payloads:
                text = read_choice(payload, usage)
                if text:
                    if not usage.reported:
                        usage.completion_tokens += 1 if streamed else estimate_tokens(len(text))
                    yield text

    async def _payloads(
        self, path: str, body: dict[str, Any], usage: Usage
    ) -> AsyncIterator[tuple[dict[str, Any], bool]]:
        """The stream's chunks, or the one body of a server that ignored `stream`; each with
        whether it is a stream chunk."""
        async with self._response(path, body, usage) as response:
            if is_event_stream(response):
                async for payload in iter_sse_json(self.name, response):
                    yield payload, True
                return
            yield await self._one_body(response), False

    @contextlib.asynccontextmanager
    async def _response(
        self, path: str, body: dict[str, Any], usage: Usage
    ) -> AsyncIterator[httpx.Response]:
        """The streamed response to `body` at `path` once its status is a success; the usage
        asked for where the kind reports it; transport errors as this endpoint's failures."""
        if self.config.kind in STREAM_USAGE_KINDS:
            body = {**body, "stream_options": {"include_usage": True}}
        headers = self.headers()
        try:
            async with self._client.stream(
                "POST",
                self._url(path),
                **json_content(body, headers),
                extensions=setup_timing(usage),
            ) as response:
                await raise_for_status(self.name, response)
                yield response
        except httpx.HTTPError as exc:
            raise transport_error(self.name, exc) from None

    async def _one_body(self, response: httpx.Response) -> dict[str, Any]:
        """The one JSON body of a server that ignored `stream`."""
        payload = await read_json(self.name, response)
        if not isinstance(payload.get("choices"), list) or not payload["choices"]:
            raise BackendError(self.name, FailureKind.PROTOCOL, "response has no choices")
        return payload

    async def connect(self, *, permit: Permit) -> None:
        permit.check_remote(self.name)
        try:
            headers = self.headers()
        except BackendError:
            return  # no key: the first request reports it
        await open_connection(self._client, "models", headers)

    def headers(self) -> dict[str, str]:
        return bearer_headers(self.name, self.config)

    async def aclose(self) -> None:
        await self._client.aclose()


def relative(path: str) -> str:
    """A configured path ("/fim/completions") as one relative to the client's base URL."""
    return path.lstrip("/")


def _chat_events_of(
    payload: dict[str, Any], streamed: bool, usage: Usage, calls: ToolCallStream
) -> list[ChatEvent]:
    """The text and tool-call pieces of one stream chunk (or whole body); notes usage and
    the finish reason."""
    count_usage(payload, usage)
    choice = first_choice(payload)
    if choice is None:
        return []
    reason = choice.get("finish_reason")
    if isinstance(reason, str) and reason:
        usage.finish_reason = reason
    holder = choice.get("delta" if streamed else "message")
    if not isinstance(holder, dict):
        return []
    events: list[ChatEvent] = []
    text = holder.get("content")
    if isinstance(text, str) and text:
        if not usage.reported:
            usage.completion_tokens += 1 if streamed else estimate_tokens(len(text))
        events.append(text)
    for position, raw in enumerate(as_list(holder.get("tool_calls"))):
        pieces = tool_call_pieces(calls, raw, position, streamed)
        if pieces and not usage.reported:
            usage.completion_tokens += 1 if streamed else estimate_tokens(len(json.dumps(raw)))
        events.extend(pieces)
    return events


def read_choice(payload: dict[str, Any], usage: Usage) -> str:
    """The text of a response or stream chunk's first choice; notes usage and finish reason.

    Text-completion (`text`) and chat-completion (`delta.content`, `message.content`) shapes
    are both read: FIM APIs answer in either.
    """
    count_usage(payload, usage)
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    choice = choices[0]
    reason = choice.get("finish_reason")
    if isinstance(reason, str) and reason:
        usage.finish_reason = reason
    for holder in (choice, choice.get("delta"), choice.get("message")):
        if isinstance(holder, dict):
            content = holder.get("text", holder.get("content"))
            if isinstance(content, str):
                return content
    return ""
