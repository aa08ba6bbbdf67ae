"""`gateway-ls gateway`: an OpenAI-compatible HTTP front door on the same engine as the LSP.

A thin adapter: it turns OpenAI's wire shapes into calls of the core (`Engine`: the suggestion
and chat services, which make every routing, privacy and cleaning decision) and back.

`POST /v1/completions` is an inline (keystroke-level) request: routed to the fastest `inline`
endpoint under the keystroke deadline, with fill-in-the-middle from `prompt` + `suffix` or from
FIM markers inside `prompt` (Zed's edit predictions); a `model` that names a configured endpoint
pins the request to it. `POST /v1/chat/completions` (`chat_completions`) is agents' traffic,
routed by task class (`auto`, `fast`, `reasoning`, `local`) or endpoint name, tools and all;
`POST /v1/responses` (`responses`) is the same traffic in the Responses API's words.

Privacy as in the LSP: `X-Gateway-LS-Sensitive: 1` or a prompt the privacy rules flag (secrets,
or a sensitive `X-Gateway-LS-Path`) keeps the request on the local model. When that cannot serve
it (disabled or still loading) the answer is 503, never a silent remote call.
`X-Gateway-LS-Endpoint` names the endpoint that answered (`none` when nothing did in time).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from lsp_server.backends.base import CompletionRequest, Usage, estimate_tokens
from lsp_server.config.model import BudgetPeriod
from lsp_server.config.model_names import SERVER_MODEL, listed_models, pinned_endpoint
from lsp_server.core.engine import Engine
from lsp_server.failures import Refused
from lsp_server.gateway.chat_completions import (
    DEFAULT_URI,
    ENDPOINT_HEADER,
    REASON_HEADER,
    USAGE_HEADER,
    ChatCompletions,
    Origin,
)
from lsp_server.gateway.client_tokens import ClientTokens
from lsp_server.gateway.edit_completions import EditCompletions
from lsp_server.gateway.errors import openai_error
from lsp_server.gateway.event_feed import EventFeed
from lsp_server.gateway.fim_prompt import split_fim_prompt
from lsp_server.gateway.metering import Admit, Meter, Metering
from lsp_server.gateway.metrics import GatewayMetrics
from lsp_server.gateway.openai_wire import (
    CompletionBody,
    GatewayError,
    ResponseIds,
    completion_chunk,
    completion_response,
    parse_completion_body,
    parse_json_object,
    usage_body,
    usage_chunk,
)
from lsp_server.gateway.plumbing import (
    CLIENT_KEY,
    BearerAuth,
    ClientGone,
    cancel_on_disconnect,
    on_client_gone,
    on_gateway_error,
    on_http_exception,
    on_unexpected,
    read_body,
)
from lsp_server.gateway.responses import Responses
from lsp_server.gateway.sse import SSE_DONE, LastEvents, sse_event
from lsp_server.nextedit.zeta2_format import is_zeta2_prompt
from lsp_server.nextedit.zeta_format import is_zeta_prompt
from lsp_server.suggest.service import Suggestion

SENSITIVE_HEADER = "x-gateway-ls-sensitive"
PATH_HEADER = "x-gateway-ls-path"
_TRUE_VALUES = frozenset({"1", "true", "yes", "on"})
_PERIODS: dict[str, BudgetPeriod] = {"day": "day", "month": "month"}


def create_app(
    engine: Engine, *, clients: ClientTokens | None, metrics: GatewayMetrics | None = None
) -> Starlette:
    """`clients`: the accepted bearer tokens; None or none at all: no token is asked for.
    `metrics`: what `GET /metrics` serves (made here when not given)."""
    metrics = metrics or GatewayMetrics(
        engine.router.endpoint_health, engine.router.suggestion_counts
    )
    admit = Admit(engine, metrics.observe)
    gateway = _Gateway(engine, clients, admit)
    return Starlette(
        routes=[
            Route("/v1/models", gateway.models, methods=["GET"]),
            Route("/v1/completions", gateway.completions, methods=["POST"]),
            Route("/v1/edit/completions", gateway.edits.mercury, methods=["POST"]),
            Route(
                "/v1/chat/completions",
                ChatCompletions(engine, _origin, admit).handle,
                methods=["POST"],
            ),
            Route(
                "/v1/responses",
                Responses(engine, _origin, admit).handle,
                methods=["POST"],
            ),
            Route("/v1/gateway-ls/status", gateway.status, methods=["GET"]),
            Route("/v1/gateway-ls/usage", gateway.usage, methods=["GET"]),
            Route("/metrics", metrics.handle, methods=["GET"]),
            Route("/healthz", gateway.healthz, methods=["GET"]),
        ],
        middleware=[
            Middleware(Metering),  # outermost: its clock starts first, a refusal is timed too
            Middleware(
                BearerAuth,
                clients=clients,
                public_metrics=lambda: engine.config.gateway.metrics_public,
            ),
        ],
        exception_handlers={
            GatewayError: on_gateway_error,
            HTTPException: on_http_exception,
            ClientGone: on_client_gone,
            Exception: on_unexpected,
        },
    )


class _Gateway:
    def __init__(self, engine: Engine, clients: ClientTokens | None, admit: Admit) -> None:
        self.engine = engine
        self.router = engine.router
        self.clients = clients
        self.edits = EditCompletions(engine, _origin, self._edit_pinned, admit)
        self.admit = admit

    # -- small routes ---------------------------------------------------------------------

    async def models(self, request: Request) -> Response:
        names = listed_models(self.router.config)
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": "gateway-ls"}
            for name in names
        ]
        return JSONResponse({"object": "list", "data": data})

    async def status(self, request: Request) -> Response:
        status = {"kind": "gateway", "pid": os.getpid(), **self.router.status()}
        if self.clients:
            status.update(self.clients.status())
        status["limits"] = self.engine.limits.status()
        status["privacy"] = {"withheld_pieces": self.engine.privacy.withheld}
        return JSONResponse(status)

    async def usage(self, request: Request) -> Response:
        """Spend and tokens per client and endpoint in the current UTC day or month
        (`?period=day|month`), from the usage ledger."""
        period = _PERIODS.get(request.query_params.get("period", "day"))
        if period is None:
            raise GatewayError(400, "period is day or month", param="period")
        return JSONResponse({"period": period, **await self.engine.limits.usage(period)})

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    # -- completions: inline requests -----------------------------------------------------

    async def completions(self, request: Request) -> Response:
        body = parse_completion_body(parse_json_object(await read_body(request)))
        if body.suffix is None and is_zeta_prompt(body.prompt):
            return await self.edits.zeta(request, body)  # Zed's edit predictions
        if body.suffix is None and is_zeta2_prompt(body.prompt):
            return await self.edits.zeta2(request, body)  # ... in Zeta 2's and 2.1's forms
        try:
            pinned = pinned_endpoint(self.router.config, body.model, "inline")
        except Refused as refused:
            raise openai_error(refused) from None
        origin = _origin(request)
        completion = self._completion_request(body, origin.uri)
        meter = await self.admit(
            request,
            client=origin.client,
            operation="text_completion",
            task_class="inline",
            prompt_chars=len(completion.prefix) + len(completion.suffix),
            max_tokens=completion.max_tokens,
            model=pinned or "",
        )
        if body.stream:
            return await self._completion_stream(request, body, completion, origin, pinned, meter)
        suggestion = await cancel_on_disconnect(request, self._complete(completion, origin, pinned))
        answer = _completion_answer(suggestion, completion)
        answer.charge(meter)
        return JSONResponse(
            completion_response(
                answer.ids, answer.model, answer.text, answer.finish_reason, answer.usage
            ),
            headers=answer.headers,
        )

    async def _completion_stream(
        self,
        request: Request,
        body: CompletionBody,
        completion: CompletionRequest,
        origin: Origin,
        pinned: str | None,
        meter: Meter,
    ) -> Response:
        """Send the suggestion as it comes, cleaned as it settles (the core holds back the
        tail that cleaning may still cut); chunks add up to the non-streamed answer. As in
        chat, a failure after text was sent ends the stream with an error event."""
        feed: EventFeed[str, Suggestion] = await EventFeed.start(
            request,
            lambda on_text, on_attempt: self._complete(
                completion, origin, pinned, on_text=on_text, on_attempt=on_attempt
            ),
            serving=SERVER_MODEL,
        )
        if feed.first is None:
            answer = _completion_answer(feed.work.result(), completion)
            answer.charge(meter)

            async def settled() -> AsyncIterator[bytes]:
                if answer.text:
                    yield sse_event(completion_chunk(answer.ids, answer.model, answer.text, None))
                for event in _completion_ending(answer, body.include_usage):
                    yield event

            return feed.response(settled(), answer.headers)
        ids = ResponseIds.new("cmpl")
        model = feed.serving

        async def events() -> AsyncIterator[bytes]:
            try:
                async for pieces in feed.batches():
                    yield b"".join(
                        sse_event(completion_chunk(ids, model, piece, None)) for piece in pieces
                    )
                suggestion = feed.work.result()
                try:
                    answer = _completion_answer(suggestion, completion, ids)
                    answer.charge(meter)
                except GatewayError as error:
                    yield LastEvents(sse_event(error.body()) + SSE_DONE)
                    return
                ending = _completion_ending(answer, body.include_usage)
                if suggestion.rest:
                    rest = completion_chunk(ids, answer.model, suggestion.rest, None)
                    ending.insert(0, sse_event(rest))
                yield LastEvents(b"".join(ending))
            finally:
                feed.stop()

        return feed.response(events(), {ENDPOINT_HEADER: model})

    def _completion_request(self, body: CompletionBody, uri: str) -> CompletionRequest:
        """The core's request for a completion body: FIM markers inside a prompt without a
        `suffix` are the client's way of sending one (Zed's edit predictions)."""
        prefix, suffix, has_suffix = body.prompt, body.suffix or "", body.suffix is not None
        if body.suffix is None:
            parts = split_fim_prompt(body.prompt)
            if parts is not None:
                prefix, suffix, has_suffix = parts.prefix, parts.suffix, True
        return self.engine.suggestions.client_request(
            prefix=prefix,
            suffix=suffix,
            has_suffix=has_suffix,
            max_tokens=body.max_tokens,
            stop=body.stop,
            temperature=body.temperature,
            path=None if uri == DEFAULT_URI else uri,
        )

    async def _complete(
        self,
        completion: CompletionRequest,
        origin: Origin,
        pinned: str | None,
        *,
        on_text: Callable[[str], None] | None = None,
        on_attempt: Callable[[str], None] | None = None,
    ) -> Suggestion:
        return await self.engine.suggestions.complete(
            completion,
            uri=origin.uri,
            sensitive=origin.sensitive,
            pinned=pinned,
            on_text=on_text,
            on_attempt=on_attempt,
        )

    # -- routing inputs -------------------------------------------------------------------

    def _edit_pinned(self, model: str) -> str | None:
        """The `edit` endpoint a next-edit request's `model` names; any other name (a client's
        own, such as "mercury-coder" or "zeta") routes automatically."""
        endpoint = self.router.pool.get(model) if model else None
        if endpoint is None or endpoint.is_local or "edit" not in endpoint.roles:
            return None
        return endpoint.name


def _origin(request: Request) -> Origin:
    """The path header names the file as the file system would see it; the sensitive header
    is the client's own verdict, which can only make the request stricter."""
    uri = request.headers.get(PATH_HEADER) or DEFAULT_URI
    sensitive = request.headers.get(SENSITIVE_HEADER, "").strip().lower() in _TRUE_VALUES
    return Origin(uri, sensitive, request.scope.get("state", {}).get(CLIENT_KEY, ""))


def _completion_answer(
    suggestion: Suggestion, completion: CompletionRequest, ids: ResponseIds | None = None
) -> _CompletionAnswer:
    """The answer to a completion request, or the error that says why there is none."""
    if suggestion.endpoint is None and not suggestion.timed_out:
        if suggestion.unavailable is not None:
            raise openai_error(suggestion.unavailable)
        failure = suggestion.detail or "no answer"
        raise GatewayError(502, f"no endpoint answered: {failure}", code="upstream_failed")
    prompt_tokens = estimate_tokens(len(completion.prefix) + len(completion.suffix))
    usage, counted = _usage_of(suggestion.usage, suggestion.tokens, prompt_tokens)
    return _CompletionAnswer(
        ids=ids or ResponseIds.new("cmpl"),
        model=suggestion.endpoint or SERVER_MODEL,
        text=suggestion.text,
        finish_reason="length" if suggestion.cut_short else "stop",
        usage=usage,
        headers={
            ENDPOINT_HEADER: suggestion.endpoint or "none",
            REASON_HEADER: suggestion.reason.value,
            USAGE_HEADER: counted,
        },
        latency_ms=suggestion.latency_ms,
    )


@dataclass(frozen=True, slots=True)
class _CompletionAnswer:
    ids: ResponseIds
    model: str
    text: str
    finish_reason: str
    usage: dict[str, int]
    headers: dict[str, str]
    latency_ms: float  # the core's routed call

    def charge(self, meter: Meter) -> None:
        meter.answered(
            self.model,
            self.usage["prompt_tokens"],
            self.usage["completion_tokens"],
            reported=self.headers[USAGE_HEADER] == "upstream",
            text_chars=len(self.text),
            upstream_ms=self.latency_ms,
        )


def _completion_ending(answer: _CompletionAnswer, include_usage: bool) -> list[bytes]:
    """The last events of a completion stream: finish reason, usage if asked, `[DONE]`."""
    events = [sse_event(completion_chunk(answer.ids, answer.model, "", answer.finish_reason))]
    if include_usage:
        events.append(
            sse_event(usage_chunk(answer.ids, answer.model, "text_completion", answer.usage))
        )
    return [*events, SSE_DONE]


def _usage_of(
    usage: Usage | None, tokens: int, estimated_prompt_tokens: int
) -> tuple[dict[str, int], str]:
    """The usage body, and whether its counts are the upstream's or estimates."""
    prompt = usage.prompt_tokens if usage and usage.prompt_tokens else estimated_prompt_tokens
    counted = "upstream" if usage is not None and usage.reported else "estimated"
    return usage_body(prompt, tokens), counted
