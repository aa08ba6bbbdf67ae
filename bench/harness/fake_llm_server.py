"""A model endpoint made to order, for end-to-end tests and benchmarks.

`FakeLLMServer` is a real HTTP server on 127.0.0.1 that speaks the OpenAI API (`/v1/models`,
`/v1/completions`, `/v1/chat/completions`), the Anthropic Messages API (`/v1/messages`) and the
provider dialects `PROVIDER_ROUTES` lists, each at the path and in the shape its provider
documents (`provider_base_url(kind)` gives the base URL an endpoint of that kind uses). What
it answers, how fast, and how it fails is set by a `Behaviour` that may be swapped while it runs;
everything it receives is recorded, so a test can assert what left the client and what did not.
A bare `GET /v1/models` (what the router sends when it connects, ahead of any keystroke: it can
carry no user content) is counted in `model_list_requests`, apart from `requests`.

It runs uvicorn in a background thread with its own event loop. Every generation request is
raced against the client going away and against the server stopping, so hanging faults end as
soon as either happens and `stop()` never waits on a hung request.

Run by hand for demos: `python -m bench.harness.fake_llm_server --port 8001 --text "..."`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from lsp_server.event_loop import run_on_fastest_loop

# A request or response body, or one of its parts, as parsed JSON.
JsonObject = dict[str, Any]

FAULTS = (
    "hang_before_headers",
    "hang_mid_stream",
    "slow_drip",
    "malformed_json",
    "malformed_sse",
    "truncated",
    "oversized",
)
OVERSIZED_CHARS = 6 * 1024 * 1024
OVERSIZED_DELTA_CHARS = 64 * 1024
SLOW_DRIP_BYTE_DELAY_S = 1.0
TRACE_INDEX = re.compile(r"request (\d+)")
CHARS_PER_TOKEN = 4
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


@dataclass
class Behaviour:
    """How the server answers generation requests; read afresh for every request."""

    text: str | Callable[[JsonObject], str] = "return a + b\n"  # a callable gets the request JSON
    # Tool calls the chat answers with (after its text), each `{"name", "arguments"}` (the
    # arguments as JSON text, streamed in `chunk_chars` pieces) with an optional `"id"`; a
    # callable gets the request JSON. In the OpenAI shape and in the Anthropic one.
    tool_calls: tuple[JsonObject, ...] | Callable[[JsonObject], tuple[JsonObject, ...]] = ()
    latency_s: float = 0.0  # delay before response headers
    chunk_delay_s: float = 0.0  # delay between streamed chunks
    # A stream's own pace, drawn per request (a `profile`'s): the wait after the headers
    # before each part in turn; the parts past its end wait `chunk_delay_s`.
    gaps_s: tuple[float, ...] = ()
    headers: tuple[tuple[str, str], ...] = ()  # more response headers
    chunk_chars: int = 4  # characters per streamed delta
    fault: str | None = None  # "status:NNN" or one of FAULTS
    retry_after: str | None = None  # value of Retry-After on error statuses
    ignore_stream: bool = False  # answer with one JSON body even when asked to stream
    report_usage: bool = True  # False: OpenAI shapes carry no usage, streamed or not
    models: tuple[str, ...] = ("fake-model",)

    def __post_init__(self) -> None:
        fault_status(self.fault)


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    json: Any | None  # the parsed body, None when it is not JSON
    time: float  # time.monotonic() when the request was complete
    arrived: float  # time.monotonic() when it reached the server's app
    client: tuple[str, int] | None  # the connection's address on the client's side

    @property
    def payload(self) -> JsonObject:
        """The body as a JSON object; the test fails here when it is not one."""
        assert isinstance(self.json, dict), f"not a JSON object: {self.body[:200]!r}"
        return self.json


def fault_status(fault: str | None) -> int | None:
    """The status of a "status:NNN" fault, None for other faults; ValueError for unknown ones."""
    if fault is None or fault in FAULTS:
        return None
    name, _, code = fault.partition(":")
    if name == "status" and code.isdigit() and 200 <= int(code) <= 599:
        return int(code)
    raise ValueError(f"unknown fault {fault!r}: use 'status:NNN' or one of {', '.join(FAULTS)}")


# --- what the model says -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    text: str
    stop_sequence: str | None  # the stop string the text was cut at
    hit_max_tokens: bool
    prompt_tokens: int
    completion_tokens: int
    tool_calls: tuple[JsonObject, ...] = ()  # each {"id", "name", "arguments"}


def make_answer(
    text: str, prompt: str, max_tokens: int | None, stops: list[str], oversized: bool
) -> Answer:
    """Apply `stop` (cut at the first stop string) and `max_tokens` (as characters / 4)."""
    if oversized:
        text = ((text or "x") * (OVERSIZED_CHARS // max(1, len(text)) + 1))[:OVERSIZED_CHARS]
        return Answer(text, None, False, _tokens(prompt), _tokens(text))
    stop_sequence = None
    cuts = [(text.find(stop), stop) for stop in stops if stop and stop in text]
    if cuts:
        position, stop_sequence = min(cuts)
        text = text[:position]
    hit_max_tokens = False
    if max_tokens is not None and len(text) > max_tokens * CHARS_PER_TOKEN:
        text = text[: max_tokens * CHARS_PER_TOKEN]
        hit_max_tokens, stop_sequence = True, None
    return Answer(text, stop_sequence, hit_max_tokens, _tokens(prompt), _tokens(text))


def _tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _stop_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []


def _content_text(content: Any) -> str:
    """Text of a message content: a string, or a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def _input(call: JsonObject) -> JsonObject:
    return json.loads(call["arguments"]) if call["arguments"].strip() else {}


def _sse(payload: Any, event: str | None = None) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {data}\n\n".encode()


# --- the wire shapes of the three generation APIs ------------------------------------------


class WireShape:
    """One API's request fields, response bodies and stream events."""

    id_prefix = ""

    def __init__(self, payload: JsonObject, model: str, response_id: str) -> None:
        self.payload = payload
        self.model = model
        self.id = self.id_prefix + response_id
        self.created = int(time.time())
        self.chunk_chars = 4  # the plan sets the behaviour's
        self.report_usage = True  # and this

    def prompt(self) -> str:
        raise NotImplementedError

    def stops(self) -> list[str]:
        return _stop_list(self.payload.get("stop"))

    def max_tokens(self) -> int | None:
        value = self.payload.get("max_tokens", self.payload.get("max_completion_tokens"))
        return value if isinstance(value, int) else None

    def body(self, answer: Answer) -> JsonObject:
        raise NotImplementedError

    def opening(self, answer: Answer) -> list[bytes]:
        return []

    def delta(self, piece: str) -> bytes:
        raise NotImplementedError

    def closing(self, answer: Answer) -> list[bytes]:
        raise NotImplementedError

    @staticmethod
    def error(status: int, message: str) -> JsonObject:
        kind = _ERROR_TYPES.get(
            status, "server_error" if status >= 500 else "invalid_request_error"
        )
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}

    def _usage(self, answer: Answer) -> JsonObject | None:
        if not self.report_usage:
            return None
        return {
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
            "total_tokens": answer.prompt_tokens + answer.completion_tokens,
        }

    def _finish_reason(self, answer: Answer) -> str:
        if answer.tool_calls:
            return "tool_calls"
        return "length" if answer.hit_max_tokens else "stop"

    def _usage_events(self, answer: Answer) -> list[bytes]:
        options = self.payload.get("stream_options")
        if self.report_usage and isinstance(options, dict) and options.get("include_usage"):
            return [_sse(self._chunk([], usage=self._usage(answer)))]
        return []

    def _chunk(self, choices: list[JsonObject], **extra: Any) -> JsonObject:
        raise NotImplementedError


class CompletionsShape(WireShape):
    id_prefix = "cmpl-"

    def prompt(self) -> str:
        prompt = self.payload.get("prompt", "")
        prompt = "".join(prompt) if isinstance(prompt, list) else str(prompt)
        return prompt + str(self.payload.get("suffix") or "")

    def body(self, answer: Answer) -> JsonObject:
        choice = {"index": 0, "text": answer.text, "logprobs": None}
        choice["finish_reason"] = self._finish_reason(answer)
        return self._chunk([choice], usage=self._usage(answer))

    def delta(self, piece: str) -> bytes:
        return _sse(self._chunk([{"index": 0, "text": piece, "logprobs": None}]))

    def closing(self, answer: Answer) -> list[bytes]:
        final = {"index": 0, "text": "", "logprobs": None}
        final["finish_reason"] = self._finish_reason(answer)
        return [_sse(self._chunk([final])), *self._usage_events(answer), _sse("[DONE]")]

    def _chunk(self, choices: list[JsonObject], **extra: Any) -> JsonObject:
        return {
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"finish_reason": None, **choice} for choice in choices],
            **extra,
        }


class ChatShape(WireShape):
    id_prefix = "chatcmpl-"

    def prompt(self) -> str:
        messages = self.payload.get("messages", [])
        return "".join(_content_text(m.get("content")) for m in messages if isinstance(m, dict))

    def body(self, answer: Answer) -> JsonObject:
        message: JsonObject = {"role": "assistant", "content": answer.text}
        if answer.tool_calls:
            message["content"] = answer.text or None
            message["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": call["arguments"]},
                }
                for call in answer.tool_calls
            ]
        choice = {"index": 0, "message": message, "finish_reason": self._finish_reason(answer)}
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": self._usage(answer),
        }

    def opening(self, answer: Answer) -> list[bytes]:
        return [_sse(self._chunk([{"delta": {"role": "assistant", "content": ""}}]))]

    def delta(self, piece: str) -> bytes:
        return _sse(self._chunk([{"delta": {"content": piece}}]))

    def closing(self, answer: Answer) -> list[bytes]:
        final = {"delta": {}, "finish_reason": self._finish_reason(answer)}
        return [
            *self._tool_call_deltas(answer),
            _sse(self._chunk([final])),
            *self._usage_events(answer),
            _sse("[DONE]"),
        ]

    def _tool_call_deltas(self, answer: Answer) -> list[bytes]:
        """As OpenAI streams a call: its id, type and name first, then its arguments."""
        events = []
        for index, call in enumerate(answer.tool_calls):
            function = {"name": call["name"], "arguments": ""}
            first = {"index": index, "id": call["id"], "type": "function", "function": function}
            events.append(_sse(self._chunk([{"delta": {"tool_calls": [first]}}])))
            for piece in _pieces(call["arguments"], self.chunk_chars):
                more = {"index": index, "function": {"arguments": piece}}
                events.append(_sse(self._chunk([{"delta": {"tool_calls": [more]}}])))
        return events

    def _chunk(self, choices: list[JsonObject], **extra: Any) -> JsonObject:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "finish_reason": None, **choice} for choice in choices],
            **extra,
        }


class MessagesShape(WireShape):
    """Anthropic Messages: named SSE events, usage as input/output tokens."""

    id_prefix = "msg_"

    def prompt(self) -> str:
        messages = self.payload.get("messages", [])
        system = _content_text(self.payload.get("system"))
        return system + "".join(
            _content_text(m.get("content")) for m in messages if isinstance(m, dict)
        )

    def stops(self) -> list[str]:
        return _stop_list(self.payload.get("stop_sequences"))

    def max_tokens(self) -> int | None:
        value = self.payload.get("max_tokens")
        return value if isinstance(value, int) else None

    def body(self, answer: Answer) -> JsonObject:
        blocks: list[JsonObject] = [{"type": "text", "text": answer.text}] if answer.text else []
        blocks += [
            {"type": "tool_use", "id": c["id"], "name": c["name"], "input": _input(c)}
            for c in answer.tool_calls
        ]
        return {
            **self._message(answer, blocks),
            "stop_reason": self._stop_reason(answer),
            "stop_sequence": answer.stop_sequence,
            "usage": {
                "input_tokens": answer.prompt_tokens,
                "output_tokens": answer.completion_tokens,
            },
        }

    def opening(self, answer: Answer) -> list[bytes]:
        message = {
            **self._message(answer, []),
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": answer.prompt_tokens, "output_tokens": 1},
        }
        block = {"type": "text", "text": ""}
        return [
            self._event("message_start", message=message),
            self._event("content_block_start", index=0, content_block=block),
            self._event("ping"),
        ]

    def delta(self, piece: str) -> bytes:
        delta = {"type": "text_delta", "text": piece}
        return self._event("content_block_delta", index=0, delta=delta)

    def closing(self, answer: Answer) -> list[bytes]:
        delta = {"stop_reason": self._stop_reason(answer), "stop_sequence": answer.stop_sequence}
        return [
            self._event("content_block_stop", index=0),
            *self._tool_use_blocks(answer),
            self._event(
                "message_delta", delta=delta, usage={"output_tokens": answer.completion_tokens}
            ),
            self._event("message_stop"),
        ]

    @staticmethod
    def error(status: int, message: str) -> JsonObject:
        kind = _ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def _message(self, answer: Answer, content: list[JsonObject]) -> JsonObject:
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
        }

    def _tool_use_blocks(self, answer: Answer) -> list[bytes]:
        """As Anthropic streams a tool call: a `tool_use` block with its id and name, then
        its input as `input_json_delta` pieces."""
        events = []
        for offset, call in enumerate(answer.tool_calls, start=1):
            block = {"type": "tool_use", "id": call["id"], "name": call["name"], "input": {}}
            events.append(self._event("content_block_start", index=offset, content_block=block))
            for piece in _pieces(call["arguments"], self.chunk_chars):
                delta = {"type": "input_json_delta", "partial_json": piece}
                events.append(self._event("content_block_delta", index=offset, delta=delta))
            events.append(self._event("content_block_stop", index=offset))
        return events

    def _stop_reason(self, answer: Answer) -> str:
        if answer.tool_calls:
            return "tool_use"
        if answer.hit_max_tokens:
            return "max_tokens"
        return "stop_sequence" if answer.stop_sequence is not None else "end_turn"

    def _event(self, name: str, **fields: Any) -> bytes:
        return _sse({"type": name, **fields}, event=name)


class MistralFimShape(ChatShape):
    """Codestral's `POST /v1/fim/completions`: `prompt` + optional `suffix` in, and out the
    chat-completion shape (`object: "chat.completion"`, `message`, streamed `delta`)."""

    def prompt(self) -> str:
        return str(self.payload.get("prompt", "")) + str(self.payload.get("suffix") or "")


class LlamaCppShape(WireShape):
    """llama.cpp server's native `POST /infill` (`input_prefix`, `input_suffix`, `input_extra`,
    `cache_prompt`, …) and `POST /completion` (`prompt`): `n_predict` caps the tokens, and the
    answer is a flat object `{content, stop, stop_type, tokens_predicted, tokens_evaluated}`;
    streamed, one such event per piece with `stop: false`, the last with `stop: true` and the
    counts, and no `[DONE]`."""

    def prompt(self) -> str:
        if "prompt" in self.payload and "input_prefix" not in self.payload:
            return str(self.payload.get("prompt") or "")
        return str(self.payload.get("input_prefix") or "") + str(
            self.payload.get("input_suffix") or ""
        )

    def max_tokens(self) -> int | None:
        value = self.payload.get("n_predict")
        return value if isinstance(value, int) and value >= 0 else None

    def body(self, answer: Answer) -> JsonObject:
        return self._final(answer, answer.text)

    def delta(self, piece: str) -> bytes:
        return _sse({"index": 0, "content": piece, "stop": False, "id_slot": 0})

    def closing(self, answer: Answer) -> list[bytes]:
        return [_sse(self._final(answer, ""))]

    @staticmethod
    def error(status: int, message: str) -> JsonObject:
        kind = "not_supported_error" if status == 501 else _ERROR_TYPES.get(status, "server_error")
        return {"error": {"code": status, "message": message, "type": kind}}

    def _final(self, answer: Answer, content: str) -> JsonObject:
        if answer.hit_max_tokens:
            stop_type = "limit"
        else:
            stop_type = "word" if answer.stop_sequence is not None else "eos"
        return {
            "index": 0,
            "content": content,
            "id_slot": 0,
            "stop": True,
            "model": self.model,
            "stop_type": stop_type,
            "stopping_word": answer.stop_sequence or "",
            "tokens_predicted": answer.completion_tokens,
            "tokens_evaluated": answer.prompt_tokens,
            "tokens_cached": 0,
            "truncated": False,
        }


# Provider dialects: path → shape, with the base URL an endpoint of that kind is given.
PROVIDER_ROUTES: dict[str, tuple[tuple[str, type[WireShape]], ...]] = {
    # Mercury: FIM at `{base}/fim/completions` in the text-completion shape; chat as OpenAI;
    # next edits at `{base}/edit/completions`, a chat body answered in the chat shape.
    "inception": (
        ("/inception/v1/fim/completions", CompletionsShape),
        ("/inception/v1/chat/completions", ChatShape),
        ("/inception/v1/edit/completions", ChatShape),
    ),
    "mistral": (
        ("/mistral/v1/fim/completions", MistralFimShape),
        ("/mistral/v1/chat/completions", ChatShape),
    ),
    # DeepSeek: FIM (beta) at `https://api.deepseek.com/beta/completions`, chat at the root.
    "deepseek": (
        ("/deepseek/beta/completions", CompletionsShape),
        ("/deepseek/chat/completions", ChatShape),
    ),
    "llamacpp": (
        ("/llamacpp/infill", LlamaCppShape),
        ("/llamacpp/completion", LlamaCppShape),
        ("/llamacpp/v1/completions", CompletionsShape),
        ("/llamacpp/v1/chat/completions", ChatShape),
    ),
}
PROVIDER_BASES = {
    "inception": "/inception/v1",
    "mistral": "/mistral/v1",
    "deepseek": "/deepseek",
    "llamacpp": "/llamacpp",
}


# --- how a response is played --------------------------------------------------------------


@dataclass
class Plan:
    """A response as headers, body parts and pacing; `hang_*` keep it open until cancelled."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    parts: list[bytes] = field(default_factory=list)
    latency_s: float = 0.0
    part_delay_s: float = 0.0
    gaps_s: tuple[float, ...] = ()  # before each part in turn; past its end, `part_delay_s`
    hang_before_headers: bool = False
    hang_after_parts: bool = False
    is_stream: bool = False


def plan_response(behaviour: Behaviour, shape: WireShape, stream: bool) -> Plan:
    fault = behaviour.fault
    status = fault_status(fault)
    plan = Plan(latency_s=behaviour.latency_s, headers=dict(behaviour.headers), is_stream=stream)
    if status is not None:
        body = b"" if status in (204, 304) else json.dumps(shape.error(status, "fault")).encode()
        plan.status, plan.parts, plan.is_stream = status, [body], False
        plan.headers["content-type"] = "application/json"
        if behaviour.retry_after is not None:
            plan.headers["retry-after"] = behaviour.retry_after
        return plan
    if fault == "hang_before_headers":
        plan.hang_before_headers = True
        return plan
    if fault == "malformed_sse":
        plan.headers["content-type"] = "text/event-stream"
        plan.parts = [
            b"this line is not an event\n",
            b'{"choices": [{"text": "json without a data field"}]}\n',
            b"<html><body>502 Bad Gateway</body></html>\n\n",
        ]
        return plan
    text = behaviour.text(shape.payload) if callable(behaviour.text) else behaviour.text
    answer = make_answer(
        text, shape.prompt(), shape.max_tokens(), shape.stops(), oversized=fault == "oversized"
    )
    scripted = behaviour.tool_calls
    calls = scripted(shape.payload) if callable(scripted) else scripted
    if calls:
        scripted = tuple(
            {
                "id": c.get("id") or f"call_{shape.id}_{i}",
                "name": c["name"],
                "arguments": c["arguments"],
            }
            for i, c in enumerate(calls)
        )
        written = "".join(c["name"] + c["arguments"] for c in scripted)
        answer = dataclasses.replace(
            answer,
            tool_calls=scripted,
            completion_tokens=answer.completion_tokens + _tokens(written),
        )
    shape.chunk_chars = max(1, behaviour.chunk_chars)
    if stream:
        _plan_stream(plan, behaviour, shape, answer)
    else:
        _plan_body(plan, shape, answer, fault)
    if fault == "slow_drip":
        plan.parts = [bytes([byte]) for byte in b"".join(plan.parts)]
        plan.part_delay_s, plan.gaps_s = SLOW_DRIP_BYTE_DELAY_S, ()
    return plan


def _plan_stream(plan: Plan, behaviour: Behaviour, shape: WireShape, answer: Answer) -> None:
    fault = behaviour.fault
    plan.headers["content-type"] = "text/event-stream"
    plan.headers["cache-control"] = "no-cache"
    plan.part_delay_s = behaviour.chunk_delay_s
    plan.gaps_s = behaviour.gaps_s
    size = OVERSIZED_DELTA_CHARS if fault == "oversized" else max(1, behaviour.chunk_chars)
    text = answer.text[: len(answer.text) // 2] if fault == "truncated" else answer.text
    deltas = [shape.delta(piece) for piece in _pieces(text, size)]
    if fault == "hang_mid_stream":
        plan.parts = [*shape.opening(answer), *deltas[:1]]
        plan.hang_after_parts = True
    elif fault == "truncated":
        plan.parts = [*shape.opening(answer), *deltas]
    elif fault == "malformed_json":
        garbage = [b'data: {"choices": [{"text": "ret\n\n', b"data: not json at all\n\n"]
        plan.parts = [*shape.opening(answer), *garbage, *shape.closing(answer)]
    else:
        plan.parts = [*shape.opening(answer), *deltas, *shape.closing(answer)]


def _plan_body(plan: Plan, shape: WireShape, answer: Answer, fault: str | None) -> None:
    plan.headers["content-type"] = "application/json"
    if fault == "malformed_json":
        body = b'{"id": "broken", "choices": [ this is not json }'
    else:
        body = json.dumps(shape.body(answer)).encode()
    half = body[: len(body) // 2]
    if fault == "truncated":
        body = half
    plan.headers["content-length"] = str(len(body))
    if fault == "hang_mid_stream":
        plan.parts, plan.hang_after_parts = [half], True
    else:
        plan.parts = [body]


def _pieces(text: str, size: int) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start : start + size]


async def play(plan: Plan, send: Send) -> None:
    await asyncio.sleep(plan.latency_s)
    if plan.hang_before_headers:
        await asyncio.Event().wait()
    headers = [(k.encode(), v.encode()) for k, v in plan.headers.items()]
    await send({"type": "http.response.start", "status": plan.status, "headers": headers})
    for index, part in enumerate(plan.parts):
        if index < len(plan.gaps_s):
            await asyncio.sleep(plan.gaps_s[index])
        elif index and plan.part_delay_s:
            await asyncio.sleep(plan.part_delay_s)
        await send({"type": "http.response.body", "body": part, "more_body": True})
    if plan.hang_after_parts:
        await asyncio.Event().wait()
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def wait_for_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _cancel(tasks: tuple[asyncio.Future[Any], ...]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# --- the server ----------------------------------------------------------------------------


class FakeLLMServer:
    """An OpenAI- and Anthropic-compatible server on 127.0.0.1 with scripted behaviour.

    `disconnects` counts generation requests the client abandoned before the response ended
    (streaming or not, including during `latency_s`); `completed_streams` counts streams the
    server played to their end; `open_streams` is the number of streams whose headers are sent
    and which have not ended yet. `reset()` clears the records and counters, not that gauge.
    """

    def __init__(
        self,
        behaviour: Behaviour | None = None,
        *,
        name: str = "fake",
        api_key: str | None = None,
        port: int = 0,
        access_log: bool = False,
        certificate: Path | None = None,
        for_load: bool = False,
    ) -> None:
        """`certificate`: a PEM file with the server's key and certificate chain (as trustme
        writes one): the server then speaks HTTPS only. `for_load`: served as a benchmark's
        load needs it (httptools, the fastest event loop, a long accept queue), and no request
        kept in `requests`, so memory stays flat over a long run (the counters still count)."""
        self.behaviour = behaviour or Behaviour()
        self.certificate = certificate
        self.name = name
        self.api_key = api_key
        self.port = port
        self.requests: list[RecordedRequest] = []
        self.model_list_requests = 0
        # A latency profile: the behaviour for one request, chosen from its body (None: the
        # usual `behaviour`), so every client replaying a trace sees the same latencies.
        self.profile: Callable[[JsonObject], Behaviour | None] | None = None
        # Called with each generation request and the time (`time.monotonic()`) its answer
        # ended, once the answer was played to its end.
        self.answered: Callable[[RecordedRequest, float], None] | None = None
        self.bytes_received = 0
        self.open_streams = 0
        self.completed_streams = 0
        self.disconnects = 0
        self._access_log = access_log
        self._for_load = for_load
        self._lock = threading.Lock()
        self._next_id = 0
        self._thread: threading.Thread | None = None
        self._server: uvicorn.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None

    # lifecycle

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    @property
    def root_url(self) -> str:
        scheme = "https" if self.certificate is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def provider_base_url(self, kind: str) -> str:
        """The base URL an endpoint of `kind` uses to reach this server's dialect of it."""
        return self.root_url + PROVIDER_BASES.get(kind, "/v1")

    def start(self) -> Self:
        if self._thread is not None:
            raise RuntimeError(f"{self.name} is already running")
        # IPPROTO_TCP lets asyncio set TCP_NODELAY, as real servers do: no delayed last chunk.
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(("127.0.0.1", self.port))
        except OSError:
            listener.close()
            raise
        self.port = listener.getsockname()[1]
        config = uvicorn.Config(
            _RecordingApp(self, self._starlette_app()),
            http="httptools" if self._for_load else "h11",
            backlog=2048 if self._for_load else 100,
            ws="none",
            lifespan="off",
            log_config=None,
            access_log=self._access_log,
            timeout_graceful_shutdown=2,
            ssl_certfile=self.certificate,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=run_on_fastest_loop if self._for_load else asyncio.run,
            args=(self._serve(listener),),
            name=f"fake-llm-{self.name}",
        )
        self._thread.daemon = True
        self._thread.start()
        self.wait_for(lambda s: s._is_started() or not s._is_alive(), timeout_s=10)
        if not self._is_started():
            self.stop()
            listener.close()
            raise RuntimeError(f"{self.name} failed to start on port {self.port}")
        return self

    def stop(self) -> None:
        """Stop serving; hung requests are ended rather than waited for."""
        thread, server, loop = self._thread, self._server, self._loop
        if thread is None or server is None:
            return
        if loop is not None and self._stopping is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed in between
                loop.call_soon_threadsafe(self._stopping.set)
        server.should_exit = True
        thread.join(timeout=5)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout=5)
        self._thread = self._server = self._loop = self._stopping = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # records

    def received_text(self) -> str:
        """Every request body received, decoded and joined."""
        return "\n".join(r.body.decode("utf-8", "replace") for r in list(self.requests))

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.model_list_requests = 0
            self.bytes_received = 0
            self.completed_streams = 0
            self.disconnects = 0

    def quiet(self, timeout_s: float = 10) -> None:
        """Wait for the streams still open to end, then `reset`: a stream counts as completed
        only after its last bytes went out, so on a loaded machine the client (and the test
        before) may be done with it before it is counted."""
        if not self.wait_for(lambda server: server.open_streams == 0, timeout_s):
            raise AssertionError(f"{self.name}: streams still open after {timeout_s} s")
        self.reset()

    def wait_for(self, predicate: Callable[[FakeLLMServer], bool], timeout_s: float = 5) -> bool:
        """Poll `predicate(self)` until it holds or `timeout_s` passes; True if it held."""
        deadline = time.monotonic() + timeout_s
        while not predicate(self):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    async def wait_for_async(
        self, predicate: Callable[[FakeLLMServer], bool], timeout_s: float = 5
    ) -> bool:
        """`wait_for` for async tests: polls without blocking the caller's event loop."""
        deadline = time.monotonic() + timeout_s
        while not predicate(self):
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    # internals

    def _is_started(self) -> bool:
        return self._server is not None and self._server.started

    def _is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    async def _serve(self, listener: socket.socket) -> None:
        assert self._server is not None
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        await self._server.serve(sockets=[listener])

    def _record(self, request: RecordedRequest, size: int) -> None:
        with self._lock:
            if request.method == "GET" and request.path == "/v1/models" and not request.body:
                self.model_list_requests += 1
                return
            if not self._for_load:
                self.requests.append(request)
            self.bytes_received += size

    def _count(self, counter: str, step: int = 1) -> None:
        with self._lock:
            setattr(self, counter, getattr(self, counter) + step)

    def _response_id(self) -> str:
        with self._lock:
            self._next_id += 1
            return f"{self.name}-{self._next_id}"

    def _starlette_app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/v1/completions", self._generate(CompletionsShape), methods=["POST"]),
                Route("/v1/chat/completions", self._generate(ChatShape), methods=["POST"]),
                Route("/v1/messages", self._generate(MessagesShape), methods=["POST"]),
                *(
                    Route(path, self._generate(shape), methods=["POST"])
                    for routes in PROVIDER_ROUTES.values()
                    for path, shape in routes
                ),
            ]
        )

    def _authorized(self, request: Request, anthropic: bool) -> bool:
        if self.api_key is None:
            return True
        bearer = request.headers.get("authorization") == f"Bearer {self.api_key}"
        x_api_key = request.headers.get("x-api-key") == self.api_key
        return x_api_key if anthropic else bearer

    async def _models(self, request: Request) -> JSONResponse:
        if not (self._authorized(request, False) or self._authorized(request, True)):
            return JSONResponse(WireShape.error(401, "invalid API key"), 401)
        models = self.behaviour.models
        data = [
            {
                "id": model,
                "object": "model",
                "created": 0,
                "owned_by": self.name,
                "type": "model",
                "display_name": model,
                "created_at": "2025-01-01T00:00:00Z",
            }
            for model in models
        ]
        first, last = (models[0], models[-1]) if models else (None, None)
        listing = {"object": "list", "data": data, "has_more": False}
        return JSONResponse({**listing, "first_id": first, "last_id": last})

    def _generate(self, shape_class: type[WireShape]) -> Callable[[Request], Any]:
        anthropic = shape_class is MessagesShape

        async def endpoint(request: Request) -> Any:
            behaviour = self.behaviour
            if not self._authorized(request, anthropic):
                return JSONResponse(shape_class.error(401, "invalid API key"), 401)
            recorded: RecordedRequest = request.scope[_RECORDED]
            payload = recorded.json
            if not isinstance(payload, dict):
                error = shape_class.error(400, "request body is not a JSON object")
                return JSONResponse(error, 400)
            if self.profile is not None:
                behaviour = self.profile(payload) or behaviour
            model = str(payload.get("model") or (behaviour.models or ("fake-model",))[0])
            shape = shape_class(payload, model, self._response_id())
            shape.report_usage = behaviour.report_usage
            stream = payload.get("stream") is True and not behaviour.ignore_stream
            plan = plan_response(behaviour, shape, stream=stream)
            return _SupervisedResponse(self, plan, shape, recorded)

        return endpoint


class _SupervisedResponse:
    """Plays a plan while watching for the client leaving and the server stopping."""

    def __init__(
        self, server: FakeLLMServer, plan: Plan, shape: WireShape, request: RecordedRequest
    ) -> None:
        self.server = server
        self.plan = plan
        self.shape = shape
        self.request = request
        self.started = False
        self.ended = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.server._stopping is not None
        player = asyncio.ensure_future(play(self.plan, self._tracking(send)))
        client_gone = asyncio.ensure_future(wait_for_disconnect(receive))
        stopping = asyncio.ensure_future(self.server._stopping.wait())
        tasks = (player, client_gone, stopping)
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            await _cancel(tasks)
            if player in done:
                player.result()
                if self.server.answered is not None:
                    self.server.answered(self.request, time.monotonic())
                if self.plan.is_stream:
                    self.server._count("completed_streams")
            elif client_gone in done:
                self.server._count("disconnects")
            else:
                await self._end_for_shutdown(send)
        finally:
            await _cancel(tasks)
            if self.started and self.plan.is_stream:
                self.server._count("open_streams", -1)

    def _tracking(self, send: Send) -> Send:
        async def tracking_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.started = True
                if self.plan.is_stream:
                    self.server._count("open_streams")
            elif not message.get("more_body", False):
                self.ended = True
            await send(message)

        return tracking_send

    async def _end_for_shutdown(self, send: Send) -> None:
        if not self.started:
            body = json.dumps(self.shape.error(503, "server is shutting down")).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": body})
        elif not self.ended:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


class _RecordingApp:
    """ASGI middleware: reads each request whole, records it, counts its bytes, replays it."""

    def __init__(self, server: FakeLLMServer, app: Starlette) -> None:
        self.server = server
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        arrived = time.monotonic()
        chunks: list[bytes] = []
        disconnected = False
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                disconnected = True
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope["headers"]:
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        client = scope.get("client")
        request = RecordedRequest(
            scope["method"],
            scope["path"],
            headers,
            body,
            _json_or_none(body),
            time.monotonic(),
            arrived,
            (client[0], client[1]) if client else None,
        )
        self.server._record(request, _head_size(scope) + len(body))
        scope[_RECORDED] = request
        if disconnected:
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


# The scope's key for the request as recorded, so the endpoint reads the body parsed once.
_RECORDED = "fake_llm.recorded"


def _head_size(scope: Scope) -> int:
    """Bytes of the request line and headers as they came over the wire (HTTP/1.1)."""
    target = scope.get("raw_path") or scope["path"].encode()
    query = scope.get("query_string", b"")
    line = len(scope["method"]) + 1 + len(target) + (len(query) + 1 if query else 0)
    line += len(" HTTP/") + len(scope["http_version"]) + 2
    fields = sum(len(name) + 2 + len(value) + 2 for name, value in scope["headers"])
    return line + fields + 2


def _json_or_none(body: bytes) -> Any | None:
    """The body parsed (by orjson, or by `json` where orjson refuses, as with integers past 64
    bits), None when it is not JSON."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(body)
    except ValueError:
        return None


# --- manual demos --------------------------------------------------------------------------


def trace_profile(path: str, base: Behaviour) -> Callable[[JsonObject], Behaviour | None]:
    """The profile in a JSON file: a list whose entry N is the latency in ms of the request whose
    prompt says `request N`, or null when that request gets a 503."""
    entries = json.loads(Path(path).read_text(encoding="utf-8"))

    def behaviour_for(payload: JsonObject) -> Behaviour | None:
        found = TRACE_INDEX.search(json.dumps(payload))
        if found is None or int(found.group(1)) >= len(entries):
            return None
        latency_ms = entries[int(found.group(1))]
        if latency_ms is None:
            return dataclasses.replace(base, fault="status:503")
        return dataclasses.replace(base, latency_s=float(latency_ms) / 1000)

    return behaviour_for


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.harness.fake_llm_server",
        description="Serve a scripted OpenAI/Anthropic-compatible model on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--text", default=Behaviour.text, help="the model's answer")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay before headers")
    parser.add_argument("--chunk-delay-ms", type=float, default=0.0, help="delay between chunks")
    parser.add_argument("--fault", default=None, help="status:NNN or one of " + ", ".join(FAULTS))
    parser.add_argument("--api-key", default=None, help="require this key")
    parser.add_argument("--model", action="append", help="a model to list (repeatable)")
    parser.add_argument(
        "--profile", help="JSON list: latency in ms (null: 503) of the request saying 'request N'"
    )
    args = parser.parse_args(argv)
    try:
        behaviour = Behaviour(
            text=args.text,
            latency_s=args.latency_ms / 1000,
            chunk_delay_s=args.chunk_delay_ms / 1000,
            fault=args.fault,
            models=tuple(args.model or Behaviour.models),
        )
    except ValueError as exc:
        parser.error(str(exc))
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    quiet = args.profile is not None  # a benchmark's endpoint: no access log
    with FakeLLMServer(
        behaviour, api_key=args.api_key, port=args.port, access_log=not quiet
    ) as server:
        if args.profile:
            server.profile = trace_profile(args.profile, behaviour)
        print(
            f"OpenAI base_url {server.base_url}  Anthropic base_url {server.root_url}", flush=True
        )
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
