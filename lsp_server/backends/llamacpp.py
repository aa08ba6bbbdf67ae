"""llama.cpp's own HTTP server (`kind = "llamacpp"`, `llama-server`).

Fill-in-the-middle goes to its native `/infill`: the server wraps `input_prefix` and
`input_suffix` in the loaded model's own FIM tokens (which the OpenAI-compatible
`/v1/completions` of llama-server does not do: it ignores `suffix`), and `cache_prompt` lets the
next keystroke reuse the KV cache of this one, which is what makes a local server fast. Context
beyond the file goes in `input_extra` ({filename, text} each), which llama.cpp writes in the
model's repository-level format (file separators) where the model has one. A plain
prompt (no suffix) goes to the native `/completion`. The native stream is
`data: {"content": …, "stop": false}` events ending with one that has `"stop": true`, its
`stop_type` ("limit" when `n_predict` ran out) and token counts, and no `[DONE]`.

A server without `/infill` (404: the OpenAI-only server of llama-cpp-python) or a model without
FIM tokens (501) is asked through the OpenAI-compatible `/v1/completions` with `prompt` +
`suffix` from then on. Chat always uses `/v1/chat/completions`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx

from lsp_server.backends.base import BackendError, CompletionRequest, Usage, context_within
from lsp_server.backends.http_body import raise_for_status, read_json
from lsp_server.backends.http_client import json_content, setup_timing
from lsp_server.backends.http_failures import transport_error
from lsp_server.backends.openai_compat import OpenAICompatibleBackend, relative
from lsp_server.backends.sse_stream import is_event_stream, iter_sse_json
from lsp_server.config.providers import fim_path
from lsp_server.permit import Permit

log = logging.getLogger(__name__)

OPENAI_FIM_PATH = "v1/completions"
NATIVE_ENDPOINTS = frozenset({"infill", "completion"})
# Statuses that mean "no native FIM here" rather than "this request failed".
NO_NATIVE_FIM = frozenset({404, 501})


class LlamaCppBackend(OpenAICompatibleBackend):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fim_path = relative(fim_path(self.config))

    @property
    def _native(self) -> bool:
        return self._fim_path.rsplit("/", 1)[-1] in NATIVE_ENDPOINTS

    def complete(
        self, request: CompletionRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        permit.check_remote(self.name)
        if not self.config.fim:
            return super().complete(request, usage, permit=permit)
        return self._complete(request, usage if usage is not None else Usage())

    async def _complete(self, request: CompletionRequest, usage: Usage) -> AsyncIterator[str]:
        if self._native:
            sent = False
            try:
                async for text in self._native_stream(self._fim_path, request, usage):
                    sent = True
                    yield text
                return
            except BackendError as error:
                if sent or error.status not in NO_NATIVE_FIM:
                    raise
                log.info(
                    "%s: no native FIM (%s); using /%s", self.name, error.message, OPENAI_FIM_PATH
                )
                self._fim_path = OPENAI_FIM_PATH
        async for text in self._stream(self._fim_path, self._fim_body(request), usage):
            yield text

    async def _native_stream(
        self, infill_path: str, request: CompletionRequest, usage: Usage
    ) -> AsyncIterator[str]:
        body: dict[str, Any] = {
            "n_predict": min(request.max_tokens, self.config.max_tokens),
            "temperature": request.temperature,
            "stream": True,
            "cache_prompt": True,
        }
        if request.stop:
            body["stop"] = list(request.stop)  # llama.cpp takes any number of stop strings
        path = infill_path
        if request.has_suffix and infill_path.endswith("infill"):
            body["input_prefix"] = request.prefix
            body["input_suffix"] = request.suffix
            chunks = context_within(request.context, self.config.context_tokens)
            if chunks:
                # llama.cpp writes these in the model's repository-level format, when it has one.
                body["input_extra"] = [{"filename": c.path, "text": c.text} for c in chunks]
        else:
            path = (
                infill_path.rsplit("/", 1)[0] + "/completion"
                if "/" in infill_path
                else "completion"
            )
            body["prompt"] = self.prompt_with_context(request)
        try:
            async with self._client.stream(
                "POST",
                path,
                **json_content(body, self.headers()),
                extensions=setup_timing(usage),
            ) as response:
                await raise_for_status(self.name, response)
                if not is_event_stream(response):
                    payload = await read_json(self.name, response)
                    text = _native_chunk(payload, usage)
                    if text:
                        yield text
                    return
                async with contextlib.aclosing(iter_sse_json(self.name, response)) as events:
                    async for payload in events:
                        text = _native_chunk(payload, usage)
                        if text:
                            if not usage.reported:
                                usage.completion_tokens += 1
                            yield text
                        if payload.get("stop") is True:
                            return
        except httpx.HTTPError as exc:
            raise transport_error(self.name, exc) from None


def _native_chunk(payload: dict[str, Any], usage: Usage) -> str:
    """The text of one native event (or body); the final one carries counts and stop type."""
    if payload.get("stop") is True:
        usage.finish_reason = "length" if payload.get("stop_type") == "limit" else "stop"
        predicted = payload.get("tokens_predicted")
        evaluated = payload.get("tokens_evaluated")
        if isinstance(predicted, int) and not isinstance(predicted, bool) and predicted > 0:
            usage.completion_tokens = predicted
            usage.reported = True
        if isinstance(evaluated, int) and not isinstance(evaluated, bool) and evaluated > 0:
            usage.prompt_tokens = evaluated
    content = payload.get("content")
    return content if isinstance(content, str) else ""
