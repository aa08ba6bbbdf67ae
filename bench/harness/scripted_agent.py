"""A tool-using model made to order: it calls a tool, then answers with what the tool returned.

`ScriptedAgentServer` is a `FakeLLMServer` (same lifecycle, same request records) whose chat
completions and Responses endpoints play an agent's turn instead of fixed text:

- a conversation with no tool result yet gets a call of the tool the `ToolScript` chooses among
  the tools the request offers;
- a conversation that has one gets `ToolScript.answer(output)`, text quoting the last result.

The turn is read from the request alone (no state), so a client is answered the same whether
it talks to this server directly or through the gateway, and a test compares the two. Both
APIs answer streamed or not, in the shapes OpenAI documents: chat's `tool_calls` (streamed as
indexed deltas, arguments in pieces, `finish_reason: "tool_calls"`) and the Responses API's
`function_call` items and event sequence.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bench.harness.fake_llm_server import FakeLLMServer

ARGUMENT_PIECE_CHARS = 5  # streamed arguments come in pieces this long, as models stream them
TEXT_PIECE_CHARS = 6


@dataclass(frozen=True, slots=True)
class ToolCallPlan:
    name: str
    arguments: dict[str, Any]


@dataclass
class ToolScript:
    """What the scripted model does. `choose` picks the call from the offered tools (name to
    parameters schema); None offered or chosen: it answers at once with `answer("")`."""

    choose: Callable[[dict[str, Any]], ToolCallPlan | None]
    answer: Callable[[str], str] = lambda output: f"The tool said: {output.strip()}"
    call_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))


def call_tool(name: str, **arguments: Any) -> Callable[[dict[str, Any]], ToolCallPlan | None]:
    """A `choose` that calls `name` with `arguments` when it is offered."""
    return lambda tools: ToolCallPlan(name, arguments) if name in tools else None


@dataclass(frozen=True, slots=True)
class Turn:
    """The model's turn: a tool call, or text."""

    call: ToolCallPlan | None
    call_id: str
    text: str
    prompt_tokens: int

    @property
    def completion_tokens(self) -> int:
        body = self.text if self.call is None else json.dumps(self.call.arguments)
        return max(1, len(body) // 4)


class ScriptedAgentServer(FakeLLMServer):
    def __init__(self, script: ToolScript, **kwargs: Any) -> None:
        super().__init__(name=kwargs.pop("name", "scripted-agent"), **kwargs)
        self.script = script

    def _starlette_app(self) -> Starlette:
        scripted = [
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/responses", self._responses, methods=["POST"]),
        ]
        return Starlette(routes=[*scripted, *super()._starlette_app().routes])

    def _turn(self, tools: dict[str, Any], outputs: list[str], prompt: str) -> Turn:
        prompt_tokens = max(1, len(prompt) // 4)
        call = None if outputs else self.script.choose(tools)
        if call is not None:
            return Turn(call, f"call_{next(self.script.call_ids)}", "", prompt_tokens)
        return Turn(None, "", self.script.answer(outputs[-1] if outputs else ""), prompt_tokens)

    # -- chat completions ------------------------------------------------------------------

    async def _chat(self, request: Request) -> Response:
        payload = await request.json()
        tools = {
            tool["function"]["name"]: tool["function"].get("parameters", {})
            for tool in payload.get("tools") or []
            if tool.get("type") == "function"
        }
        outputs = [_text(m.get("content")) for m in payload["messages"] if m.get("role") == "tool"]
        turn = self._turn(tools, outputs, json.dumps(payload["messages"]))
        model = payload.get("model") or "scripted"
        if payload.get("stream"):
            usage = (payload.get("stream_options") or {}).get("include_usage") is True
            return _event_stream(_chat_chunks(turn, model, usage))
        return JSONResponse(_chat_body(turn, model))

    # -- responses -------------------------------------------------------------------------

    async def _responses(self, request: Request) -> Response:
        payload = await request.json()
        tools = {
            tool["name"]: tool.get("parameters", {})
            for tool in payload.get("tools") or []
            if tool.get("type") == "function"
        }
        items = payload["input"] if isinstance(payload["input"], list) else []
        outputs = [
            _text(item.get("output"))
            for item in items
            if item.get("type") == "function_call_output"
        ]
        turn = self._turn(tools, outputs, json.dumps(payload["input"]))
        echo = {"instructions": payload.get("instructions"), "tools": payload.get("tools") or []}
        events = _response_events(turn, payload.get("model") or "scripted", echo)
        if payload.get("stream"):
            return _event_stream(_sse(event, named=True) for event in events)
        return JSONResponse(events[-1]["response"])


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _sse(payload: dict[str, Any] | str, *, named: bool = False) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    event = f"event: {payload['type']}\n" if named and isinstance(payload, dict) else ""
    return f"{event}data: {data}\n\n".encode()


def _event_stream(events: Any) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        for event in events:
            yield event

    return StreamingResponse(body(), media_type="text/event-stream")


def _chat_usage(turn: Turn) -> dict[str, int]:
    return {
        "prompt_tokens": turn.prompt_tokens,
        "completion_tokens": turn.completion_tokens,
        "total_tokens": turn.prompt_tokens + turn.completion_tokens,
    }


def _chat_body(turn: Turn, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.call is not None:
        message["tool_calls"] = [
            {
                "id": turn.call_id,
                "type": "function",
                "function": {"name": turn.call.name, "arguments": json.dumps(turn.call.arguments)},
            }
        ]
    finish = "stop" if turn.call is None else "tool_calls"
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": _chat_usage(turn),
    }


def _chat_chunks(turn: Turn, model: str, usage: bool) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return _sse(
            {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [choice],
            }
        )

    chunks = [chunk({"role": "assistant", "content": ""})]
    if turn.call is None:
        chunks += [chunk({"content": piece}) for piece in _pieces(turn.text, TEXT_PIECE_CHARS)]
        chunks.append(chunk({}, "stop"))
    else:
        name = turn.call.name
        first = {"index": 0, "id": turn.call_id, "type": "function"}
        chunks.append(
            chunk({"tool_calls": [{**first, "function": {"name": name, "arguments": ""}}]})
        )
        arguments = json.dumps(turn.call.arguments)
        for piece in _pieces(arguments, ARGUMENT_PIECE_CHARS):
            chunks.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
        chunks.append(chunk({}, "tool_calls"))
    if usage:
        chunks.append(
            _sse(
                {
                    "id": "chatcmpl-scripted",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": model,
                    "choices": [],
                    "usage": _chat_usage(turn),
                }
            )
        )
    return [*chunks, _sse("[DONE]")]


def _response_events(turn: Turn, model: str, echo: dict[str, Any]) -> list[dict[str, Any]]:
    """The Responses event sequence of one turn; the last event's response is the whole answer.
    Each response object repeats the request's `echo` (its instructions and tools), as
    OpenAI's does."""
    sequence = itertools.count()
    response: dict[str, Any] = {
        "id": "resp_scripted",
        "object": "response",
        "created_at": 0,
        "status": "in_progress",
        "model": model,
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "error": None,
        "incomplete_details": None,
        "usage": None,
        **echo,
    }

    def event(kind: str, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "sequence_number": next(sequence), **fields}

    events = [
        event("response.created", response=dict(response)),
        event("response.in_progress", response=dict(response)),
    ]
    place = {"output_index": 0}
    if turn.call is None:
        item_id = "msg_scripted"
        at = {**place, "item_id": item_id, "content_index": 0}
        part = {"type": "output_text", "text": "", "annotations": []}
        message = {"id": item_id, "type": "message", "role": "assistant", "status": "in_progress"}
        events.append(event("response.output_item.added", **place, item={**message, "content": []}))
        events.append(event("response.content_part.added", **at, part=part))
        for piece in _pieces(turn.text, TEXT_PIECE_CHARS):
            events.append(event("response.output_text.delta", **at, delta=piece, logprobs=[]))
        events.append(event("response.output_text.done", **at, text=turn.text, logprobs=[]))
        done_part = {**part, "text": turn.text}
        events.append(event("response.content_part.done", **at, part=done_part))
        item = {**message, "status": "completed", "content": [done_part]}
    else:
        arguments = json.dumps(turn.call.arguments)
        call = {
            "id": "fc_scripted",
            "type": "function_call",
            "call_id": turn.call_id,
            "name": turn.call.name,
            "status": "in_progress",
        }
        at = {**place, "item_id": call["id"]}
        events.append(event("response.output_item.added", **place, item={**call, "arguments": ""}))
        for piece in _pieces(arguments, ARGUMENT_PIECE_CHARS):
            events.append(event("response.function_call_arguments.delta", **at, delta=piece))
        events.append(event("response.function_call_arguments.done", **at, arguments=arguments))
        item = {**call, "arguments": arguments, "status": "completed"}
    events.append(event("response.output_item.done", **place, item=item))
    usage = {
        "input_tokens": turn.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": turn.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": turn.prompt_tokens + turn.completion_tokens,
    }
    final = {**response, "status": "completed", "output": [item], "usage": usage}
    events.append(event("response.completed", response=final))
    return events


def main(argv: list[str] | None = None) -> None:
    """`python -m bench.harness.scripted_agent --port N`: a model that calls `get_weather`
    (when offered) and then quotes its result, until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m bench.harness.scripted_agent")
    parser.add_argument("--port", type=int, default=8002)
    args = parser.parse_args(argv)
    script = ToolScript(call_tool("get_weather", city="Oslo"))
    with ScriptedAgentServer(script, port=args.port), contextlib.suppress(KeyboardInterrupt):
        threading.Event().wait()


if __name__ == "__main__":
    main()
