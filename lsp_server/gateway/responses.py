"""`POST /v1/responses`: the Responses API (Codex CLI, the OpenAI Agents SDK) on the chat path.

A request is translated into a chat completion (`responses_wire`), judged, planned and asked
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

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from lsp_server.backends.base import BackendError, ChatRequest, ToolCallDelta
from lsp_server.backends.responses_upstream import ResponsesUpstream
from lsp_server.chat.service import ChatService
from lsp_server.config.model import EndpointConfig
from lsp_server.failures import FailureKind, RouteFailed
from lsp_server.gateway.chat_completions import (
    ENDPOINT_HEADER,
    REASON_HEADER,
    USAGE_HEADER,
    Origin,
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
from lsp_server.gateway.responses_wire import (
    ResponsesRequest,
    ResponseStream,
    parse_responses_body,
    sse_event,
)
from lsp_server.reasons import Reason
from lsp_server.routing.decision_log import DecisionKind
from lsp_server.routing.endpoint_pool import Endpoint
from lsp_server.routing.router import Router
from lsp_server.routing.sequential_route import Answered, EventSink

# Fields of a Responses request that hold what a person or a tool wrote, beyond the
# conversation itself: scanned too, as a pass-through sends them upstream as they are.
_CONVERSATION_FIELDS = frozenset({"input", "instructions"})


class Responses:
    """The `/v1/responses` route over the core's chat service."""

    def __init__(self, chats: ChatService, origin_of: OriginOf, admit: Admit) -> None:
        self.chats = chats
        self.admit = admit
        self.router = chats.router
        self.origin_of = origin_of
        self._upstreams: dict[str, tuple[EndpointConfig, ResponsesUpstream]] = {}
        self._closing: set[asyncio.Future[None]] = set()

    async def handle(self, request: Request) -> Response:
        payload = parse_json_object(await read_body(request))
        translated = parse_responses_body(payload)
        body = parse_chat_body(translated.chat)
        chat = chat_request(body)
        origin = self.origin_of(request)
        meter = await admit_chat(self.admit, request, body, chat)
        # What else the client sent (tool descriptions, metadata, hosted-tool settings) goes
        # upstream as it is on a pass-through: the chat service judges it with the conversation.
        others = _strings({k: v for k, v in payload.items() if k not in _CONVERSATION_FIELDS})
        extra = ("\n".join(others),)
        native = self._native_endpoint(body.model, chat, origin, extra)
        if native is not None:
            endpoint, reason = native
            return await self._pass_through(
                request, payload, translated, endpoint, reason, origin.uri, meter
            )
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
                for event in answer.opening():
                    yield sse_event(event)
                async for piece in feed.events():
                    if isinstance(piece, ToolCallDelta):
                        out = answer.tool_call(
                            piece.index,
                            call_id=piece.id,
                            name=piece.name,
                            arguments=piece.arguments,
                        )
                    else:
                        out = answer.text(piece)
                    for event in out:
                        yield sse_event(event)
                try:
                    routed = feed.work.result()
                except RouteFailed as failed:
                    for event in answer.fail(*responses_failure(failed)):
                        yield sse_event(event)
                    return
                answer.model = routed.endpoint
                charge(meter, routed, chat)
                usage, _ = usage_of(routed, chat)
                ending = answer.complete(
                    usage["prompt_tokens"], usage["completion_tokens"], routed.finish_reason
                )
                for event in ending:
                    yield sse_event(event)
            finally:
                feed.stop()

        return feed.response(events(), {ENDPOINT_HEADER: feed.serving})

    # -- pass-through ------------------------------------------------------------------------

    def _native_endpoint(
        self, model: str, chat: ChatRequest, origin: Origin, extra: tuple[str, ...]
    ) -> tuple[Endpoint, Reason] | None:
        """The endpoint to pass the request to as it is: the one the chat route would ask
        first, when it speaks the Responses API itself and the request may leave."""
        pool = self.router.pool.all()
        if not any(e.config is not None and e.config.responses_path for e in pool):
            return None
        stay_local = self.chats.stay_local(
            chat, uri=origin.uri, sensitive=origin.sensitive, client=origin.client, extra=extra
        )
        if stay_local is not None:
            return None
        try:
            plan = self.router.chats.plan(model, chat, local_only=None)
        except CORE_FAILURES as refused:
            raise openai_error(refused) from None
        first = plan.candidates[0]
        if first.config is None or not first.config.responses_path:
            return None
        return first, plan.reason

    async def _pass_through(
        self,
        request: Request,
        payload: dict[str, Any],
        translated: ResponsesRequest,
        endpoint: Endpoint,
        reason: Reason,
        uri: str,
        meter: Meter,
    ) -> Response:
        assert endpoint.config is not None
        upstream = self._upstream(endpoint.config)
        started = time.monotonic()
        events = upstream.events(payload)
        meter.asking(endpoint.name)
        tally = _PassThrough(self.router, endpoint, reason, uri, started)
        try:
            first = await cancel_on_disconnect(request, anext(events, None))
            if first is None:
                raise BackendError(endpoint.name, FailureKind.PROTOCOL, "an empty answer")
        except BackendError as error:
            tally.failed(error)
            code = responses_code(error.failure)
            if not translated.stream:
                raise GatewayError(RESPONSES_STATUS[code], str(error), code=code) from None
            return _failed_stream(translated.echo, endpoint.name, code, str(error))
        tally.first_event()
        headers = {ENDPOINT_HEADER: endpoint.name, REASON_HEADER: reason}
        if first.get("type") == "response":
            tally.answered(first["response"])
            _charge(meter, endpoint.name, first["response"])
            return JSONResponse(first["response"], headers=headers)

        async def stream() -> AsyncIterator[bytes]:
            event: dict[str, Any] | None = first
            try:
                while event is not None:
                    tally.events += 1
                    if event.get("type") == "response.output_text.delta":
                        meter.streamed(str(event.get("delta", "")))
                    yield sse_event(event)
                    if event.get("type") in ("response.completed", "response.incomplete"):
                        tally.answered(event.get("response"))
                        _charge(meter, endpoint.name, event.get("response"))
                    event = await anext(events, None)
            except BackendError as error:
                tally.failed(error)
                # The upstream's own events went before: only the end is the gateway's.
                answer = ResponseStream(translated.echo)
                answer.model = endpoint.name
                ending = answer.fail(responses_code(error.failure), str(error))
                yield sse_event({**ending[-1], "sequence_number": tally.events})
            finally:
                await events.aclose()

        return _event_stream(stream(), headers)

    def _upstream(self, config: EndpointConfig) -> ResponsesUpstream:
        """The endpoint's Responses client, made anew (and the old one closed) when its
        configuration changed; the clients live as long as the gateway's process."""
        known = self._upstreams.get(config.name)
        if known is not None and known[0] == config:
            return known[1]
        if known is not None:
            closing = asyncio.ensure_future(known[1].aclose())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
        upstream = ResponsesUpstream(config)
        self._upstreams[config.name] = (config, upstream)
        return upstream


class _PassThrough:
    """What a passed-through request did, told to the router's outcome recorder as a chat's
    attempt is."""

    def __init__(
        self, router: Router, endpoint: Endpoint, reason: Reason, uri: str, started: float
    ) -> None:
        self.outcomes = router.outcomes
        self.endpoint = endpoint
        self.reason = reason
        self.uri = uri
        self.started = started
        self.events = 0
        self._first_ms: float | None = None
        self._settled = False
        self.outcomes.request_started(kind=DecisionKind.CHAT)

    def first_event(self) -> None:
        self._first_ms = (time.monotonic() - self.started) * 1000

    def answered(self, response: Any) -> None:
        if self._settled:
            return
        self._settled = True
        usage = response.get("usage") if isinstance(response, dict) else None
        self.outcomes.success(
            endpoint=self.endpoint,
            first_token_ms=self._first_ms,
            total_ms=(time.monotonic() - self.started) * 1000,
            tokens=_count(usage, "output_tokens"),
            won=True,
        )
        self.outcomes.request_ended(kind=DecisionKind.CHAT, hedged=False)
        self.outcomes.decision(
            kind=DecisionKind.CHAT,
            served_by=self.endpoint,
            reason=self.reason,
            started=self.started,
            prompt_tokens=_count(usage, "input_tokens"),
            tokens=_count(usage, "output_tokens"),
            uri=self.uri,
        )

    def failed(self, error: BackendError) -> None:
        if self._settled:
            return
        self._settled = True
        self.outcomes.failure(endpoint=self.endpoint, error=error)
        self.outcomes.request_ended(kind=DecisionKind.CHAT, hedged=False)
        self.outcomes.decision(
            kind=DecisionKind.CHAT,
            served_by=None,
            reason=Reason.FAILED,
            started=self.started,
            uri=self.uri,
            detail=str(error),
        )


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
    """Every string in a JSON value, keys too."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            found.extend(str(key) for key in item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _failed_stream(echo: dict[str, Any], model: str, code: str, message: str) -> Response:
    """A whole stream for a request that failed before anything was passed on."""
    answer = ResponseStream(echo)
    answer.model = model
    events = [*answer.opening(), *answer.fail(code, message)]

    async def failed() -> AsyncIterator[bytes]:
        for event in events:
            yield sse_event(event)

    return _event_stream(failed(), {ENDPOINT_HEADER: model})


def _event_stream(events: AsyncIterator[bytes], headers: dict[str, str]) -> StreamingResponse:
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **headers},
    )
