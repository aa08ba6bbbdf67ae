"""The pieces of OpenAI's chat and completion chunks that every reader of them needs: the first
choice, the usage, and a tool call's pieces made regular (`ToolCallStream`)."""

from __future__ import annotations

import json
from typing import Any

from lsp_server.backends.base import ToolCallDelta, Usage, token_count
from lsp_server.backends.tool_calls import ToolCallStream


def first_choice(payload: dict[str, Any]) -> dict[str, Any] | None:
    choices = payload.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return choices[0]
    return None


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def tool_call_pieces(
    calls: ToolCallStream, raw: Any, position: int, streamed: bool
) -> list[ToolCallDelta]:
    """One upstream tool-call object (a stream piece or a whole call) as regular pieces."""
    if not isinstance(raw, dict):
        return []
    function = raw.get("function")
    if not isinstance(function, dict):
        function = {}
    index = raw.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        index = None if streamed else position
    return list(
        calls.feed(
            index,
            id=_str(raw.get("id")),
            name=_str(function.get("name")),
            arguments=_arguments(function.get("arguments")),
        )
    )


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _arguments(value: Any) -> str | None:
    """Arguments as JSON text; an upstream that sends an object instead (Ollama) is
    written out."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return None


def count_usage(payload: dict[str, Any], usage: Usage) -> None:
    """Take the upstream's counts when it reports any; zeros (some proxies send them on every
    chunk) leave the estimate standing, and so does a field that is not a sane count: usage is
    advisory, never fatal."""
    reported = payload.get("usage")
    if not isinstance(reported, dict):
        return
    prompt = token_count(reported.get("prompt_tokens"))
    completion = token_count(reported.get("completion_tokens"))
    if completion:
        usage.completion_tokens = completion
        usage.reported = True
    if prompt:
        usage.prompt_tokens = prompt
