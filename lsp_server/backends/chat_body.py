"""The body of an OpenAI-compatible chat call, with what the endpoint's kind understands.

An `openai` endpoint (and llama.cpp's and Ollama's servers, which ignore what they do not know)
gets every field the client sent, unknown ones too. The hosted providers that refuse fields
they do not document get only those they do, under their own names where they differ
(Mistral's `random_seed`); the rest is dropped with a debug note, so a field clients commonly
send never turns into an upstream 4xx.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from lsp_server.backends.base import ChatMessage, ChatRequest, ToolCall
from lsp_server.config.model import EndpointConfig, EndpointKind

log = logging.getLogger(__name__)

MAX_STOP_SEQUENCES = 4  # what OpenAI-compatible APIs accept; the caller applies any others

# Fields (beyond model, messages, the token cap, temperature, stop, tools and tool_choice) each
# strict kind documents; a kind not named here takes every field.
_DOCUMENTED_FIELDS: dict[EndpointKind, frozenset[str]] = {
    "mistral": frozenset(
        {
            "top_p",
            "response_format",
            "parallel_tool_calls",
            "presence_penalty",
            "frequency_penalty",
            "prediction",
            "safe_prompt",
            "random_seed",
        }
    ),
    "deepseek": frozenset(
        {
            "top_p",
            "response_format",
            "presence_penalty",
            "frequency_penalty",
            "logprobs",
            "top_logprobs",
        }
    ),
    "inception": frozenset(
        {
            "top_p",
            "response_format",
            "presence_penalty",
            "frequency_penalty",
            "reasoning_effort",
            "diffusing",
        }
    ),
}
# A field a kind knows under another name.
_RENAMED: dict[EndpointKind, dict[str, str]] = {"mistral": {"seed": "random_seed"}}
# Only OpenAI knows the `developer` role; elsewhere it is a system message.
_DEVELOPER_ROLE_KINDS = frozenset({"openai"})
# Only OpenAI knows `max_completion_tokens`; elsewhere the cap is `max_tokens`.
_COMPLETION_TOKENS_KINDS = frozenset({"openai"})


def chat_body(config: EndpointConfig, request: ChatRequest) -> dict[str, Any]:
    """The streamed chat-completion body for `request` at the endpoint `config` describes."""
    kind = config.kind
    limit_field = request.token_limit_field if kind in _COMPLETION_TOKENS_KINDS else "max_tokens"
    body: dict[str, Any] = {
        "model": config.model,
        "messages": [
            openai_message(m, developer_role=kind in _DEVELOPER_ROLE_KINDS)
            for m in request.messages
        ],
        limit_field: request.max_tokens,
        "stream": True,
    }
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.stop:
        body["stop"] = list(request.stop)[:MAX_STOP_SEQUENCES]
    if request.tools:
        body["tools"] = [dict(tool) for tool in request.tools]
    if request.tool_choice is not None:
        body["tool_choice"] = request.tool_choice
    body.update(_options(config, request.options))
    return body


def openai_message(message: ChatMessage, *, developer_role: bool = True) -> dict[str, Any]:
    """A message in the OpenAI shape, tool calls and tool-call ids kept."""
    role = message.role
    if role == "developer" and not developer_role:
        role = "system"
    out: dict[str, Any] = {"role": role}
    if message.parts:
        out["content"] = [dict(part) for part in message.parts]
    elif message.tool_calls and not message.content:
        out["content"] = None
    else:
        out["content"] = message.content
    if message.tool_calls:
        out["tool_calls"] = [openai_tool_call(call) for call in message.tool_calls]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    if message.name:
        out["name"] = message.name
    return out


def openai_tool_call(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def _options(config: EndpointConfig, options: Mapping[str, Any]) -> dict[str, Any]:
    documented = _DOCUMENTED_FIELDS.get(config.kind)
    renamed = _RENAMED.get(config.kind, {})
    taken: dict[str, Any] = {}
    for name, value in options.items():
        name = renamed.get(name, name)
        if documented is None or name in documented:
            taken[name] = value
        else:
            log.debug("%s: dropped %r, which %s endpoints refuse", config.name, name, config.kind)
    return taken
