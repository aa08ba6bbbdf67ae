"""What llama-cpp-python's chat functions take from a conversation and give back in pieces."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lsp_server.backends.base import ChatEvent, ChatMessage, ToolCallDelta

if TYPE_CHECKING:
    from llama_cpp import Llama

# The chat format llama-cpp-python gives a model it renders with the model's own template.
OWN_TEMPLATE = "chat_template.default"


def chat_messages(messages: Sequence[ChatMessage], *, fold_system: bool) -> list[dict[str, str]]:
    """Messages for llama-cpp-python; for Gemma, system text opens the first user turn."""
    plain = [
        {"role": "system" if m.role == "developer" else m.role, "content": m.content}
        for m in messages
    ]
    if not fold_system:
        return plain
    system = "\n\n".join(m["content"] for m in plain if m["role"] == "system")
    turns = [m for m in plain if m["role"] != "system"]
    if system and turns and turns[0]["role"] == "user":
        turns[0] = {"role": "user", "content": f"{system}\n\n{turns[0]['content']}"}
    elif system:
        turns.insert(0, {"role": "user", "content": system})
    return turns


def tool_chat_events(chunk: Any) -> list[ChatEvent]:
    """The text and tool-call pieces of one chunk of the function-calling handler."""
    delta = chunk["choices"][0].get("delta") or {}
    events: list[ChatEvent] = []
    if delta.get("content"):
        events.append(delta["content"])
    for position, call in enumerate(delta.get("tool_calls") or []):
        function = call.get("function") or {}
        events.append(
            ToolCallDelta(
                call.get("index", position),
                id=call.get("id") or "",
                name=function.get("name") or "",
                arguments=function.get("arguments") or "",
            )
        )
    return events


def own_template_prompt(llm: Llama, messages: Sequence[ChatMessage]) -> list[int] | None:
    """The prompt tokens llama-cpp-python's chat completion reads for `messages`, where it
    renders them with the model's own template; None where it renders them another way (a
    named chat format, such as Gemma's), which only its chat completion knows."""
    template = llm.metadata.get("tokenizer.chat_template")
    if llm.chat_format != OWN_TEMPLATE or not isinstance(template, str):
        return None
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    def text_of(token: int) -> str:
        return "" if token == -1 else llm.detokenize([token], special=True).decode(errors="replace")

    formatter = Jinja2ChatFormatter(
        template=template, eos_token=text_of(llm.token_eos()), bos_token=text_of(llm.token_bos())
    )
    text = formatter(messages=chat_messages(messages, fold_system=False)).prompt  # type: ignore[arg-type]
    return llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
