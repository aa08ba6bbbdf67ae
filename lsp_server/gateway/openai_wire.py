"""The OpenAI wire shapes the gateway reads and writes, checked by hand.

Request bodies are validated field by field so a client gets a 400 that names the field (`param`)
instead of a stack trace; response and stream-chunk bodies carry every field the OpenAI SDKs and
Zed's edit-prediction client require.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from lsp_server import json_codec
from lsp_server.backends.base import ChatMessage, TokenLimitField, ToolCall, ToolCallDelta

# Stop strings a request may carry: the upstream gets the first four (what OpenAI-compatible
# APIs take) and the gateway applies the rest itself; this only bounds hostile bodies.
MAX_STOP_SEQUENCES = 256
CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")
_CHAT_ROLE_SET = frozenset(CHAT_ROLES)
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
}


class GatewayError(Exception):
    """An error the client is told about, in OpenAI's shape and with an HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
        kind: str | None = None,
    ) -> None:
        """`kind`: the error's `type` where it is not the status's (which limit a 429 hit)."""
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.headers = headers or {}
        self.kind = kind

    def body(self) -> dict[str, Any]:
        return error_body(
            self.status, self.message, code=self.code, param=self.param, kind=self.kind
        )


def error_body(
    status: int,
    message: str,
    *,
    code: str | None = None,
    param: str | None = None,
    kind: str | None = None,
) -> dict[str, Any]:
    kind = kind or _ERROR_TYPES.get(
        status, "server_error" if status >= 500 else "invalid_request_error"
    )
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


# --- requests ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompletionBody:
    model: str
    prompt: str
    suffix: str | None
    max_tokens: int | None
    stop: tuple[str, ...] | None
    temperature: float | None
    stream: bool
    include_usage: bool


@dataclass(frozen=True, slots=True)
class ChatBody:
    """A chat-completion request: the fields the gateway acts on, and `options`, every other
    field as sent, for the upstream."""

    model: str
    messages: tuple[ChatMessage, ...]
    max_tokens: int | None
    token_limit_field: TokenLimitField
    stop: tuple[str, ...] | None
    temperature: float | None
    stream: bool
    include_usage: bool
    tools: tuple[dict[str, Any], ...] = ()
    tool_choice: Any = None
    options: dict[str, Any] = field(default_factory=dict)


# Fields the gateway reads itself; every other field of a chat request goes on as sent.
_CHAT_FIELDS = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "temperature",
        "stream",
        "stream_options",
        "tools",
        "tool_choice",
        "n",
    }
)


def parse_json_object(raw: bytes) -> dict[str, Any]:
    try:
        payload = json_codec.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise GatewayError(400, "the request body is not valid JSON", code="invalid_json") from None
    except RecursionError:
        message = "the request body is nested too deep"
        raise GatewayError(400, message, code="invalid_json") from None
    if not isinstance(payload, dict):
        raise GatewayError(400, "the request body must be a JSON object", code="invalid_json")
    return payload


def parse_completion_body(payload: dict[str, Any]) -> CompletionBody:
    prompt = payload.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise _invalid("prompt", "`prompt` is required and must be a string")
    _reject_many_choices(payload)
    return CompletionBody(
        model=_model(payload),
        prompt=prompt,
        suffix=_optional_str(payload, "suffix"),
        max_tokens=_max_tokens(payload, "max_tokens"),
        stop=_stop(payload),
        temperature=_temperature(payload),
        stream=_stream(payload),
        include_usage=_include_usage(payload),
    )


def parse_chat_body(payload: dict[str, Any]) -> ChatBody:
    raw_messages = payload.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise _invalid("messages", "`messages` is required and must be a non-empty array")
    messages = tuple(_message(item, index) for index, item in enumerate(raw_messages))
    _reject_many_choices(payload)
    max_tokens = _max_tokens(payload, "max_completion_tokens")
    limit_field: TokenLimitField = "max_completion_tokens"
    if max_tokens is None:
        max_tokens, limit_field = _max_tokens(payload, "max_tokens"), "max_tokens"
    return ChatBody(
        model=_model(payload),
        messages=messages,
        max_tokens=max_tokens,
        token_limit_field=limit_field,
        stop=_stop(payload),
        temperature=_temperature(payload),
        stream=_stream(payload),
        include_usage=_include_usage(payload),
        tools=_tools(payload),
        tool_choice=_tool_choice(payload),
        options={k: v for k, v in payload.items() if k not in _CHAT_FIELDS and v is not None},
    )


def _invalid(param: str, message: str) -> GatewayError:
    return GatewayError(400, message, param=param, code="invalid_value")


def _model(payload: dict[str, Any]) -> str:
    model = payload.get("model")
    if model is None:
        return ""
    if not isinstance(model, str):
        raise _invalid("model", "`model` must be a string")
    return model


def _optional_str(payload: dict[str, Any], name: str) -> str | None:
    value = payload.get(name)
    if value is not None and not isinstance(value, str):
        raise _invalid(name, f"`{name}` must be a string")
    return value


def _max_tokens(payload: dict[str, Any], name: str) -> int | None:
    value = payload.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _invalid(name, f"`{name}` must be a positive integer")
    return value


def _stop(payload: dict[str, Any]) -> tuple[str, ...] | None:
    value = payload.get("stop")
    if value is None:
        return None
    if isinstance(value, str):
        return (value,) if value else None
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        if len(value) > MAX_STOP_SEQUENCES:
            raise _invalid("stop", f"`stop` takes at most {MAX_STOP_SEQUENCES} sequences")
        return tuple(item for item in value if item) or None
    raise _invalid("stop", "`stop` must be a string or an array of strings")


def _temperature(payload: dict[str, Any]) -> float | None:
    value = payload.get("temperature")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 2:
        raise _invalid("temperature", "`temperature` must be a number from 0 to 2")
    return float(value)


def _stream(payload: dict[str, Any]) -> bool:
    value = payload.get("stream")
    if value is not None and not isinstance(value, bool):
        raise _invalid("stream", "`stream` must be a boolean")
    return bool(value)


def _include_usage(payload: dict[str, Any]) -> bool:
    options = payload.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, dict):
        raise _invalid("stream_options", "`stream_options` must be an object")
    return options.get("include_usage") is True


def _reject_many_choices(payload: dict[str, Any]) -> None:
    n = payload.get("n")
    if n is not None and n != 1:
        raise _invalid("n", "only one choice per request is supported (`n` = 1)")


def _tools(payload: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    tools = payload.get("tools")
    if tools is None:
        return ()
    if not isinstance(tools, list):
        raise _invalid("tools", "`tools` must be an array")
    for index, tool in enumerate(tools):
        param = f"tools[{index}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise _invalid(param, f"`{param}` must be an object with a `type`")
        function = tool.get("function")
        if tool["type"] == "function" and (
            not isinstance(function, dict) or not isinstance(function.get("name"), str)
        ):
            raise _invalid(f"{param}.function", f"`{param}.function` must name the function")
    return tuple(tools)


def _tool_choice(payload: dict[str, Any]) -> Any:
    choice = payload.get("tool_choice")
    if choice is None or isinstance(choice, str | dict):
        return choice
    raise _invalid("tool_choice", "`tool_choice` must be a string or an object")


def _message(item: Any, index: int) -> ChatMessage:
    """One message; the names of its fields in an error (`messages[3].role`) are written only
    for the error: an agent's turn sends dozens of messages."""
    if not isinstance(item, dict):
        param = f"messages[{index}]"
        raise _invalid(param, f"`{param}` must be an object")
    role = item.get("role")
    if not isinstance(role, str) or role not in _CHAT_ROLE_SET:
        param = f"messages[{index}].role"
        raise _invalid(param, f"`{param}` must be one of {', '.join(CHAT_ROLES)}")
    content = item.get("content")
    parts: tuple[dict[str, Any], ...] = ()
    if isinstance(content, str):
        text = content
    elif content is None:
        text = ""
    elif isinstance(content, list):
        for i, part in enumerate(content):
            _check_part(part, f"messages[{index}].content[{i}]")
        text = "".join(part["text"] for part in content if part["type"] == "text")
        if any(part["type"] != "text" for part in content):
            parts = tuple(content)  # images and the like go on as sent
    else:
        param = f"messages[{index}].content"
        raise _invalid(param, f"`{param}` must be a string or an array")
    name = item.get("name")
    tool_call_id = item.get("tool_call_id")
    calls = item.get("tool_calls")
    return ChatMessage(
        role=role,
        content=text,
        parts=parts,
        tool_calls=() if calls is None else _tool_calls(calls, index),
        tool_call_id=tool_call_id if isinstance(tool_call_id, str) else "",
        name=name if isinstance(name, str) else "",
    )


def _check_part(part: Any, param: str) -> None:
    if not isinstance(part, dict) or not isinstance(part.get("type"), str):
        raise _invalid(param, f"`{param}` must be a content part with a `type`")
    if part["type"] == "text" and not isinstance(part.get("text"), str):
        raise _invalid(f"{param}.text", f"`{param}.text` must be a string")


def _tool_calls(value: Any, message: int) -> tuple[ToolCall, ...]:
    if not isinstance(value, list):
        param = f"messages[{message}].tool_calls"
        raise _invalid(param, f"`{param}` must be an array")
    calls = []
    for index, call in enumerate(value):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            here = f"messages[{message}].tool_calls[{index}]"
            raise _invalid(here, f"`{here}` must be a function call with a name")
        arguments = function.get("arguments")
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments)
        if not isinstance(arguments, str):
            arguments = "{}"
        call_id = call.get("id")
        calls.append(
            ToolCall(call_id if isinstance(call_id, str) else "", function["name"], arguments)
        )
    return tuple(calls)


# --- responses -----------------------------------------------------------------------------


@dataclass(slots=True)
class ResponseIds:
    """The id and creation time shared by a response and all its stream chunks."""

    id: str
    created: int

    @classmethod
    def new(cls, prefix: str) -> ResponseIds:
        return cls(f"{prefix}-{uuid.uuid4().hex}", int(time.time()))


def usage_body(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def completion_chunk(
    ids: ResponseIds, model: str, text: str, finish_reason: str | None
) -> dict[str, Any]:
    choice = {"index": 0, "text": text, "finish_reason": finish_reason, "logprobs": None}
    return {
        "id": ids.id,
        "object": "text_completion",
        "created": ids.created,
        "model": model,
        "choices": [choice],
    }


def completion_response(
    ids: ResponseIds, model: str, text: str, finish_reason: str, usage: dict[str, int]
) -> dict[str, Any]:
    return {**completion_chunk(ids, model, text, finish_reason), "usage": usage}


def usage_chunk(ids: ResponseIds, model: str, obj: str, usage: dict[str, int]) -> dict[str, Any]:
    """The extra last chunk `stream_options.include_usage` asks for: no choices, only usage."""
    return {
        "id": ids.id,
        "object": obj,
        "created": ids.created,
        "model": model,
        "choices": [],
        "usage": usage,
    }


def chat_response(
    ids: ResponseIds,
    model: str,
    text: str,
    finish_reason: str,
    usage: dict[str, int],
    tool_calls: tuple[ToolCall, ...] = (),
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
    if not tool_calls:
        message["content"] = text
    else:
        message["tool_calls"] = [_tool_call(call) for call in tool_calls]
    return {
        "id": ids.id,
        "object": "chat.completion",
        "created": ids.created,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
        ],
        "usage": usage,
    }


def _tool_call(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def chat_chunk(
    ids: ResponseIds, model: str, delta: dict[str, Any], finish_reason: str | None = None
) -> dict[str, Any]:
    return {
        "id": ids.id,
        "object": "chat.completion.chunk",
        "created": ids.created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def tool_call_delta(piece: ToolCallDelta) -> dict[str, Any]:
    """A chunk's `delta` for a piece of a tool call: the first piece of a call (the one with
    its id) carries id, type and name; every piece has the call's `index`."""
    call: dict[str, Any] = {"index": piece.index}
    if piece.id:
        call.update(id=piece.id, type="function")
        call["function"] = {"name": piece.name, "arguments": piece.arguments}
    else:
        call["function"] = {"arguments": piece.arguments}
    return {"tool_calls": [call]}
