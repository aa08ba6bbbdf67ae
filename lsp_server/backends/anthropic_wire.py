"""OpenAI chat requests as Anthropic Messages requests, and Messages stream events back.

Requests: system and developer turns become `system`; an assistant's `tool_calls` become
`tool_use` blocks and `tool` turns `tool_result` blocks in a user turn (consecutive turns of one
role are merged, as the API wants them alternating); image parts become image blocks; `tools`
take `input_schema` from the function's `parameters`; `tool_choice` `required` is `any`, a named
function is `tool`, and `parallel_tool_calls: false` is `disable_parallel_tool_use`; `top_p` is
kept and `user` becomes `metadata.user_id`. Fields the API has no counterpart for
(`response_format`, `seed`, `reasoning_effort`, ...) are dropped with a debug note.

Streams: a `tool_use` block start is a tool call's first piece (its id and name), each
`input_json_delta` a piece of its arguments; `stop_reason` `tool_use` is `finish_reason`
`tool_calls`, `max_tokens` is `length`, the others `stop`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from lsp_server.backends.base import ChatEvent, ChatMessage, ChatRequest
from lsp_server.backends.tool_calls import ToolCallStream

log = logging.getLogger(__name__)

FINISH_REASONS = {"tool_use": "tool_calls", "max_tokens": "length"}
_OPTIONS_TAKEN = frozenset({"top_p", "user", "parallel_tool_calls"})


def messages_body(model: str, request: ChatRequest) -> dict[str, Any]:
    """The streamed Messages body for `request`."""
    system = "\n\n".join(
        m.content for m in request.messages if m.role in ("system", "developer") and m.content
    )
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "messages": _turns(m for m in request.messages if m.role not in ("system", "developer")),
        "stream": True,
    }
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if system:
        body["system"] = system
    # The API refuses stop sequences made of whitespace; those are applied by the caller.
    if stop_sequences := [stop for stop in request.stop if stop.strip()]:
        body["stop_sequences"] = stop_sequences
    if request.tools:
        body["tools"] = [tool for tool in map(_tool, request.tools) if tool is not None]
    choice = _tool_choice(request.tool_choice, request.options.get("parallel_tool_calls"))
    if choice is not None and request.tools:
        body["tool_choice"] = choice
    if "top_p" in request.options:
        body["top_p"] = request.options["top_p"]
    user = request.options.get("user")
    if isinstance(user, str) and user:
        body["metadata"] = {"user_id": user}
    for name in request.options:
        if name not in _OPTIONS_TAKEN:
            log.debug("anthropic: dropped %r, which the Messages API has no counterpart for", name)
    return body


def _turns(messages: Iterable[ChatMessage]) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:  # a turn of plain text is sent as a string, its simplest form
        if len(turn["content"]) == 1 and turn["content"][0]["type"] == "text":
            turn["content"] = turn["content"][0]["text"]
    return turns


def _blocks(message: ChatMessage) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [
            {"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.content}
        ]
    blocks: list[dict[str, Any]] = []
    if message.parts:
        blocks.extend(block for block in map(_part_block, message.parts) if block is not None)
    elif message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call.arguments)}
        )
    return blocks


def _part_block(part: Mapping[str, Any]) -> dict[str, Any] | None:
    if part.get("type") == "text":
        return {"type": "text", "text": str(part.get("text", ""))}
    if part.get("type") == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, Mapping) else image
        if not isinstance(url, str):
            return None
        if url.startswith("data:") and ";base64," in url:
            media_type, data = url[len("data:") :].split(";base64,", 1)
            return {
                "type": "image",
                "source": {"type": "base64", "media_type": media_type, "data": data},
            }
        return {"type": "image", "source": {"type": "url", "url": url}}
    log.debug("anthropic: dropped a content part of type %r", part.get("type"))
    return None


def _input(arguments: str) -> Any:
    """A call's arguments as the object `tool_use.input` wants; empty or broken: `{}`."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _tool(tool: Mapping[str, Any]) -> dict[str, Any] | None:
    function = tool.get("function")
    if tool.get("type") != "function" or not isinstance(function, Mapping):
        log.debug("anthropic: dropped a tool of type %r", tool.get("type"))
        return None
    out: dict[str, Any] = {
        "name": function.get("name"),
        "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
    }
    if function.get("description"):
        out["description"] = function["description"]
    return out


def _tool_choice(choice: Any, parallel: Any) -> dict[str, Any] | None:
    if choice == "none":
        return {"type": "none"}
    if choice == "required":
        out: dict[str, Any] = {"type": "any"}
    elif isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):
        out = {"type": "tool", "name": choice["function"].get("name")}
    elif choice == "auto" or parallel is False:
        out = {"type": "auto"}
    else:
        return None
    if parallel is False:
        out["disable_parallel_tool_use"] = True
    return out


class MessagesEvents:
    """Reads the events of one Messages stream into chat events, block by block."""

    def __init__(self, endpoint: str) -> None:
        self.calls = ToolCallStream(endpoint)
        self._tool_index: dict[int, int] = {}  # the stream's block index → tool-call index

    def block_start(self, payload: Mapping[str, Any]) -> list[ChatEvent]:
        block = payload.get("content_block")
        if not isinstance(block, Mapping) or block.get("type") != "tool_use":
            return []
        index = self._tool_index.setdefault(_int(payload.get("index")), len(self._tool_index))
        pieces: list[ChatEvent] = []
        pieces.extend(
            self.calls.feed(index, id=_text(block.get("id")), name=_text(block.get("name")))
        )
        if isinstance(block.get("input"), Mapping) and block["input"]:
            arguments = json.dumps(block["input"], separators=(",", ":"))
            pieces.extend(self.calls.feed(index, arguments=arguments))
        return pieces

    def block_delta(self, payload: Mapping[str, Any]) -> list[ChatEvent]:
        delta = payload.get("delta")
        if not isinstance(delta, Mapping):
            return []
        if delta.get("type") == "text_delta" and delta.get("text"):
            return [str(delta["text"])]
        if delta.get("type") == "input_json_delta":
            index = self._tool_index.get(_int(payload.get("index")))
            partial = delta.get("partial_json")
            if index is not None and isinstance(partial, str) and partial:
                return list(self.calls.feed(index, arguments=partial))
        return []

    def finish(self) -> list[ChatEvent]:
        return list(self.calls.finish())


def finish_reason(stop_reason: str) -> str:
    return FINISH_REASONS.get(stop_reason, "stop")


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
