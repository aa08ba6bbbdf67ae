"""`POST /v1/chat/completions`: agents' chat, routed by task class and answered faithfully.

The request's fields go upstream as the endpoint's kind takes them (`backends/chat_body.py`,
`backends/anthropic_wire.py`); the answer comes back with its tool calls, its finish reason and
usage: not streamed, `message.tool_calls`; streamed, each text piece as a `content` delta and
each tool-call piece as a `tool_calls` delta (the first piece of a call carries its id, type
and name, every piece its index), then the finish reason, then usage when
`stream_options.include_usage` asked for it.

Streamed, the answer of an endpoint whose stream is already what an OpenAI client reads (the
`openai`, `deepseek` and `llamacpp` kinds) is relayed: the upstream's own events go to the
client as they came, none parsed and written again but those that must be read
(`backends/sse_relay.py`: the usage, the first token, the end, and tool calls, which pass as
they came where they keep the spec and are made regular where they do not,
`backends/openai_relay.py`). What the client reads in them is the upstream's but for `model`,
which names the endpoint that answered, as in every other answer of the gateway, streamed or
not: a client that asked for `auto` or a task class learns who answered, in the field where
OpenAI's own API names the model that answered (`gpt-4o-2024-08-06` for `gpt-4o`), and it is the
same name as the `X-Gateway-LS-Endpoint` header's and `/metrics`'s. The field is replaced in the
bytes, as the upstream's first event writes it, not parsed. `id` and `created` stay the
upstream's: they are one answer's, whoever writes them. The usage event goes on only when the
client asked for usage; one the upstream did not send is written by the gateway at the end, from
its estimates. Every other answer (the Anthropic kind's, the local model's, a kind that reports
no usage in its stream) is rewritten as before, its `model` the endpoint's name. `/metrics`
counts streamed answers by path (`gateway_ls_streamed_answers`, `relay` or `rewrite`).

The parts another front door reuses (the Responses API bridges onto this path): the core's
`ChatService.chat` (`engine.chats`) answers a `ChatRequest`; `start_chat_feed` runs it and streams
its events; `usage_of` and
`routing_headers` describe the answer.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lsp_server import json_codec
from lsp_server.backends.base import (
    ChatEvent,
    ChatRequest,
    Relayed,
    RelayedUsage,
    ToolCallDelta,
    estimate_tokens,
)
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
                relay=True,
            ),
        )
        if isinstance(feed.first, Relayed):
            relayed = _relayed(feed, body, chat, meter)
            return feed.response(relayed, {ENDPOINT_HEADER: feed.serving}, relayed=True)
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


async def _relayed(
    feed: EventFeed[ChatEvent, Answered], body: ChatBody, chat: ChatRequest, meter: Meter
) -> AsyncIterator[bytes]:
    """The upstream's events as they came, but its usage event when the client did not ask for
    usage; then `[DONE]`, after a usage event of the gateway's own when the client asked for
    one the upstream did not send."""
    try:
        out: list[bytes] = []
        usage_sent = False
        named = _model_naming(feed.first, feed.serving)
        async for pieces in feed.batches():
            for piece in pieces:
                if isinstance(piece, RelayedUsage):
                    usage_sent = body.include_usage
                    if not usage_sent:
                        continue
                if isinstance(piece, Relayed):
                    out.append(piece)
            if not feed.ended:  # else the ending goes in the same write
                yield named(b"".join(out))
                out = []
        try:
            routed = feed.work.result()
        except RouteFailed as failed:
            out.append(sse_event(openai_error(failed).body()))
            yield LastEvents(named(b"".join(out)) + SSE_DONE)
            return
        charge(meter, routed, chat)
        if body.include_usage and not usage_sent:
            usage, _ = usage_of(routed, chat)
            ids = _relayed_ids(feed.first)
            out.append(sse_event(usage_chunk(ids, feed.serving, "chat.completion.chunk", usage)))
        yield LastEvents(named(b"".join(out)) + SSE_DONE)
    finally:
        feed.stop()


# The `model` field of an OpenAI chunk, as written (JSON puts no unescaped quote in a string).
_MODEL_FIELD = re.compile(rb'"model"\s*:\s*("(?:[^"\\]|\\.)*")')


def _model_naming(first: ChatEvent | None, endpoint: str) -> Callable[[bytes], bytes]:
    """What names the endpoint as the `model` of relayed events: the upstream's model, as its
    first event writes it, replaced in the bytes, however each event spaces the field (the
    events the relay writes again are compact). Nothing to do where it names none."""
    found = _MODEL_FIELD.search(first) if isinstance(first, Relayed) else None
    if found is None:
        return lambda events: events
    field = re.compile(rb'"model"\s*:\s*' + re.escape(found.group(1)))
    named = (b'"model":' + json_codec.dumps(endpoint)).replace(b"\\", b"\\\\")  # `sub`'s escapes
    return lambda events: field.sub(named, events)


def _relayed_ids(first: ChatEvent | None) -> ResponseIds:
    """The id and creation time of a relayed stream, read from its first event (the
    gateway's own, where it does not say)."""
    head: Any = None
    if isinstance(first, Relayed):
        data = first.partition(b"\n")[0].removeprefix(b"data:").strip()
        with contextlib.suppress(ValueError, RecursionError):
            head = json_codec.loads(data)
    ids = ResponseIds.new("chatcmpl")
    if not isinstance(head, dict):
        return ids
    id_, created = head.get("id"), head.get("created")
    return ResponseIds(
        id_ if isinstance(id_, str) else ids.id,
        created if isinstance(created, int) else ids.created,
    )


def _delta(piece: ChatEvent) -> dict[str, Any]:
    """A chat chunk's `delta` for one piece: text, or a piece of a tool call."""
    return tool_call_delta(piece) if isinstance(piece, ToolCallDelta) else {"content": piece}
