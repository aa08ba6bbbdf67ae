"""Chats on the local model: plain, and with tools through llama-cpp-python's ChatML function
calling.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Any

from lsp_server.backends.base import (
    BackendError,
    ChatEvent,
    ChatRequest,
    ToolCallDelta,
    Usage,
)
from lsp_server.backends.local.chat_messages import (
    chat_messages,
    tool_chat_events,
)
from lsp_server.backends.local.job import Job
from lsp_server.backends.local.prompt_abort import PromptAbort
from lsp_server.backends.local.tools import (
    handler_messages,
    handler_tool_choice,
)
from lsp_server.backends.local.worker import ModelWorker
from lsp_server.backends.tool_calls import ToolCallStream
from lsp_server.config.model import LOCAL_CHAT_MAX_TOKENS
from lsp_server.failures import FailureKind
from lsp_server.permit import Permit


class ChatRunner(ModelWorker):
    """`chat` and `chat_events`."""

    async def chat(
        self, request: ChatRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        await self.ensure_loaded()
        async for text in self._stream(lambda job: self._run_chat(job, request), usage):
            if isinstance(text, str):
                yield text

    async def chat_events(
        self, request: ChatRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[ChatEvent]:
        if not request.uses_tools:
            async for text in self.chat(request, usage, permit=permit):
                yield text
            return
        await self.ensure_loaded()
        if not self.tools_supported:
            raise BackendError(
                self.name,
                FailureKind.UNSUPPORTED,
                "the local model's chat template has no tool calling "
                '(set [local] tool_calls = "chatml" to use ChatML function calling)',
            )
        calls = ToolCallStream(self.name)
        async for event in self._stream(lambda job: self._run_tool_chat(job, request), usage):
            if not isinstance(event, ToolCallDelta):
                yield event
                continue
            for piece in calls.feed(
                event.index, id=event.id, name=event.name, arguments=event.arguments
            ):
                yield piece
        for piece in calls.finish():
            yield piece
        if usage is not None and calls.calls():
            usage.finish_reason = "tool_calls"

    def _run_chat(self, job: Job, request: ChatRequest) -> None:
        llm = self._require_model()
        previous = list(llm.eval_tokens)
        eos = llm.token_eos()

        prompt_abort = PromptAbort(llm, job.stop)

        def before_token(ids: Any, scores: Any) -> Any:
            prompt_abort.disarm()
            # The first call sees exactly the prompt the chat template produced.
            if job.completion_tokens == 0:
                self._record_prompt(job, previous, ids.tolist())
            return self._end_or_count(job, scores, eos)

        from llama_cpp import LogitsProcessorList

        # llama-cpp-python types each role's message apart; these are plain role/content dicts.
        messages: Any = chat_messages(request.messages, fold_system=self._fold_system_prompt)
        chunks = llm.create_chat_completion(
            messages=messages,
            max_tokens=min(request.max_tokens, LOCAL_CHAT_MAX_TOKENS, llm.n_ctx() // 2),
            temperature=0.0 if request.temperature is None else request.temperature,
            stop=list(request.stop),
            stream=True,
            logits_processor=LogitsProcessorList([before_token]),
        )
        with prompt_abort:
            self._pump(job, chunks, lambda chunk: chunk["choices"][0]["delta"].get("content"))

    def _run_tool_chat(self, job: Job, request: ChatRequest) -> None:
        """A chat offering tools, through llama-cpp-python's ChatML function calling."""
        from llama_cpp import LogitsProcessorList
        from llama_cpp.llama_chat_format import chatml_function_calling

        llm = self._require_model()
        eos = llm.token_eos()

        def before_token(ids: Any, scores: Any) -> Any:
            return self._end_or_count(job, scores, eos)

        chunks = chatml_function_calling(
            llm,
            messages=handler_messages(request.messages),
            tools=[dict(tool) for tool in request.tools],
            tool_choice=handler_tool_choice(request.tools, request.tool_choice),
            max_tokens=min(request.max_tokens, LOCAL_CHAT_MAX_TOKENS, llm.n_ctx() // 2),
            temperature=0.0 if request.temperature is None else request.temperature,
            stop=list(request.stop),
            stream=True,
            logits_processor=LogitsProcessorList([before_token]),
        )
        self._pump(job, chunks, tool_chat_events)

    def _end_or_count(self, job: Job, scores: Any, eos: int) -> Any:
        """Before each token: a stopped job forces end-of-sequence, so generation ends cleanly
        on this token (raising here would be swallowed by the ctypes callback layer and
        printed to stderr); otherwise the token is counted."""
        if job.stop.is_set():
            scores[:] = -math.inf
            scores[eos] = 0.0
            return scores
        self._count_tokens(job, job.completion_tokens + 1)
        return scores
