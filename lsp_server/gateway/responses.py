"""`POST /v1/responses`: the Responses API (Codex CLI, the OpenAI Agents SDK) on the chat path.

A request is translated into a chat completion (`responses_request`), judged, planned and asked
exactly as `/v1/chat/completions` asks it: the same task classes, privacy verdict, breakers,
statistics and decision log. The chat's text and tool-call pieces come back as Responses
events, or as one response object when not streamed.

When the endpoint the plan would ask first speaks the Responses API itself (`responses_path`
in its configuration), the request goes to it as sent, with the endpoint's model, and its
events come back as they are. That endpoint alone is asked; its successes and failures count
in its statistics and breaker as a chat's do. A request that must stay on this machine never
goes there: the plan then holds the local model alone.

Failures: what the gateway refuses (a body it cannot carry, an unknown model, nothing allowed
to serve) is an HTTP error. An upstream failure is an HTTP error when not streamed, and a
`response.failed` event when streamed, with the code clients act on (`rate_limit_exceeded`,
`context_length_exceeded`, `server_error`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lsp_server.backends.base import ChatRequest, ToolCallDelta
from lsp_server.chat.pass_through import PassedThrough
from lsp_server.core.engine import Engine
from lsp_server.failures import Refused, RouteFailed
from lsp_server.gateway.chat_completions import (
    ENDPOINT_HEADER,
    REASON_HEADER,
    USAGE_HEADER,
    OriginOf,
    admit_chat,
    charge,
    chat_request,
    routing_headers,
    start_chat_feed,
    usage_of,
)
from lsp_server.gateway.errors import (
    CORE_FAILURES,
    RESPONSES_STATUS,
    openai_error,
    responses_code,
    responses_error,
    responses_failure,
)
from lsp_server.gateway.metering import Admit, Meter
from lsp_server.gateway.openai_wire import GatewayError, parse_chat_body, parse_json_object
from lsp_server.gateway.plumbing import cancel_on_disconnect, read_body
from lsp_server.gateway.responses_request import ResponsesRequest, parse_responses_body
from lsp_server.gateway.responses_stream import ResponseStream
from lsp_server.gateway.sse import LastEvents, event_stream, named_sse_event, named_sse_events
from lsp_server.routing.sequential_route import Answered, EventSink

# Fields of a Responses request that hold what a person or a tool wrote, beyond the
# conversation itself: scanned too, as a pass-through sends them upstream as they are.
_CONVERSATION_FIELDS = frozenset({"input", "instructions"})


class Responses:
    """The `/v1/responses` route over the core's chat service."""

    def __init__(self, engine: Engine, origin_of: OriginOf, admit: Admit) -> None:
        self.chats = engine.chats
        self.pass_through = engine.pass_through
        self.origin_of = origin_of
        self.admit = admit

    async def handle(self, request: Request) -> Response:
        payload = parse_json_object(await read_body(request))
        translated = parse_responses_body(payload)
        body = parse_chat_body(translated.chat)
        chat = chat_request(body)
        origin = self.origin_of(request)
        meter = await admit_chat(self.admit, request, origin, body, chat)
        # What else the client sent (tool descriptions, metadata, hosted-tool settings) goes
        # upstream as it is on a pass-through: the chat service judges it with the conversation.
        others = _strings({k: v for k, v in payload.items() if k not in _CONVERSATION_FIELDS})
        extra = ("\n".join(others),)
        try:
            passed = self.pass_through.start(
                payload,
                chat,
                model=body.model,
                uri=origin.uri,
                sensitive=origin.sensitive,
                client=origin.client,
                extra=extra,
            )
        except Refused as refused:
            raise openai_error(refused) from None
        if passed is not None:
            return await self._pass_through(request, passed, translated, meter)
        failures: list[RouteFailed] = []

        async def run(
            on_event: EventSink | None = None, on_attempt: Callable[[str], None] | None = None
        ) -> Answered:
            try:
                return await self.chats.chat(
                    chat,
                    model=body.model,
                    uri=origin.uri,
                    sensitive=origin.sensitive,
                    client=origin.client,
                    extra=extra,
                    on_event=on_event,
                    on_attempt=on_attempt,
                )
            except RouteFailed as failed:
                failures.append(failed)  # the failure itself: its last status names the code
                raise

        if translated.stream:
            return await self._stream(request, translated.echo, chat, run, failures, meter)
        try:
            routed = await cancel_on_disconnect(request, run())
        except RouteFailed as failed:
            raise responses_error(failed) from None
        except CORE_FAILURES as refused:
            raise openai_error(refused) from None
        charge(meter, routed, chat)
        answer = ResponseStream(translated.echo)
        answer.model = routed.endpoint
        if routed.text:
            answer.text(routed.text)
        for index, call in enumerate(routed.tool_calls):
            answer.tool_call(index, call_id=call.id, name=call.name, arguments=call.arguments)
        usage, counted = usage_of(routed, chat)
        answer.complete(usage["prompt_tokens"], usage["completion_tokens"], routed.finish_reason)
        return JSONResponse(
            answer.response(), headers={**routing_headers(routed), USAGE_HEADER: counted}
        )

    async def _stream(
        self,
        request: Request,
        echo: dict[str, Any],
        chat: ChatRequest,
        run: Callable[[EventSink, Callable[[str], None]], Coroutine[Any, Any, Answered]],
        failures: list[RouteFailed],
        meter: Meter,
    ) -> Response:
        """Stream the chat's pieces as Responses events. A chat that failed before its first
        piece is a stream that says so (`response.failed`), as one that failed later is."""
        try:
            feed = await start_chat_feed(request, run)
        except GatewayError:
            if not failures:
                raise  # refused before anything was asked: the HTTP status says so
            return _failed_stream(echo, "none", *responses_failure(failures[-1]))
        answer = ResponseStream(echo)
        answer.model = feed.serving

        async def events() -> AsyncIterator[bytes]:
            try:
                out = answer.opening()
                async for pieces in feed.batches():
                    for piece in pieces:
                        if isinstance(piece, ToolCallDelta):
                            out += answer.tool_call(
                                piece.index,
                                call_id=piece.id,
                                name=piece.name,
                                arguments=piece.arguments,
                            )
                        elif isinstance(piece, str):  # a relay is never asked here
                            out += answer.text(piece)
                    if not feed.ended:  # else the ending goes in the same write
                        yield named_sse_events(out)
                        out = []
                try:
                    routed = feed.work.result()
                except RouteFailed as failed:
                    out += answer.fail(*responses_failure(failed))
                    yield LastEvents(named_sse_events(out))
                    return
                answer.model = routed.endpoint
                charge(meter, routed, chat)
                usage, _ = usage_of(routed, chat)
                ending = answer.complete(
                    usage["prompt_tokens"], usage["completion_tokens"], routed.finish_reason
                )
                yield LastEvents(named_sse_events(out + ending))
            finally:
                feed.stop()

        return feed.response(events(), {ENDPOINT_HEADER: feed.serving})

    # -- pass-through ------------------------------------------------------------------------

    async def _pass_through(
        self, request: Request, passed: PassedThrough, translated: ResponsesRequest, meter: Meter
    ) -> Response:
        """The upstream's own events (or its response object) as they come, metered as they
        pass; only a failure is the gateway's to word."""
        events = passed.events
        meter.asking(passed.endpoint)
        try:
            first = await cancel_on_disconnect(request, anext(events))
        except RouteFailed as failed:
            code = responses_code(failed.last)
            if not translated.stream:
                raise GatewayError(RESPONSES_STATUS[code], str(failed), code=code) from None
            return _failed_stream(translated.echo, passed.endpoint, code, str(failed))
        headers = {ENDPOINT_HEADER: passed.endpoint, REASON_HEADER: passed.reason}
        if first.get("type") == "response":
            await events.aclose()
            _charge(meter, passed.endpoint, first["response"])
            return JSONResponse(first["response"], headers=headers)

        async def stream() -> AsyncIterator[bytes]:
            sent = 0
            try:
                async for event in _after(first, events):
                    if event.get("type") == "response.output_text.delta":
                        meter.streamed(str(event.get("delta", "")))
                    yield named_sse_event(event)
                    sent += 1
                    if event.get("type") in ("response.completed", "response.incomplete"):
                        _charge(meter, passed.endpoint, event.get("response"))
            except RouteFailed as failed:
                # The upstream's own events went before: only the end is the gateway's.
                answer = ResponseStream(translated.echo)
                answer.model = passed.endpoint
                ending = answer.fail(responses_code(failed.last), str(failed))
                yield named_sse_event({**ending[-1], "sequence_number": sent})
            finally:
                await events.aclose()

        return event_stream(stream(), headers)


async def _after(
    first: dict[str, Any], rest: AsyncIterator[dict[str, Any]]
) -> AsyncIterator[dict[str, Any]]:
    """`first`, then what `rest` holds."""
    yield first
    async for event in rest:
        yield event


def _charge(meter: Meter, endpoint: str, response: Any) -> None:
    """Tell the meter what a passed-through answer used, as its upstream reported it."""
    usage = response.get("usage") if isinstance(response, dict) else None
    prompt, tokens = _count(usage, "input_tokens"), _count(usage, "output_tokens")
    meter.answered(endpoint, prompt, tokens, reported=bool(prompt and tokens))


def _count(usage: Any, key: str) -> int:
    """A token count from a Responses `usage` object; 0 when absent or not a count."""
    value = usage.get(key, 0) if isinstance(usage, dict) else 0
    return value if isinstance(value, int) and value >= 0 else 0


def _strings(value: Any) -> list[str]:
    """Every string in a JSON value, keys too (a JSON object's keys are strings)."""
    found: list[str] = []
    stack = [value]
    take, push, pop = found.append, stack.extend, stack.pop
    while stack:
        item = pop()
        if isinstance(item, str):
            take(item)
        elif isinstance(item, dict):
            found.extend(item)
            push(item.values())
        elif isinstance(item, list):
            push(item)
    return found


def _failed_stream(echo: dict[str, Any], model: str, code: str, message: str) -> Response:
    """A whole stream for a request that failed before anything was passed on."""
    answer = ResponseStream(echo)
    answer.model = model
    events = [*answer.opening(), *answer.fail(code, message)]

    async def failed() -> AsyncIterator[bytes]:
        for event in events:
            yield named_sse_event(event)

    return event_stream(failed(), {ENDPOINT_HEADER: model})
