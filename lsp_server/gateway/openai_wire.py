"""The OpenAI wire shapes the gateway reads and writes, checked by hand.

Request bodies are validated field by field so a client gets a 400 that names the field (`param`)
instead of a stack trace; response and stream-chunk bodies carry every field the OpenAI SDKs and
Zed's edit-prediction client require.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from lsp_server.backends.base import ChatMessage

# Stop strings a request may carry: the upstream gets the first four (what OpenAI-compatible
# APIs take) and the gateway applies the rest itself; this only bounds hostile bodies.
MAX_STOP_SEQUENCES = 256
CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")
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
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, code=self.code, param=self.param)


def error_body(
    status: int, message: str, *, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
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
    model: str
    messages: tuple[ChatMessage, ...]
    max_tokens: int | None
    stop: tuple[str, ...] | None
    temperature: float | None
    stream: bool
    include_usage: bool


def parse_json_object(raw: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(raw)
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
    return ChatBody(
        model=_model(payload),
        messages=messages,
        max_tokens=max_tokens if max_tokens is not None else _max_tokens(payload, "max_tokens"),
        stop=_stop(payload),
        temperature=_temperature(payload),
        stream=_stream(payload),
        include_usage=_include_usage(payload),
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


def _message(item: Any, index: int) -> ChatMessage:
    param = f"messages[{index}]"
    if not isinstance(item, dict):
        raise _invalid(param, f"`{param}` must be an object")
    role = item.get("role")
    if not isinstance(role, str) or role not in CHAT_ROLES:
        raise _invalid(f"{param}.role", f"`{param}.role` must be one of {', '.join(CHAT_ROLES)}")
    content = item.get("content")
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "".join(_text_part(part, f"{param}.content[{i}]") for i, part in enumerate(content))
    else:
        raise _invalid(f"{param}.content", f"`{param}.content` must be a string or an array")
    # The backends know system, user and assistant; the newer names map onto those.
    mapped = {"developer": "system", "tool": "user"}.get(role, role)
    return ChatMessage(role=mapped, content=text)


def _text_part(part: Any, param: str) -> str:
    if not isinstance(part, dict) or part.get("type") != "text":
        raise _invalid(param, f"`{param}` must be a text part (images are not supported)")
    text = part.get("text")
    if not isinstance(text, str):
        raise _invalid(f"{param}.text", f"`{param}.text` must be a string")
    return text


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
    ids: ResponseIds, model: str, text: str, finish_reason: str, usage: dict[str, int]
) -> dict[str, Any]:
    message = {"role": "assistant", "content": text}
    return {
        "id": ids.id,
        "object": "chat.completion",
        "created": ids.created,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": usage,
    }


def chat_chunk(
    ids: ResponseIds, model: str, delta: dict[str, str], finish_reason: str | None = None
) -> dict[str, Any]:
    return {
        "id": ids.id,
        "object": "chat.completion.chunk",
        "created": ids.created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def sse_event(payload: dict[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


SSE_DONE = sse_event("[DONE]")
