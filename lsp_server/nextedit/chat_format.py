"""The next-edit prompt for any chat model (and the local one): an instruction, the context,
and the region to rewrite; the answer is the region in one fenced block.

The region carries no cursor mark: with one just after a renamed word, Qwen2.5-Coder 0.5B
takes the word as still being typed and answers "no change", where without it it carries the
rename to the uses below (bench/README.md, "Next-edit quality").
"""

from __future__ import annotations

import re

from lsp_server.backends.base import ChatMessage
from lsp_server.nextedit.request import EditRequest

REGION_START = "<|editable_region_start|>"
REGION_END = "<|editable_region_end|>"

SYSTEM = (
    "You predict the next edit a programmer makes. You are shown their recent edits as "
    "unified diffs, oldest first, and the file they are editing, in which the region between "
    f"{REGION_START} and {REGION_END} may be rewritten. Reply with the whole region as it "
    "should read after their next edit, in one fenced code block, without the markers. If "
    "nothing should change, reply with the region unchanged."
)

_FENCE = re.compile(
    r"^ {0,3}(`{3,}|~{3,})[^\n]*\n(?P<body>.*?)\n {0,3}\1[ \t]*$", re.DOTALL | re.MULTILINE
)


def chat_messages(request: EditRequest, context: tuple[int, int]) -> tuple[ChatMessage, ...]:
    text, (start, end) = request.text, request.region
    parts = []
    for chunk in request.snippets:
        parts.append(f"Recently viewed, {chunk.path}:\n```\n{chunk.text}\n```")
    if request.history:
        diffs = "\n".join(edit.diff for edit in request.history)
        parts.append(f"Recent edits:\n```diff\n{diffs}\n```")
    excerpt = (
        text[context[0] : start]
        + f"{REGION_START}\n"
        + text[start:end]
        + f"\n{REGION_END}"
        + text[end : context[1]]
    )
    parts.append(f"File {request.path}:\n```{request.language}\n{excerpt}\n```")
    parts.append("Rewrite the region with the next edit.")
    return (ChatMessage("system", SYSTEM), ChatMessage("user", "\n\n".join(parts)))


def read_chat_answer(answer: str) -> str | None:
    """The fenced region of the answer; an answer without a closed fence is malformed (one
    left open was cut short by the token cap: the rest of its region is missing)."""
    match = _FENCE.search(answer)
    if match is None:
        raise ValueError("the answer has no closed fenced code block")
    body = match["body"]
    for marker in (REGION_START, REGION_END):  # a marker echoed on a line of its own
        body = body.replace(f"{marker}\n", "").replace(f"\n{marker}", "").replace(marker, "")
    return body
