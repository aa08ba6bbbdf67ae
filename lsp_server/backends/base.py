"""The interface every model backend implements, and the error it raises.

A backend streams text; a chat may also stream tool calls (`chat_events`). Cancellation is
asyncio cancellation: when the task that iterates a stream is cancelled, the backend must stop
its work at once (close the HTTP stream, stop local generation between tokens) and let
`CancelledError` propagate.
"""

from __future__ import annotations

import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lsp_server.config.model import CHAT_MAX_TOKENS
from lsp_server.failures import EndpointFailure, FailureKind
from lsp_server.permit import Permit

log = logging.getLogger(__name__)


# Characters per token, for an estimate where no tokenizer counted (an upstream that reports no
# usage, a budget sized before asking).
CHARS_PER_TOKEN = 4


def estimate_tokens(chars: int) -> int:
    """Tokens in `chars` characters of text, rounded up."""
    return -(-chars // CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class ContextChunk:
    """A piece of code beyond the prompt window that may help the model: another file's lines,
    a recent edit, the definition of an imported name. Already judged shareable."""

    path: str  # relative to the workspace folder, as a prompt names the file
    text: str
    # Where it goes in a prompt, lower first: the most stable context leads, so a KV cache or a
    # provider's prompt cache reuses it from one keystroke to the next.
    order: int = 0

    @property
    def tokens(self) -> int:
        return context_tokens(self.path, self.text)


def context_tokens(path: str, text: str) -> int:
    """What a piece of context costs in a prompt, with the line that names its file."""
    return estimate_tokens(len(path) + len(text) + 16)


def context_within(chunks: tuple[ContextChunk, ...], budget_tokens: int) -> list[ContextChunk]:
    """The best-ranked `chunks` (they come best first) that fit `budget_tokens`, in prompt
    order: one that does not fit is passed over for smaller ones behind it."""
    chosen: list[ContextChunk] = []
    left = budget_tokens
    for chunk in chunks:
        if chunk.tokens <= left:
            chosen.append(chunk)
            left -= chunk.tokens
    chosen.sort(key=lambda chunk: chunk.order)
    return chosen


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """A fill-in-the-middle request: the model writes what goes between prefix and suffix."""

    prefix: str
    suffix: str
    language: str = ""
    path: str = ""
    max_tokens: int = 64
    stop: tuple[str, ...] = ()
    single_line: bool = False
    temperature: float = 0.0
    # False: a plain prompt to continue (a gateway client sent no suffix), so none is sent on.
    has_suffix: bool = True
    # True: `max_tokens` is a client's explicit ask, which the local model honours in full.
    client_max_tokens: bool = False
    # Context beyond the prompt window, best first; each backend keeps what fits its own
    # `context_tokens` (`context_within`) and writes it in the form its model reads.
    context: tuple[ContextChunk, ...] = ()
    # The document's path relative to its workspace folder (names it among the context files).
    workspace_path: str = ""
    # The document line `prefix` starts on (0: the document's start, or not known): the local
    # model anchors its window to document lines (`prompt_window`).
    prefix_line: int = 0


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A function call the assistant asked for; `arguments` is JSON text as the model wrote it."""

    id: str
    name: str
    arguments: str = "{}"


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One turn of a conversation, as an OpenAI chat client sends it.

    `content` is the turn's text (its text parts joined); `parts` keeps the content parts as
    sent when they are more than text (images), for backends that take them. An assistant turn
    may carry `tool_calls`; a `tool` turn answers the call named by `tool_call_id`.
    """

    role: str  # "system" | "developer" | "user" | "assistant" | "tool"
    content: str
    parts: tuple[Mapping[str, Any], ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""


TokenLimitField = Literal["max_tokens", "max_completion_tokens"]


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A chat conversation to answer.

    `temperature` None: none is sent, the upstream's default holds. `tools` are OpenAI
    function tools as the client sent them; `tool_choice` None: not sent. `options` holds the
    other request fields in OpenAI's names (`response_format`, `parallel_tool_calls`, `seed`,
    `top_p`, `user`, `metadata`, `reasoning_effort`, and fields unknown here), which each
    backend forwards where its kind takes them. `token_limit_field` is the name the client
    gave its token cap, so an OpenAI endpoint gets it under the name it asked for.
    """

    messages: tuple[ChatMessage, ...]
    max_tokens: int = CHAT_MAX_TOKENS
    temperature: float | None = 0.0
    stop: tuple[str, ...] = field(default_factory=tuple)
    tools: tuple[Mapping[str, Any], ...] = ()
    tool_choice: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)
    token_limit_field: TokenLimitField = "max_tokens"

    @property
    def uses_tools(self) -> bool:
        """Whether answering needs a model that knows tool calls: tools offered, or tool
        turns in the history."""
        return bool(self.tools) or any(m.tool_calls or m.role == "tool" for m in self.messages)


@dataclass(frozen=True, slots=True)
class EditCall:
    """One endpoint's call for a next-edit prediction, in the form its model reads: chat
    `messages` (Mercury's edit API, an instruction on a chat API), or a raw `prompt` for a
    completions API (the open Zeta and Sweep models). `path` is where it goes under the
    endpoint's base URL; the local model ignores it. `rewrites`: the text the answer writes
    out again, changed, in a fence (the chat format's region), so that a model that writes it a
    token at a time may stop once the answer copies it and finish the copy itself."""

    path: str
    messages: tuple[ChatMessage, ...] = ()
    prompt: str | None = None
    max_tokens: int = 512
    stop: tuple[str, ...] = ()
    rewrites: str | None = None

    def as_chat(self) -> ChatRequest:
        return ChatRequest(self.messages, max_tokens=self.max_tokens, stop=self.stop)


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of a streamed tool call. The first piece of call `index` carries its `id` and
    function `name`; later pieces add `arguments` text."""

    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""


class Relayed(bytes):
    """Part of an OpenAI-compatible upstream's chat stream as it came: whole server-sent
    events (never `[DONE]`), already in the shape an OpenAI client reads. Made only where the
    caller asked for the upstream's own bytes (`Backend.relay_events`), for a front door that
    passes them on unread; the core carries them without reading them."""


class RelayedUsage(Relayed):
    """The upstream's usage event (no choices, only the counts), which a client gets only when
    it asked for usage."""


# What a chat streams: text, a piece of a tool call, or the upstream's own events relayed.
ChatEvent = str | ToolCallDelta | Relayed


class BackendError(Exception):
    """An expected failure of one endpoint; logged in one line, never with a stack trace."""

    def __init__(
        self,
        endpoint: str,
        kind: FailureKind,
        message: str,
        *,
        status: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(f"{endpoint}: {kind.value}: {message}")
        self.endpoint = endpoint
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after_s = retry_after_s

    @property
    def failure(self) -> EndpointFailure:
        return EndpointFailure(
            endpoint=self.endpoint,
            kind=self.kind,
            message=self.message,
            status=self.status,
            retry_after_s=self.retry_after_s,
        )

    @property
    def looks_offline(self) -> bool:
        return self.kind in (FailureKind.NETWORK, FailureKind.TIMEOUT)


async def _refused(endpoint: str, why: str) -> AsyncIterator[str]:
    raise BackendError(endpoint, FailureKind.UNSUPPORTED, why)
    yield ""  # pragma: no cover - makes this an async generator


def unexpected_failure(endpoint: str, exc: Exception) -> BackendError:
    """A backend's own bug, as a failure of its endpoint: the request falls back and the
    breaker counts it, instead of an empty success or a crashed request. Logged with its trace."""
    log.error("%s: unexpected error in the backend", endpoint, exc_info=exc)
    return BackendError(endpoint, FailureKind.PROTOCOL, f"unexpected {type(exc).__name__}")


# A token count beyond this is not a count a completion could have.
MAX_TOKEN_COUNT = 10**9


def token_count(value: object) -> int | None:
    """A usage field as a token count; None for anything that is not one (a string, a bool,
    a fraction, infinity, a negative or absurd number): usage is advisory, never fatal."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None  # also NaN and infinity
    count = int(value)
    return count if 0 <= count <= MAX_TOKEN_COUNT else None


@dataclass(slots=True)
class Usage:
    """Token counts of one call and why it ended; backends fill it as the stream goes.

    Counts start as estimates (a streamed chunk counts as a token); `reported` turns true once
    the upstream gave non-zero counts of its own, which then replace the estimate.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    reported: bool = False
    finish_reason: str | None = None  # "stop" | "length" | "tool_calls", as the upstream said
    setup_ms: float = 0.0  # time spent opening a connection (TCP, TLS) for this call


class Backend(ABC):
    """One model endpoint. Instances are long-lived and shared by all requests.

    Every call takes the gate's `Permit` (`routing/gate.py`): nothing calls a backend without
    asking the gate first. A remote backend checks it (`Permit.check_remote`)."""

    name: str
    is_local: bool = False

    @abstractmethod
    def complete(
        self, request: CompletionRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        """Stream the text that goes between `request.prefix` and `request.suffix`."""

    @abstractmethod
    def chat(
        self, request: ChatRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        """Stream the assistant's answer to a chat conversation."""

    async def chat_events(
        self, request: ChatRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[ChatEvent]:
        """Stream the answer with its tool calls. This default serves a backend that writes
        text alone: a request that needs tool calls is refused, never answered without them."""
        if request.uses_tools:
            raise BackendError(
                self.name, FailureKind.UNSUPPORTED, "this endpoint does not support tool calls"
            )
        async with contextlib.aclosing(self.chat(request, usage, permit=permit)) as texts:  # type: ignore[type-var]
            async for text in texts:
                yield text

    def relay_events(
        self, request: ChatRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[ChatEvent]:
        """Stream the answer as `chat_events` does, or, where this endpoint's stream is already
        what an OpenAI client reads, as the upstream's own events (`Relayed`). This default
        serves a backend whose answer has to be rewritten: its `chat_events`."""
        return self.chat_events(request, usage, permit=permit)

    def edit(
        self, call: EditCall, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        """Stream the answer to a next-edit prediction. This default serves a backend that
        only chats (the local model, Anthropic): a raw prompt is refused."""
        if call.prompt is not None:
            return _refused(self.name, "this endpoint takes no raw completion prompt")
        return self.chat(call.as_chat(), usage, permit=permit)

    async def connect(self, *, permit: Permit) -> None:  # noqa: B027 - optional hook
        """Open a connection ahead of the first request, with a call that carries no user
        content (the model list); failures are the first real request's to report."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections, threads or models."""
