"""Fill-in-the-middle for chat models: endpoints without a FIM completion API are asked, in
words, for the text that belongs at a cursor marker in the file."""

from __future__ import annotations

from lsp_server.backends.base import ChatMessage, CompletionRequest, context_within
from lsp_server.backends.context_prompt import chat_context_section

CURSOR_MARKER = "<CURSOR>"


def fim_chat_messages(
    request: CompletionRequest, context_tokens: int = 0
) -> tuple[ChatMessage, ...]:
    """A system message with the rules of the game and a user message with the file, after
    the context beyond it that fits `context_tokens`."""
    scope = (
        "Complete only the rest of the current line."
        if request.single_line
        else "Complete as much as naturally belongs there: a line, a statement or a block."
    )
    system = (
        "You are a code completion engine inside an editor. You receive a file with the marker "
        f"{CURSOR_MARKER} where the cursor is. Reply with only the text to insert at "
        f"{CURSOR_MARKER}, exactly as it should appear in the file: no code fences, no "
        "explanation, no marker, and do not repeat code that comes before or after the cursor. "
        f"{scope} If nothing should be inserted, reply with nothing."
    )
    header = [f"Language: {request.language or 'unknown'}"]
    if request.path:
        header.insert(0, f"File: {request.path}")
    context = chat_context_section(context_within(request.context, context_tokens))
    user = context + "\n".join(header) + "\n\n" + request.prefix + CURSOR_MARKER + request.suffix
    return ChatMessage("system", system), ChatMessage("user", user)
