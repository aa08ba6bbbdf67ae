"""A scripted tool-using upstream: it calls `get_weather` when offered it, then answers."""

from __future__ import annotations

from typing import Any

from bench.harness.fake_llm_server import Behaviour

ANTHROPIC_KEY_ENV = "TEST_GATEWAY_ANTHROPIC_KEY"
ANTHROPIC_KEY = "test-anthropic-key"
WEATHER_ARGUMENTS = '{"city": "Paris", "unit": "celsius"}'
ANSWER_AFTER_TOOL = "It is 21 degrees in Paris."


def _answered_a_tool(payload: dict[str, Any]) -> bool:
    """Whether the conversation's last turn is a tool's result (OpenAI or Anthropic shape)."""
    last = (payload.get("messages") or [{}])[-1]
    if last.get("role") == "tool":
        return True
    content = last.get("content")
    return isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content
    )


def weather_agent(arguments: str = WEATHER_ARGUMENTS) -> Behaviour:
    """An upstream that calls `get_weather` when offered it, and answers in words once the
    tool's result is in the conversation."""

    def text(payload: dict[str, Any]) -> str:
        return ANSWER_AFTER_TOOL if _answered_a_tool(payload) or not payload.get("tools") else ""

    def tool_calls(payload: dict[str, Any]) -> tuple[dict[str, Any], ...]:
        if _answered_a_tool(payload) or not payload.get("tools"):
            return ()
        return ({"name": "get_weather", "arguments": arguments},)

    return Behaviour(text=text, tool_calls=tool_calls, chunk_chars=5)
