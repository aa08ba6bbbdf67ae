"""`POST /v1/chat/completions`: agents' chat, routed by task class and answered faithfully.

The request's fields go upstream as the endpoint's kind takes them (`backends/chat_body.py`,
`backends/anthropic_wire.py`); the answer comes back with its tool calls, its finish reason and
usage: not streamed, `message.tool_calls`; streamed, each text piece as a `content` delta and
each tool-call piece as a `tool_calls` delta (the first piece of a call carries its id, type
and name, every piece its index), then the finish reason, then usage when
`stream_options.include_usage` asked for it.

The parts another front door reuses (the Responses API bridges onto this path): the core's
`ChatService.chat` (`engine.chats`) answers a `ChatRequest`; `start_chat_feed` runs it and streams
its events; `usage_of` and
`routing_headers` describe the answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lsp_server import json_codec
from lsp_server.backends.base import ChatEvent, ChatRequest, ToolCallDelta, estimate_tokens
from lsp_server.config.model_names import TASK_CLASSES
from lsp_server.core.engine import Engine
from lsp_server.failures import RouteFailed
from lsp_server.gateway.errors import CORE_FAILURES, openai_error
from lsp_server.gateway.event_feed import EventFeed
from lsp_server.gateway.metering import Admit, Meter
from lsp_server.gateway.openai_wire import (
    ChatBody,
    ResponseIds,
    chat_chunk,
    chat_response,
    parse_chat_body,
    parse_json_object,
    tool_call_delta,
    usage_body,
    usage_chunk,
)
from lsp_server.gateway.plumbing import cancel_on_disconnect, read_body
from lsp_server.gateway.sse import SSE_DONE, LastEvents, sse_event
from lsp_server.routing.sequential_route import Answered

# No cap from the client: the endpoint's own `chat_max_tokens` applies.
UNCAPPED = 1_000_000_000
USAGE_HEADER = "X-Gateway-LS-Usage"
ENDPOINT_HEADER = "X-Gateway-LS-Endpoint"
REASON_HEADER = "X-Gateway-LS-Reason"


DEFAULT_URI = "gateway:request"  # the origin of a request that names no file


@dataclass(frozen=True, slots=True)
class Origin:
    """What the client says of the request's origin: a file path, and whether it is sensitive;
    and who the client is (the name the bearer check gave it; empty when the gateway asks for
    no token). Every generation route hands `client` to the core's admission (limits, budget,
    ledger); chat and Responses hand it to the chat service too, which judges a client's
    earlier turns once."""

    uri: str
    sensitive: bool
    client: str = ""


# Reads a request's origin from its headers.
OriginOf = Callable[[Request], Origin]


def chat_request(body: ChatBody) -> ChatRequest:
    """The core's request for a parsed chat body: the client's fields, its token cap as it
    named it (none: the endpoint's `chat_max_tokens`), temperature only when sent."""
    return ChatRequest(
        messages=body.messages,
        max_tokens=body.max_tokens or UNCAPPED,
        temperature=body.temperature,
        stop=body.stop or (),
        tools=body.tools,
        tool_choice=body.tool_choice,
        options=body.options,
        token_limit_field=body.token_limit_field,
    )


def usage_of(routed: Answered, chat: ChatRequest) -> tuple[dict[str, int], str]:
    """The usage body, and whether its counts are the upstream's (`upstream`) or estimates."""
    usage = routed.usage
    estimate = estimate_tokens(sum(len(m.content) for m in chat.messages))
    prompt = usage.prompt_tokens or estimate
    counted = "upstream" if usage.reported else "estimated"
    return usage_body(prompt, usage.completion_tokens), counted


def prompt_chars(chat: ChatRequest) -> int:
    """The characters a chat sends: every turn, its tool calls and the tools' descriptions."""
    turns = sum(
        len(m.content) + sum(len(c.name) + len(c.arguments) for c in m.tool_calls)
        for m in chat.messages
    )
    return turns + (len(json_codec.dumps(chat.tools)) if chat.tools else 0)


def task_class(model: str) -> str:
    """The metrics' and ledger's name for what a chat asked: a class, or `endpoint`."""
    if model in ("", "auto", "gateway-ls"):
        return "auto"
    return model if model in TASK_CLASSES else "endpoint"


def charge(meter: Meter, routed: Answered, chat: ChatRequest) -> None:
    """Tell the meter what the answer used."""
    usage, counted = usage_of(routed, chat)
    meter.answered(
        routed.endpoint,
        usage["prompt_tokens"],
        usage["completion_tokens"],
        reported=counted == "upstream",
        text_chars=len(routed.text) + sum(len(c.arguments) for c in routed.tool_calls),
        upstream_ms=routed.latency_ms,
    )


async def admit_chat(
    admit: Admit, request: Request, origin: Origin, body: ChatBody, chat: ChatRequest
) -> Meter:
    return await admit(
        request,
        client=origin.client,
        operation="chat",
        task_class=task_class(body.model),
        prompt_chars=prompt_chars(chat),
        max_tokens=body.max_tokens,
        model=body.model,
    )


def routing_headers(routed: Answered) -> dict[str, str]:
    return {ENDPOINT_HEADER: routed.endpoint, REASON_HEADER: routed.reason}


async def start_chat_feed(
    request: Request,
    call: Callable[
        [Callable[[ChatEvent], None], Callable[[str], None]],
        Coroutine[Any, Any, Answered],
    ],
) -> EventFeed[ChatEvent, Answered]:
    """A chat's event feed; a chat that failed before its first event is the error that says
    why (an OpenAI-shaped `GatewayError`), as the HTTP status can still tell it."""
    feed: EventFeed[ChatEvent, Answered] = await EventFeed.start(request, call)
    if feed.first is None:
        try:
            feed.work.result()
        except CORE_FAILURES as failed:
            raise openai_error(failed) from None
    return feed


class ChatCompletions:
    """The `/v1/chat/completions` route over the core's chat service."""

    def __init__(self, engine: Engine, origin_of: OriginOf, admit: Admit) -> None:
        self.chats = engine.chats
        self.origin_of = origin_of
        self.admit = admit

    async def handle(self, request: Request) -> Response:
        body = parse_chat_body(parse_json_object(await read_body(request)))
        chat = chat_request(body)
        origin = self.origin_of(request)
        meter = await admit_chat(self.admit, request, origin, body, chat)
        if body.stream:
            return await self._stream(request, body, chat, origin, meter)
        try:
            routed = await cancel_on_disconnect(
                request,
                self.chats.chat(
                    chat,
                    model=body.model,
                    uri=origin.uri,
                    sensitive=origin.sensitive,
                    client=origin.client,
                ),
            )
        except CORE_FAILURES as failed:
            raise openai_error(failed) from None
        charge(meter, routed, chat)
        usage, counted = usage_of(routed, chat)
        payload = chat_response(
            ResponseIds.new("chatcmpl"),
            routed.endpoint,
            routed.text,
            routed.finish_reason,
            usage,
            routed.tool_calls,
        )
        return JSONResponse(payload, headers={**routing_headers(routed), USAGE_HEADER: counted})

    async def _stream(
        self, request: Request, body: ChatBody, chat: ChatRequest, origin: Origin, meter: Meter
    ) -> Response:
        """Stream the answer as it comes. What was sent cannot be taken back, so a failure
        after it ends the stream with an error event instead of starting over elsewhere."""
        feed = await start_chat_feed(
            request,
            lambda on_event, on_attempt: self.chats.chat(
                chat,
                model=body.model,
                uri=origin.uri,
                sensitive=origin.sensitive,
                client=origin.client,
                on_event=on_event,
                on_attempt=on_attempt,
            ),
        )
        ids = ResponseIds.new("chatcmpl")

        async def events() -> AsyncIterator[bytes]:
            try:
                model = feed.serving
                out = [sse_event(chat_chunk(ids, model, {"role": "assistant", "content": ""}))]
                async for pieces in feed.batches():
                    out += (sse_event(chat_chunk(ids, model, _delta(piece))) for piece in pieces)
                    if not feed.ended:  # else the ending goes in the same write
                        yield b"".join(out)
                        out = []
                try:
                    routed = feed.work.result()
                except RouteFailed as failed:
                    yield LastEvents(
                        b"".join([*out, sse_event(openai_error(failed).body()), SSE_DONE])
                    )
                    return
                charge(meter, routed, chat)
                out.append(sse_event(chat_chunk(ids, model, {}, routed.finish_reason)))
                if body.include_usage:
                    usage, _ = usage_of(routed, chat)
                    out.append(sse_event(usage_chunk(ids, model, "chat.completion.chunk", usage)))
                yield LastEvents(b"".join([*out, SSE_DONE]))
            finally:
                feed.stop()

        return feed.response(events(), {ENDPOINT_HEADER: feed.serving})


def _delta(piece: ChatEvent) -> dict[str, Any]:
    """A chat chunk's `delta` for one piece: text, or a piece of a tool call."""
    return tool_call_delta(piece) if isinstance(piece, ToolCallDelta) else {"content": piece}
