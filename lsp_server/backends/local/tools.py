"""Tool calls from the local model, through llama-cpp-python's ChatML function-calling handler.

The handler (`chatml-function-calling`) writes the tools into a ChatML prompt and lets the model
choose, under a grammar, between a message and `functions.<name>:` followed by the arguments;
a named `tool_choice` forces that function, its arguments held to the tool's JSON schema by a
grammar. It is used for models whose own chat template is ChatML (Qwen and its kin), or for any
model when `[local] tool_calls = "chatml"` says so; `"off"` never offers tools locally.

The handler's template knows no `tool` turn, so a tool's result is given to the model as a user
turn naming the function it answers; `developer` turns are system turns; `required` with one
tool forces that tool (with several, the model chooses, as with `auto`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lsp_server.backends.base import ChatMessage

CHATML_MARK = "<|im_start|>"


def template_is_chatml(template: str) -> bool:
    return CHATML_MARK in template


def handler_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """The conversation as the ChatML function-calling template renders it."""
    names = {call.id: call.name for m in messages for call in m.tool_calls}
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            name = names.get(message.tool_call_id, "the function")
            out.append(
                {"role": "user", "content": f"functions.{name} returned:\n{message.content}"}
            )
            continue
        role = "system" if message.role == "developer" else message.role
        turn: dict[str, Any] = {"role": role, "content": message.content}
        if message.tool_calls:
            turn["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in message.tool_calls
            ]
        out.append(turn)
    return out


def handler_tool_choice(tools: Sequence[Mapping[str, Any]], choice: Any) -> Any:
    """The `tool_choice` the handler takes: "auto", "none" or a named function."""
    if isinstance(choice, Mapping) or choice == "none":
        return dict(choice) if isinstance(choice, Mapping) else choice
    if choice == "required" and len(tools) == 1:
        return {"type": "function", "function": {"name": tools[0]["function"]["name"]}}
    return "auto"
