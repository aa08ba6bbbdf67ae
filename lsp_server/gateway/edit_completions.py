"""Next edits over HTTP, in the two shapes clients send them.

`POST /v1/edit/completions` is Inception's Mercury next-edit API: chat messages whose user
message is Mercury's prompt (Continue's and Kilo's Mercury providers, scripts). The gateway
reads the prompt back into the core's request, so every `edit` endpoint may serve it (a
Mercury endpoint gets the client's messages as they came), and answers as Mercury does: the
rewritten region fenced in `choices[0].message.content`, streamed as chat chunks when asked;
with no edit, the region unchanged (Mercury's own "no change" answer).

A Zeta prompt on `POST /v1/completions` (Zed's `open_ai_compatible_api` provider with
`prompt_format: "zeta"`) is read the same way and answered in the completions shape, the
region between Zeta's markers in `choices[0].text`, which Zed reads back. So are Zeta 2's and
Zeta 2.1's (`zeta2`, `zeta2.1`: Seed-Coder prompts), recognised by their markers whatever the
`model` says, and answered as Zed's `parse_zeta2_model_output` reads them.

Both are metered as every generation route is (`metering.Admit`): admitted for the client's
prompt and the most tokens the rewritten region may take, charged with what the answering
endpoint used.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import replace

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lsp_server.backends.base import ChatMessage, estimate_tokens
from lsp_server.core.engine import Engine
from lsp_server.gateway.chat_completions import DEFAULT_URI, ENDPOINT_HEADER, REASON_HEADER, Origin
from lsp_server.gateway.errors import openai_error
from lsp_server.gateway.metering import Admit, Meter
from lsp_server.gateway.openai_wire import (
    CompletionBody,
    GatewayError,
    ResponseIds,
    chat_chunk,
    chat_response,
    completion_chunk,
    completion_response,
    parse_chat_body,
    parse_json_object,
    usage_body,
)
from lsp_server.gateway.plumbing import cancel_on_disconnect, read_body
from lsp_server.gateway.sse import SSE_DONE, event_stream, sse_event
from lsp_server.nextedit.mercury_format import MalformedPrompt, parse_mercury_prompt
from lsp_server.nextedit.request import EditRequest
from lsp_server.nextedit.service import NextEdit
from lsp_server.nextedit.zeta2_format import parse_zeta2_prompt, zeta2_answer
from lsp_server.nextedit.zeta_format import parse_zeta_prompt, zeta_answer

EDIT_MODEL = "gateway-ls"
EDIT_TASK_CLASS = "edit"  # the metrics' and ledger's name for next-edit requests


class EditCompletions:
    def __init__(
        self,
        engine: Engine,
        origin: Callable[[Request], Origin],
        pinned: Callable[[str], str | None],
        admit: Admit,
    ) -> None:
        """`pinned` names the endpoint a `model` names (None: route automatically)."""
        self._service = engine.next_edits
        self._origin = origin
        self._pinned = pinned
        self._admit = admit

    async def mercury(self, request: Request) -> Response:
        body = parse_chat_body(parse_json_object(await read_body(request)))
        users = [m for m in body.messages if m.role == "user"]
        if not users:
            raise GatewayError(400, "`messages` holds no user message", param="messages")
        try:
            parsed = parse_mercury_prompt(users[-1].content)
        except MalformedPrompt as error:
            raise GatewayError(400, f"not a next-edit prompt: {error}", param="messages") from None
        origin = self._origin(request)
        edit_request = _located(parsed, origin, mercury_messages=body.messages)
        sent = sum(len(m.content) for m in body.messages)
        meter = await self._metered(request, origin, "chat", sent, edit_request)
        edit = await cancel_on_disconnect(request, self._answer(edit_request, origin, body.model))
        content = f"```\n{_region_after(edit, edit_request)}\n```"
        ids = ResponseIds.new("chatcmpl")
        model = body.model or EDIT_MODEL
        usage = _usage(edit_request, content)
        _charge(meter, edit, sent)
        headers = _headers(edit)
        if not body.stream:
            return JSONResponse(chat_response(ids, model, content, "stop", usage), headers=headers)

        async def events() -> AsyncIterator[bytes]:
            yield sse_event(chat_chunk(ids, model, {"role": "assistant", "content": content}))
            yield sse_event({**chat_chunk(ids, model, {}, "stop"), "usage": usage})
            yield SSE_DONE

        return event_stream(events(), headers)

    async def zeta(self, request: Request, body: CompletionBody) -> Response:
        """A Zeta prompt sent to the completions API, answered as Zed reads it."""
        try:
            parsed = parse_zeta_prompt(body.prompt)
        except ValueError as error:
            raise GatewayError(400, str(error), param="prompt") from None
        return await self._completion(request, body, parsed, zeta_answer)

    async def zeta2(self, request: Request, body: CompletionBody) -> Response:
        """A Zeta 2 or 2.1 prompt sent to the completions API, answered as Zed reads it."""
        try:
            parsed = parse_zeta2_prompt(body.prompt)
        except ValueError as error:
            raise GatewayError(400, str(error), param="prompt") from None
        return await self._completion(
            request, body, parsed.request, lambda region: zeta2_answer(parsed, region)
        )

    async def _completion(
        self,
        request: Request,
        body: CompletionBody,
        parsed: EditRequest,
        answer: Callable[[str], str],
    ) -> Response:
        """A next-edit prompt on the completions API: the region the edit leaves, written by
        `answer` into `choices[0].text`."""
        origin = self._origin(request)
        edit_request = _located(parsed, origin)
        meter = await self._metered(
            request, origin, "text_completion", len(body.prompt), edit_request
        )
        edit = await cancel_on_disconnect(request, self._answer(edit_request, origin, body.model))
        text = answer(_region_after(edit, edit_request))
        ids = ResponseIds.new("cmpl")
        model = body.model or EDIT_MODEL
        usage = _usage(edit_request, text)
        _charge(meter, edit, len(body.prompt))
        headers = _headers(edit)
        if not body.stream:
            return JSONResponse(
                completion_response(ids, model, text, "stop", usage), headers=headers
            )

        async def events() -> AsyncIterator[bytes]:
            yield sse_event(completion_chunk(ids, model, text, None))
            yield sse_event({**completion_chunk(ids, model, "", "stop"), "usage": usage})
            yield SSE_DONE

        return event_stream(events(), headers)

    async def _metered(
        self,
        request: Request,
        origin: Origin,
        operation: str,
        sent_chars: int,
        edit_request: EditRequest,
    ) -> Meter:
        """Admit the request for what the client sent and the most the answer may take."""
        return await self._admit(
            request,
            client=origin.client,
            operation=operation,
            task_class=EDIT_TASK_CLASS,
            prompt_chars=sent_chars,
            max_tokens=edit_request.answer_cap,
        )

    async def _answer(self, request: EditRequest, origin: Origin, model: str) -> NextEdit:
        edit = await self._service.answer(
            request, sensitive=origin.sensitive, pinned=self._pinned(model)
        )
        if edit.endpoint is None and not edit.timed_out:
            if edit.unavailable is not None:
                raise openai_error(edit.unavailable)
            detail = "; ".join(str(f) for f in edit.failures) or "no answer"
            raise GatewayError(502, f"no endpoint answered: {detail}", code="upstream_failed")
        return edit


def _located(
    request: EditRequest, origin: Origin, *, mercury_messages: tuple[ChatMessage, ...] = ()
) -> EditRequest:
    """The request named by the client's `X-Gateway-LS-Path` when it sent one (privacy
    judges that path), else by the path its prompt names."""
    uri = origin.uri if origin.uri != DEFAULT_URI else request.path
    return replace(request, uri=uri, mercury_messages=mercury_messages)


def _region_after(edit: NextEdit, request: EditRequest) -> str:
    """The region as the edit leaves it: unchanged when there is none."""
    return edit.new_region if edit.edits and edit.new_region is not None else request.region_text


def _usage(request: EditRequest, answer: str) -> dict[str, int]:
    return usage_body(estimate_tokens(len(request.text)), estimate_tokens(len(answer)))


def _charge(meter: Meter, edit: NextEdit, sent_chars: int) -> None:
    """Tell the meter what the answering endpoint used: its own counts when it reported
    them, else the client's prompt and the answer's tokens estimated. Nothing answered in
    time: nothing is charged."""
    if edit.endpoint is None:
        return
    usage = edit.usage
    if usage is not None and usage.reported:
        meter.answered(edit.endpoint, usage.prompt_tokens, usage.completion_tokens, reported=True)
        return
    meter.answered(edit.endpoint, estimate_tokens(sent_chars), edit.tokens, reported=False)


def _headers(edit: NextEdit) -> dict[str, str]:
    return {ENDPOINT_HEADER: edit.endpoint or "none", REASON_HEADER: edit.reason.value}
