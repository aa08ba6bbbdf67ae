"""`gateway-ls gateway`: an OpenAI-compatible HTTP front door on the same router as the LSP.

`POST /v1/completions` is an inline (keystroke-level) request: routed to the fastest `inline`
endpoint under the keystroke deadline, with fill-in-the-middle from `prompt` + `suffix` or from
FIM markers inside `prompt` (Zed's edit predictions). `POST /v1/chat/completions` is a refactor-
class request: the `refactor` endpoints in turn, then the local model. A `model` that names a
configured endpoint pins the request to it; any other name routes automatically.

Privacy as in the LSP: `X-Gateway-LS-Sensitive: 1` or a prompt the privacy rules flag (secrets,
or a sensitive `X-Gateway-LS-Path`) keeps the request on the local model. When that cannot serve
it (disabled or still loading) the answer is 503, never a silent remote call.
`X-Gateway-LS-Endpoint` names the endpoint that answered (`none` when nothing did in time).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Generic, TypeVar

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from lsp_server.backends.base import ChatRequest, CompletionRequest
from lsp_server.config.model import Role
from lsp_server.gateway.client_tokens import ClientTokens
from lsp_server.gateway.fim_prompt import split_fim_prompt
from lsp_server.gateway.openai_wire import (
    SSE_DONE,
    ChatBody,
    CompletionBody,
    GatewayError,
    ResponseIds,
    chat_chunk,
    chat_response,
    completion_chunk,
    completion_response,
    parse_chat_body,
    parse_completion_body,
    parse_json_object,
    sse_event,
    usage_body,
    usage_chunk,
)
from lsp_server.gateway.plumbing import (
    BearerAuth,
    ClientGone,
    cancel_on_disconnect,
    on_client_gone,
    on_gateway_error,
    on_http_exception,
    on_unexpected,
    read_body,
)
from lsp_server.routing.router import Routed, Router, RoutingFailed
from lsp_server.suggest.languages import LANGUAGE_BY_SUFFIX, infer_language
from lsp_server.suggest.postprocess import clean_suggestion
from lsp_server.suggest.prompt import is_mid_line, stop_sequences
from lsp_server.suggest.service import SuggestionService
from lsp_server.suggest.streaming import StreamingCleaner, cut_at_stops

AUTO_MODEL = "gateway-ls"
AUTOMATIC_MODELS = (AUTO_MODEL, "auto")  # model names that mean "route automatically"
USAGE_HEADER = "X-Gateway-LS-Usage"  # "upstream": the counts are the model's; "estimated"
SENSITIVE_HEADER = "x-gateway-ls-sensitive"
PATH_HEADER = "x-gateway-ls-path"
ENDPOINT_HEADER = "X-Gateway-LS-Endpoint"
REASON_HEADER = "X-Gateway-LS-Reason"
DEFAULT_URI = "gateway:request"
DEFAULT_INLINE_MAX_TOKENS = 64
MAX_INLINE_TOKENS = 512
DEFAULT_CHAT_MAX_TOKENS = 2048
MAX_CHAT_TOKENS = 16384
LOADING_RETRY_AFTER_S = "2"
_TRUE_VALUES = frozenset({"1", "true", "yes", "on"})


def create_app(
    router: Router, suggestions: SuggestionService, *, clients: ClientTokens | None
) -> Starlette:
    """`clients`: the accepted bearer tokens; None or none at all: no token is asked for."""
    gateway = _Gateway(router, suggestions, clients)
    return Starlette(
        routes=[
            Route("/v1/models", gateway.models, methods=["GET"]),
            Route("/v1/completions", gateway.completions, methods=["POST"]),
            Route("/v1/chat/completions", gateway.chat_completions, methods=["POST"]),
            Route("/v1/gateway-ls/status", gateway.status, methods=["GET"]),
            Route("/healthz", gateway.healthz, methods=["GET"]),
        ],
        middleware=[Middleware(BearerAuth, clients=clients)],
        exception_handlers={
            GatewayError: on_gateway_error,
            HTTPException: on_http_exception,
            ClientGone: on_client_gone,
            Exception: on_unexpected,
        },
    )


@dataclass(frozen=True, slots=True)
class _Privacy:
    uri: str
    local_only: str | None


class _Gateway:
    def __init__(
        self, router: Router, suggestions: SuggestionService, clients: ClientTokens | None
    ) -> None:
        self.router = router
        self.suggestions = suggestions
        self.clients = clients

    # -- small routes ---------------------------------------------------------------------

    async def models(self, request: Request) -> Response:
        names = [*AUTOMATIC_MODELS, *(e.name for e in self.router.pool.all() if not e.is_local)]
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": "gateway-ls"}
            for name in names
        ]
        return JSONResponse({"object": "list", "data": data})

    async def status(self, request: Request) -> Response:
        status = {"kind": "gateway", "pid": os.getpid(), **self.router.status()}
        if self.clients:
            status.update(self.clients.status())
        return JSONResponse(status)

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    # -- completions: inline requests -----------------------------------------------------

    async def completions(self, request: Request) -> Response:
        body = parse_completion_body(parse_json_object(await read_body(request)))
        pinned = self._pinned(body.model, "inline")
        completion = _completion_request(body)
        privacy = self._privacy(request, [completion.prefix + completion.suffix], body.stop)
        completion = _with_path(completion, privacy.uri)
        if body.stream:
            return await self._completion_stream(request, body, completion, privacy, pinned)
        routed, failure = await cancel_on_disconnect(
            request, self._inline(completion, privacy, pinned)
        )
        answer = self._completion_answer(routed, failure, completion, privacy)
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
        privacy: _Privacy,
        pinned: str | None,
    ) -> Response:
        """Send the suggestion as it comes, cleaned: text post-processing may still cut waits
        (`StreamingCleaner`), the rest goes out at once; chunks add up to the non-streamed
        answer. As in chat, a failure after text was sent ends the stream with an error event."""
        feed = await _TextFeed.start(
            request,
            lambda on_text, on_attempt: self._inline(
                completion, privacy, pinned, on_text=on_text, on_attempt=on_attempt
            ),
        )
        if feed.first is None:
            routed, failure = feed.work.result()
            answer = self._completion_answer(routed, failure, completion, privacy)

            async def settled() -> AsyncIterator[bytes]:
                if answer.text:
                    yield sse_event(completion_chunk(answer.ids, answer.model, answer.text, None))
                for event in _completion_ending(answer, body.include_usage):
                    yield event

            return _event_stream(settled(), answer.headers)
        ids = ResponseIds.new("cmpl")
        model = feed.serving

        async def events() -> AsyncIterator[bytes]:
            cleaner = StreamingCleaner(completion)
            try:
                async for piece in feed.pieces():
                    sendable = cleaner.feed(piece)
                    if sendable:
                        yield sse_event(completion_chunk(ids, model, sendable, None))
                routed, failure = feed.work.result()
                try:
                    answer = self._completion_answer(routed, failure, completion, privacy, ids)
                except GatewayError as error:
                    yield sse_event(error.body())
                    yield SSE_DONE
                    return
                rest = cleaner.finish(routed.text)
                if rest:
                    yield sse_event(completion_chunk(ids, answer.model, rest, None))
                for event in _completion_ending(answer, body.include_usage):
                    yield event
            finally:
                feed.work.cancel()

        return feed.response(events(), {ENDPOINT_HEADER: model})

    def _completion_answer(
        self,
        routed: Routed,
        failure: str | None,
        completion: CompletionRequest,
        privacy: _Privacy,
        ids: ResponseIds | None = None,
    ) -> _CompletionAnswer:
        """The cleaned answer to a completion request, or the error that says why none."""
        if routed.endpoint is None and not routed.timed_out:
            raise self._unavailable("inline", privacy.local_only) or GatewayError(
                502, f"no endpoint answered: {failure or 'no answer'}", code="upstream_failed"
            )
        raw = cut_at_stops(routed.text, completion.stop)
        text = clean_suggestion(raw, completion)
        usage, counted = _usage(routed, (len(completion.prefix) + len(completion.suffix) + 3) // 4)
        return _CompletionAnswer(
            ids=ids or ResponseIds.new("cmpl"),
            model=routed.endpoint or AUTO_MODEL,
            text=text,
            finish_reason=self._finish_reason(routed, raw, text, completion),
            usage=usage,
            headers={**_routing_headers(routed), USAGE_HEADER: counted},
        )

    def _finish_reason(
        self, routed: Routed, raw: str, text: str, completion: CompletionRequest
    ) -> str:
        """`length` when the answer ran out of tokens (the client's, or the endpoint's cap that
        cut them) or time, and post-processing did not end it earlier; else `stop`."""
        if routed.timed_out:
            return "length"
        if raw.rstrip() and not raw.rstrip().endswith(text.rstrip() or "\0"):
            return "stop"  # post-processing ended it at a boundary of its own
        upstream = routed.usage.finish_reason if routed.usage else None
        if upstream is not None:
            return "length" if upstream == "length" else "stop"
        endpoint = self.router.pool.get(routed.endpoint) if routed.endpoint else None
        cap = completion.max_tokens
        if endpoint is not None and endpoint.config is not None:
            cap = min(cap, endpoint.config.max_tokens)
        return "length" if routed.tokens >= cap else "stop"

    async def _inline(
        self,
        completion: CompletionRequest,
        privacy: _Privacy,
        pinned: str | None,
        *,
        on_text: Callable[[str], None] | None = None,
        on_attempt: Callable[[str], None] | None = None,
    ) -> tuple[Routed, str | None]:
        routed = await self.router.inline(
            completion,
            uri=privacy.uri,
            local_only=privacy.local_only,
            pinned=pinned,
            on_text=on_text,
            on_attempt=on_attempt,
        )
        # Read in the same task, with no await in between: the decision just recorded is ours.
        recent = self.router.decisions.recent(1)
        return routed, recent[0].detail if recent else None

    # -- chat completions: refactor-class requests ----------------------------------------

    async def chat_completions(self, request: Request) -> Response:
        body = parse_chat_body(parse_json_object(await read_body(request)))
        pinned = self._pinned(body.model, "refactor")
        privacy = self._privacy(request, [m.content for m in body.messages], body.stop)
        unavailable = self._unavailable("refactor", privacy.local_only)
        if unavailable is not None:
            raise unavailable
        chat = ChatRequest(
            messages=body.messages,
            max_tokens=min(body.max_tokens or DEFAULT_CHAT_MAX_TOKENS, MAX_CHAT_TOKENS),
            temperature=body.temperature or 0.0,
            stop=body.stop or (),
        )
        prompt_tokens = (sum(len(m.content) for m in body.messages) + 3) // 4
        if body.stream:
            return await self._chat_stream(request, body, chat, privacy, pinned, prompt_tokens)
        try:
            routed = await cancel_on_disconnect(
                request,
                self.router.refactor(
                    chat, uri=privacy.uri, local_only=privacy.local_only, pinned=pinned
                ),
            )
        except RoutingFailed as failed:
            raise _upstream_failed(failed) from None
        usage, counted = _usage(routed, prompt_tokens)
        finish = "length" if routed.usage and routed.usage.finish_reason == "length" else "stop"
        payload = chat_response(
            ResponseIds.new("chatcmpl"), routed.endpoint or AUTO_MODEL, routed.text, finish, usage
        )
        return JSONResponse(payload, headers={**_routing_headers(routed), USAGE_HEADER: counted})

    async def _chat_stream(
        self,
        request: Request,
        body: ChatBody,
        chat: ChatRequest,
        privacy: _Privacy,
        pinned: str | None,
        prompt_tokens: int,
    ) -> Response:
        """Stream the answer as it comes; the HTTP status waits for the first text or failure.

        Text already sent cannot be taken back, so a failure after it ends the stream with an
        error event instead of restarting on the next endpoint.
        """
        feed = await _TextFeed.start(
            request,
            lambda on_text, on_attempt: self.router.refactor(
                chat,
                uri=privacy.uri,
                local_only=privacy.local_only,
                pinned=pinned,
                on_text=on_text,
                on_attempt=on_attempt,
                restart_after_text=False,
            ),
        )
        if feed.first is None:
            _raise_if_failed(feed.work)
        ids = ResponseIds.new("chatcmpl")

        async def events() -> AsyncIterator[bytes]:
            try:
                model = feed.serving
                yield sse_event(chat_chunk(ids, model, {"role": "assistant", "content": ""}))
                async for piece in feed.pieces():
                    yield sse_event(chat_chunk(ids, model, {"content": piece}))
                try:
                    routed = feed.work.result()
                except RoutingFailed as failed:
                    yield sse_event(_upstream_failed(failed).body())
                    yield SSE_DONE
                    return
                model = routed.endpoint or AUTO_MODEL
                length = routed.usage is not None and routed.usage.finish_reason == "length"
                yield sse_event(chat_chunk(ids, model, {}, "length" if length else "stop"))
                if body.include_usage:
                    usage, _ = _usage(routed, prompt_tokens)
                    yield sse_event(usage_chunk(ids, model, "chat.completion.chunk", usage))
                yield SSE_DONE
            finally:
                feed.work.cancel()

        return feed.response(events(), {ENDPOINT_HEADER: feed.serving})

    # -- routing inputs -------------------------------------------------------------------

    def _pinned(self, model: str, role: Role) -> str | None:
        """The endpoint a `model` names; None (automatic routing) for `auto` and `gateway-ls`.

        Any other name is a mistake worth telling about: a 404 listing the valid names, as
        OpenAI answers an unknown model.
        """
        if not model or model in AUTOMATIC_MODELS:
            return None
        endpoint = self.router.pool.get(model)
        if endpoint is None or endpoint.is_local:
            names = ", ".join([*AUTOMATIC_MODELS, *(e.name for e in self.router.pool.all())])
            raise GatewayError(
                404,
                f"the model {model!r} does not exist here; use one of: {names}",
                param="model",
                code="model_not_found",
            )
        roles = endpoint.roles
        if role not in roles and not (role == "refactor" and self._chat_falls_back_to_inline()):
            served = "completions" if role == "inline" else "chat completions"
            raise GatewayError(
                400,
                f"endpoint {model!r} does not serve {served} (its roles: {', '.join(roles)}); "
                f"use model {AUTO_MODEL!r} to route automatically",
                param="model",
                code="model_not_supported",
            )
        return endpoint.name

    def _chat_falls_back_to_inline(self) -> bool:
        """With no `refactor` endpoint, chat is served by the inline endpoints' chat."""
        return not self.router.config.endpoints_with_role("refactor")

    def _privacy(
        self, request: Request, parts: list[str], stop: tuple[str, ...] | None
    ) -> _Privacy:
        """All that goes upstream is judged at once: every message (or prompt and suffix) and
        the stop sequences; the path header as the file system would see it. The messages are
        read apart and run together, so a secret split across two of them is still one."""
        uri = request.headers.get(PATH_HEADER) or DEFAULT_URI
        if request.headers.get(SENSITIVE_HEADER, "").strip().lower() in _TRUE_VALUES:
            return _Privacy(uri, "sensitive")
        sent = "\n".join((*parts, "".join(parts), *(stop or ())))
        return _Privacy(uri, self.suggestions.privacy.text_reason(uri, sent))

    def _unavailable(self, role: Role, local_only: str | None) -> GatewayError | None:
        """Why nothing could serve a request of `role` without trying, or None."""
        local = self.router.pool.local
        state = getattr(local.backend, "state", "ready") if local is not None else "disabled"
        must_stay_local = local_only is not None or (
            role == "inline" and self.router.offline.active
        )
        if must_stay_local:
            why = (
                "this request must stay on this machine" if local_only else "the gateway is offline"
            )
        elif self.router.config.endpoints_with_role(role) or (
            role == "refactor" and self.router.config.endpoints_with_role("inline")
        ):
            return None
        else:
            why = f"no endpoint has the role {role!r}"
        if state == "disabled":
            return GatewayError(
                503,
                f"{why} and the local model is disabled ([local] enabled = false)",
                code="no_endpoint_available",
            )
        if state == "failed":
            error = getattr(local.backend, "load_error", None) if local else None
            return GatewayError(
                503,
                f"{why} and the local model failed to load: {error or 'unknown error'}",
                code="no_endpoint_available",
            )
        if role == "inline" and state != "ready":
            return GatewayError(
                503,
                f"{why} and the local model is still loading; retry shortly",
                code="local_model_loading",
                headers={"Retry-After": LOADING_RETRY_AFTER_S},
            )
        return None


@dataclass(frozen=True, slots=True)
class _CompletionAnswer:
    ids: ResponseIds
    model: str
    text: str
    finish_reason: str
    usage: dict[str, int]
    headers: dict[str, str]


def _completion_ending(answer: _CompletionAnswer, include_usage: bool) -> list[bytes]:
    """The last events of a completion stream: finish reason, usage if asked, `[DONE]`."""
    events = [sse_event(completion_chunk(answer.ids, answer.model, "", answer.finish_reason))]
    if include_usage:
        events.append(
            sse_event(usage_chunk(answer.ids, answer.model, "text_completion", answer.usage))
        )
    return [*events, SSE_DONE]


_TextCallback = Callable[[str], None]
T = TypeVar("T")


class _TextFeed(Generic[T]):
    """A routed call whose text streams out as it comes, for both generation routes.

    The HTTP status waits for the first text or the end of the call; `serving` is then the
    endpoint whose text streams. Text already sent cannot be taken back, so a failure after
    it ends the stream with an error event instead of restarting on the next endpoint.
    """

    def __init__(self, work: asyncio.Task[T], queue: asyncio.Queue[str | None]) -> None:
        self.work = work
        self.first: str | None = None
        self.serving = AUTO_MODEL
        self._queue = queue

    @classmethod
    async def start(
        cls,
        request: Request,
        call: Callable[[_TextCallback, _TextCallback], Coroutine[Any, Any, T]],
    ) -> _TextFeed[T]:
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        serving = [AUTO_MODEL]

        def asking(endpoint: str) -> None:
            serving[0] = endpoint

        work = asyncio.create_task(call(queue.put_nowait, asking))

        def finished(task: asyncio.Task[T]) -> None:
            queue.put_nowait(None)
            if not task.cancelled():
                task.exception()  # read here too, in case the client left before the stream

        work.add_done_callback(finished)
        feed = cls(work, queue)
        try:
            feed.first = await cancel_on_disconnect(request, queue.get())
        except BaseException:
            work.cancel()
            raise
        feed.serving = serving[0]
        return feed

    async def pieces(self) -> AsyncIterator[str]:
        """The first piece, then each one as it comes, until the call ends."""
        piece = self.first
        while piece is not None:
            yield piece
            piece = await self._queue.get()

    def response(self, events: AsyncIterator[bytes], headers: dict[str, str]) -> Response:
        async def stop_upstream() -> None:
            self.work.cancel()  # the client left, possibly before the stream started

        return _event_stream(events, headers, background=BackgroundTask(stop_upstream))


def _completion_request(body: CompletionBody) -> CompletionRequest:
    prefix, suffix, has_suffix = body.prompt, body.suffix or "", body.suffix is not None
    if body.suffix is None:
        parts = split_fim_prompt(body.prompt)
        if parts is not None:
            prefix, suffix, has_suffix = parts.prefix, parts.suffix, True
    single_line = is_mid_line(suffix)
    crlf = "\r\n" in prefix or "\r\n" in suffix
    return CompletionRequest(
        prefix=prefix,
        suffix=suffix,
        language=infer_language(prefix, suffix),
        max_tokens=min(body.max_tokens or DEFAULT_INLINE_MAX_TOKENS, MAX_INLINE_TOKENS),
        stop=body.stop or stop_sequences(single_line=single_line, crlf=crlf),
        single_line=single_line,
        temperature=body.temperature or 0.0,
        has_suffix=has_suffix,
        client_max_tokens=body.max_tokens is not None,
    )


def _usage(routed: Routed, estimated_prompt_tokens: int) -> tuple[dict[str, int], str]:
    """The usage body, and whether its counts are the upstream's or estimates."""
    usage = routed.usage
    prompt = usage.prompt_tokens if usage and usage.prompt_tokens else estimated_prompt_tokens
    counted = "upstream" if usage is not None and usage.reported else "estimated"
    return usage_body(prompt, routed.tokens), counted


def _with_path(request: CompletionRequest, uri: str) -> CompletionRequest:
    """The file named by `X-Gateway-LS-Path` tells post-processing the language, over the
    guess from the text."""
    if uri == DEFAULT_URI:
        return request
    language = LANGUAGE_BY_SUFFIX.get(PurePosixPath(uri).suffix, "") or request.language
    return dataclasses.replace(request, path=uri, language=language)


def _routing_headers(routed: Routed) -> dict[str, str]:
    return {ENDPOINT_HEADER: routed.endpoint or "none", REASON_HEADER: routed.reason}


def _event_stream(
    events: AsyncIterator[bytes], headers: dict[str, str], background: BackgroundTask | None = None
) -> StreamingResponse:
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **headers},
        background=background,
    )


def _upstream_failed(failed: RoutingFailed) -> GatewayError:
    return GatewayError(502, f"no endpoint answered: {failed}", code="upstream_failed")


def _raise_if_failed(work: asyncio.Task[Routed]) -> None:
    try:
        work.result()
    except RoutingFailed as failed:
        raise _upstream_failed(failed) from None
