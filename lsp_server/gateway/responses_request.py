"""A Responses API request (`POST /v1/responses`) as a chat completion.

The gateway keeps no state: a request carries its whole conversation in `input` (what Codex CLI
and the Agents SDK send with `store: false`), so it translates into one chat-completion body
that the chat path routes, scans and asks as it does any chat. `previous_response_id` and
everything else that would need a stored response or conversation get a 400 that says to send
the whole conversation instead.

Request, field by field: `input` (a string, or items: messages with `input_text`,
`output_text`, `input_image` and `input_file` parts, `function_call` and `function_call_output`)
becomes `messages`, `instructions` a leading system message; function `tools` are nested under
`function` as chat wants them (hosted tools, which no chat upstream runs, are left out);
`tool_choice`, `parallel_tool_calls`, `text.format` (as `response_format`), `text.verbosity`,
`max_output_tokens` (as `max_completion_tokens`), `reasoning.effort` (as `reasoning_effort`),
`metadata`, `user` and the sampling fields go along only when sent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from lsp_server.gateway.openai_wire import GatewayError

log = logging.getLogger(__name__)

MESSAGE_ROLES = ("user", "assistant", "system", "developer")
# Fields the Responses API has that need a stored response or conversation.
_STATEFUL_FIELDS = {
    "previous_response_id": "this gateway keeps no responses",
    "conversation": "this gateway keeps no conversations",
    "prompt": "this gateway keeps no prompt templates",
}
# Fields that go to the chat completion under the same name and meaning, when sent.
_SAME_NAME_FIELDS = (
    "temperature",
    "top_p",
    "user",
    "metadata",
    "service_tier",
    "safety_identifier",
    "prompt_cache_key",
)


@dataclass(frozen=True, slots=True)
class ResponsesRequest:
    """A Responses request: the chat completion that answers it, and what its response
    object repeats of it."""

    chat: dict[str, Any]
    stream: bool
    echo: dict[str, Any]


# --- request ----------------------------------------------------------------------------------


def parse_responses_body(payload: dict[str, Any]) -> ResponsesRequest:
    """The chat-completion body for a Responses request; a `GatewayError` (400, naming the
    field) for anything it cannot carry."""
    for name, why in _STATEFUL_FIELDS.items():
        if payload.get(name) is not None:
            raise _invalid(
                name,
                f"`{name}` is not supported: {why}; send the whole conversation in `input` "
                "(and `store: false`)",
                code="unsupported_parameter",
            )
    if payload.get("background") is True:
        raise _invalid(
            "background",
            "`background: true` is not supported: this gateway keeps no responses to poll",
            code="unsupported_parameter",
        )
    stream = payload.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise _invalid("stream", "`stream` must be a boolean")
    model = payload.get("model")
    if model is not None and not isinstance(model, str):
        raise _invalid("model", "`model` must be a string")
    instructions = payload.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise _invalid("instructions", "`instructions` must be a string")

    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    messages.extend(_messages(payload.get("input")))
    chat: dict[str, Any] = {"model": model or "auto", "messages": messages}
    if stream:
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}

    tools = _tools(payload.get("tools"))
    if tools:
        chat["tools"] = tools
        tool_choice = _tool_choice(payload.get("tool_choice"))
        if tool_choice is not None:
            chat["tool_choice"] = tool_choice
        if payload.get("parallel_tool_calls") is not None:
            chat["parallel_tool_calls"] = _bool(payload, "parallel_tool_calls")
    max_output_tokens = payload.get("max_output_tokens")
    if max_output_tokens is not None:
        if isinstance(max_output_tokens, bool) or not isinstance(max_output_tokens, int):
            raise _invalid("max_output_tokens", "`max_output_tokens` must be a positive integer")
        if max_output_tokens < 1:
            raise _invalid("max_output_tokens", "`max_output_tokens` must be a positive integer")
        chat["max_completion_tokens"] = max_output_tokens
    chat.update(_text_config(payload.get("text")))
    effort = _reasoning_effort(payload.get("reasoning"))
    if effort is not None:
        chat["reasoning_effort"] = effort
    for name in _SAME_NAME_FIELDS:
        if payload.get(name) is not None:
            chat[name] = payload[name]
    return ResponsesRequest(chat=chat, stream=bool(stream), echo=_echo(payload, model or "auto"))


def _echo(payload: dict[str, Any], model: str) -> dict[str, Any]:
    """The request fields a response object states, with the API's defaults."""
    return {
        "model": model,
        "instructions": payload.get("instructions"),
        "tools": payload.get("tools") or [],
        "tool_choice": payload.get("tool_choice") or "auto",
        "parallel_tool_calls": payload.get("parallel_tool_calls", True) is not False,
        "temperature": payload.get("temperature"),
        "top_p": payload.get("top_p"),
        "max_output_tokens": payload.get("max_output_tokens"),
        "metadata": payload.get("metadata") or {},
        "text": payload.get("text") or {"format": {"type": "text"}},
        "reasoning": payload.get("reasoning"),
        "user": payload.get("user"),
        "previous_response_id": None,
        "truncation": "disabled",
        "store": False,
    }


def _messages(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise _invalid("input", "`input` is required: a string or a non-empty array of items")
    messages: list[dict[str, Any]] = []
    for index, item in enumerate(value):
        param = f"input[{index}]"
        if not isinstance(item, dict):
            raise _invalid(param, f"`{param}` must be an object")
        kind = item.get("type", "message")
        if kind == "message":
            messages.append(_message(item, param))
        elif kind == "function_call":
            _add_tool_call(messages, item, param)
        elif kind == "function_call_output":
            messages.append(_tool_result(item, param))
        elif kind == "reasoning":
            continue  # a model's own reasoning, which a chat upstream cannot take back
        elif kind == "item_reference":
            raise _invalid(
                f"{param}.type",
                f"`{param}` refers to a stored item; this gateway keeps none: send the item",
                code="unsupported_parameter",
            )
        else:
            raise _invalid(
                f"{param}.type",
                f"`{param}` is a {kind!r} item; this gateway takes messages, `function_call` "
                "and `function_call_output`",
            )
    return messages


def _message(item: dict[str, Any], param: str) -> dict[str, Any]:
    role = item.get("role")
    if role not in MESSAGE_ROLES:
        raise _invalid(f"{param}.role", f"`{param}.role` must be one of {', '.join(MESSAGE_ROLES)}")
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise _invalid(f"{param}.content", f"`{param}.content` must be a string or an array")
    parts = [_part(part, f"{param}.content[{i}]") for i, part in enumerate(content)]
    if role == "assistant" or all(part["type"] == "text" for part in parts):
        if any(part["type"] != "text" for part in parts):
            raise _invalid(f"{param}.content", f"`{param}.content` of the assistant is text only")
        # Text alone travels as a string, which every chat upstream takes.
        return {"role": role, "content": "".join(part["text"] for part in parts)}
    return {"role": role, "content": parts}


def _part(part: Any, param: str) -> dict[str, Any]:
    if not isinstance(part, dict):
        raise _invalid(param, f"`{param}` must be a content part")
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text", "refusal"):
        text = part.get("refusal") if kind == "refusal" else part.get("text")
        if not isinstance(text, str):
            raise _invalid(f"{param}.text", f"`{param}.text` must be a string")
        return {"type": "text", "text": text}
    if kind == "input_image":
        url = part.get("image_url")
        if not isinstance(url, str) or not url:
            raise _invalid(
                f"{param}.image_url",
                f"`{param}` needs an `image_url` (a data: URL works); this gateway has no "
                "Files API for `file_id`",
            )
        image: dict[str, Any] = {"url": url}
        if isinstance(part.get("detail"), str):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    if kind == "input_file":
        data = part.get("file_data")
        if not isinstance(data, str) or not data:
            raise _invalid(
                f"{param}.file_data",
                f"`{param}` needs `file_data`; this gateway has no Files API for `file_id` "
                "and fetches no `file_url`",
            )
        file: dict[str, Any] = {"file_data": data}
        if isinstance(part.get("filename"), str):
            file["filename"] = part["filename"]
        return {"type": "file", "file": file}
    raise _invalid(
        f"{param}.type",
        f"`{param}` is a {kind!r} part; this gateway takes `input_text`, `output_text`, "
        "`input_image` and `input_file`",
    )


def _add_tool_call(messages: list[dict[str, Any]], item: dict[str, Any], param: str) -> None:
    """A call joins the assistant turn before it, so parallel calls share one message and
    the tool results follow it, as chat requires."""
    name, call_id, arguments = item.get("name"), item.get("call_id"), item.get("arguments")
    if not isinstance(name, str) or not name:
        raise _invalid(f"{param}.name", f"`{param}.name` must name the function")
    if not isinstance(call_id, str) or not call_id:
        raise _invalid(f"{param}.call_id", f"`{param}.call_id` must be a string")
    if not isinstance(arguments, str):
        raise _invalid(f"{param}.arguments", f"`{param}.arguments` must be a JSON string")
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant":
        last.setdefault("tool_calls", []).append(call)
        return
    messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _tool_result(item: dict[str, Any], param: str) -> dict[str, Any]:
    call_id, output = item.get("call_id"), item.get("output")
    if not isinstance(call_id, str) or not call_id:
        raise _invalid(f"{param}.call_id", f"`{param}.call_id` must be a string")
    if isinstance(output, list):
        parts = [_part(part, f"{param}.output[{i}]") for i, part in enumerate(output)]
        if any(part["type"] != "text" for part in parts):
            raise _invalid(
                f"{param}.output",
                f"`{param}.output` holds an image or file, which a chat tool result cannot carry",
            )
        output = "".join(part["text"] for part in parts)
    if not isinstance(output, str):
        raise _invalid(f"{param}.output", f"`{param}.output` must be a string or an array")
    return {"role": "tool", "tool_call_id": call_id, "content": output}


def _tools(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _invalid("tools", "`tools` must be an array")
    tools = []
    for index, tool in enumerate(value):
        param = f"tools[{index}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise _invalid(param, f"`{param}` must be an object with a `type`")
        if tool["type"] != "function":
            log.debug("%s: a %r tool has no chat equivalent; left out", param, tool["type"])
            continue
        if not isinstance(tool.get("name"), str) or not tool["name"]:
            raise _invalid(f"{param}.name", f"`{param}.name` must name the function")
        function = {
            key: tool[key]
            for key in ("name", "description", "parameters", "strict")
            if tool.get(key) is not None
        }
        tools.append({"type": "function", "function": function})
    return tools


def _tool_choice(value: Any) -> Any:
    if value is None or value in ("auto", "none", "required"):
        return value
    if isinstance(value, dict) and value.get("type") == "function":
        if not isinstance(value.get("name"), str):
            raise _invalid("tool_choice.name", "`tool_choice.name` must name the function")
        return {"type": "function", "function": {"name": value["name"]}}
    if isinstance(value, dict) and value.get("type") == "allowed_tools":
        allowed = [
            {"type": "function", "function": {"name": tool["name"]}}
            for tool in value.get("tools") or []
            if isinstance(tool, dict) and tool.get("type") == "function"
        ]
        mode = value.get("mode", "auto")
        return {"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": allowed}}
    raise _invalid(
        "tool_choice",
        "`tool_choice` must be auto, none, required, a function or allowed tools",
    )


def _text_config(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _invalid("text", "`text` must be an object")
    out: dict[str, Any] = {}
    fmt = value.get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        if not isinstance(fmt.get("name"), str) or not isinstance(fmt.get("schema"), dict):
            raise _invalid("text.format", "`text.format` of json_schema needs `name` and `schema`")
        schema = {
            key: fmt[key]
            for key in ("name", "schema", "strict", "description")
            if fmt.get(key) is not None
        }
        out["response_format"] = {"type": "json_schema", "json_schema": schema}
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        out["response_format"] = {"type": "json_object"}
    elif fmt is not None and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
        raise _invalid("text.format", "`text.format` must be text, json_object or json_schema")
    if value.get("verbosity") is not None:
        out["verbosity"] = value["verbosity"]
    return out


def _reasoning_effort(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _invalid("reasoning", "`reasoning` must be an object")
    effort = value.get("effort")
    if effort is not None and not isinstance(effort, str):
        raise _invalid("reasoning.effort", "`reasoning.effort` must be a string")
    return effort


def _bool(payload: dict[str, Any], name: str) -> bool:
    value = payload[name]
    if not isinstance(value, bool):
        raise _invalid(name, f"`{name}` must be a boolean")
    return value


def _invalid(param: str, message: str, *, code: str = "invalid_value") -> GatewayError:
    return GatewayError(400, message, param=param, code=code)
