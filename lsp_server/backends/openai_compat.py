"""OpenAI-compatible endpoints (OpenAI, Mercury, vLLM, llama-server, Ollama's /v1, …).

FIM endpoints get `/v1/completions` with `prompt` + `suffix`; the others get
`/v1/chat/completions` with a fill-in-the-middle instruction. Both stream over SSE; a server
that ignores `stream` and answers with one JSON body is handled too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx

from lsp_server.backends.base import (
    Backend,
    BackendError,
    ChatMessage,
    ChatRequest,
    CompletionRequest,
    FailureKind,
    Usage,
)
from lsp_server.backends.fim_instruction import fim_chat_messages
from lsp_server.backends.http_common import (
    endpoint_timeout_s,
    is_event_stream,
    iter_sse_json,
    make_client,
    raise_for_status,
    read_json,
    transport_error,
)
from lsp_server.config.model import EndpointConfig


class OpenAICompatibleBackend(Backend):
    def __init__(self, config: EndpointConfig) -> None:
        self.name = config.name
        self.config = config
        self._client = make_client(config.base_url, endpoint_timeout_s(config))

    def complete(
        self, request: CompletionRequest, usage: Usage | None = None
    ) -> AsyncIterator[str]:
        max_tokens = min(request.max_tokens, self.config.max_tokens)
        if self.config.fim:
            body: dict[str, Any] = {
                "model": self.config.model,
                "prompt": request.prefix,
                "suffix": request.suffix,
                "max_tokens": max_tokens,
                "temperature": request.temperature,
                "stream": True,
            }
            if request.stop:
                body["stop"] = list(request.stop)[:4]
            return self._stream("completions", body, usage, chat=False)
        chat = ChatRequest(
            messages=fim_chat_messages(request),
            max_tokens=max_tokens,
            temperature=request.temperature,
            stop=request.stop,
        )
        return self.chat(chat, usage)

    def chat(self, request: ChatRequest, usage: Usage | None = None) -> AsyncIterator[str]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [_message(m) for m in request.messages],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "stream": True,
        }
        if request.stop:
            body["stop"] = list(request.stop)[:4]
        return self._stream("chat/completions", body, usage, chat=True)

    async def _stream(
        self, path: str, body: dict[str, Any], usage: Usage | None, *, chat: bool
    ) -> AsyncIterator[str]:
        headers = self._headers()
        try:
            async with self._client.stream("POST", path, json=body, headers=headers) as response:
                await raise_for_status(self.name, response)
                if is_event_stream(response):
                    async for payload in iter_sse_json(self.name, response):
                        _count_usage(payload, usage)
                        text = _chunk_text(payload, chat=chat)
                        if text:
                            if usage is not None and "usage" not in payload:
                                usage.completion_tokens += 1
                            yield text
                    return
                payload = await read_json(self.name, response)
                _count_usage(payload, usage)
                text = _whole_text(self.name, payload, chat=chat)
                if text:
                    yield text
        except httpx.HTTPError as exc:
            raise transport_error(self.name, exc) from None

    def _headers(self) -> dict[str, str]:
        if not self.config.api_key_env:
            return {}
        key = self.config.api_key()
        if key is None:
            raise BackendError(
                self.name,
                FailureKind.AUTH,
                f"environment variable {self.config.api_key_env} is not set",
            )
        return {"Authorization": f"Bearer {key}"}

    async def aclose(self) -> None:
        await self._client.aclose()


def _message(message: ChatMessage) -> dict[str, str]:
    return {"role": message.role, "content": message.content}


def _chunk_text(payload: dict[str, Any], *, chat: bool) -> str:
    choices = payload.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return ""
    choice = choices[0]
    if chat:
        delta = choice.get("delta") or {}
        content = delta.get("content") if isinstance(delta, dict) else None
    else:
        content = choice.get("text")
    return content if isinstance(content, str) else ""


def _whole_text(endpoint: str, payload: dict[str, Any], *, chat: bool) -> str:
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise BackendError(endpoint, FailureKind.PROTOCOL, "response has no choices")
    choice = choices[0]
    if chat:
        message = choice.get("message") or {}
        content = message.get("content") if isinstance(message, dict) else None
    else:
        content = choice.get("text")
    if content is None:
        return ""
    if not isinstance(content, str):
        raise BackendError(endpoint, FailureKind.PROTOCOL, "completion text is not a string")
    return content


def _count_usage(payload: dict[str, Any], usage: Usage | None) -> None:
    reported = payload.get("usage")
    if usage is None or not isinstance(reported, dict):
        return
    usage.prompt_tokens = int(reported.get("prompt_tokens") or usage.prompt_tokens)
    usage.completion_tokens = int(reported.get("completion_tokens") or usage.completion_tokens)
