"""Mercury's next-edit prompt (Inception's `/v1/edit/completions`), written and read.

One user message: the recently viewed snippets, the current file with the editable region
between `<|code_to_edit|>` and `<|/code_to_edit|>` and the cursor as `<|cursor|>`, and the edit
history as unified diffs, oldest first. The answer, in `choices[0].message.content`, is the
rewritten region, possibly fenced and possibly inside the region's tags; none means no edit.
Mercury-style clients send the same prompt to the gateway, which reads it back
(`parse_mercury_prompt`) to route it to any edit endpoint.
"""

from __future__ import annotations

import re

from lsp_server.backends.base import ChatMessage, ContextChunk
from lsp_server.nextedit.request import EditRequest, HistoryEdit

SNIPPETS_OPEN = "<|recently_viewed_code_snippets|>"
SNIPPETS_CLOSE = "<|/recently_viewed_code_snippets|>"
SNIPPET_OPEN = "<|recently_viewed_code_snippet|>"
SNIPPET_CLOSE = "<|/recently_viewed_code_snippet|>"
FILE_OPEN, FILE_CLOSE = "<|current_file_content|>", "<|/current_file_content|>"
REGION_OPEN, REGION_CLOSE = "<|code_to_edit|>", "<|/code_to_edit|>"
HISTORY_OPEN, HISTORY_CLOSE = "<|edit_diff_history|>", "<|/edit_diff_history|>"
CURSOR = "<|cursor|>"
SNIPPET_PATH = "code_snippet_file_path: "
FILE_PATH = "current_file_path: "
MARKERS = (
    SNIPPETS_OPEN,
    SNIPPETS_CLOSE,
    SNIPPET_OPEN,
    SNIPPET_CLOSE,
    FILE_OPEN,
    FILE_CLOSE,
    HISTORY_OPEN,
    HISTORY_CLOSE,
)


class MalformedPrompt(ValueError):
    """A client's next-edit prompt lacks what the gateway needs to read it."""


def mercury_prompt(request: EditRequest, context: tuple[int, int]) -> str:
    """The user message for `request`, showing `text[context[0]:context[1]]` of the file."""
    snippets = "\n".join(
        f"{SNIPPET_OPEN}\n{SNIPPET_PATH}{chunk.path}\n{chunk.text}\n{SNIPPET_CLOSE}"
        for chunk in request.snippets
    )
    start, end = request.region
    cursor = request.cursor
    text = request.text
    file_content = (
        text[context[0] : start]
        + f"{REGION_OPEN}\n"
        + text[start:cursor]
        + CURSOR
        + text[cursor:end]
        + f"\n{REGION_CLOSE}"
        + text[end : context[1]]
    )
    history = "\n".join(edit.diff for edit in request.history)
    return (
        f"{SNIPPETS_OPEN}\n{snippets}\n{SNIPPETS_CLOSE}\n\n"
        f"{FILE_OPEN}\n{FILE_PATH}{request.path}\n{file_content}\n{FILE_CLOSE}\n\n"
        f"{HISTORY_OPEN}\n{history}\n{HISTORY_CLOSE}\n"
    )


def mercury_messages(request: EditRequest, context: tuple[int, int]) -> tuple[ChatMessage, ...]:
    if request.mercury_messages:
        return request.mercury_messages
    return (ChatMessage("user", mercury_prompt(request, context)),)


def read_mercury_answer(answer: str) -> str | None:
    """The rewritten region of Mercury's answer; None when it proposes nothing. A fenced
    answer is read as Continue reads it: what lies between the first fence line and the last
    line break before a fence."""
    if not answer.strip():
        return None
    text = _unfenced(answer)
    if any(marker in text for marker in MARKERS):
        raise ValueError("the answer repeats the prompt's sections")
    opened = text.find(REGION_OPEN)
    if opened >= 0:
        text = text[opened + len(REGION_OPEN) :]
        text = text[1:] if text.startswith("\n") else text
    closed = text.rfind(REGION_CLOSE)
    if closed >= 0:
        text = text[:closed]
        text = text[:-1] if text.endswith("\n") else text
    return text.replace(CURSOR, "")


def _unfenced(answer: str) -> str:
    stripped = answer.lstrip()
    if not stripped.startswith(("```", "~~~")):
        return answer
    fence = stripped[:3]
    first_break = stripped.find("\n")
    if first_break < 0:
        return ""
    body = stripped[first_break + 1 :]
    last_fence = body.rfind(f"\n{fence}")
    if last_fence >= 0:
        return body[:last_fence]
    return body[:-3] if body.startswith(fence) else body


# --- reading a client's prompt -----------------------------------------------------------

_SNIPPET = re.compile(
    re.escape(SNIPPET_OPEN) + r"\n" + re.escape(SNIPPET_PATH) + r"(?P<path>[^\n]*)\n"
    r"(?P<text>.*?)\n?" + re.escape(SNIPPET_CLOSE),
    re.DOTALL,
)


def parse_mercury_prompt(content: str) -> EditRequest:
    """The request a Mercury-style client's user message describes (Continue's, Kilo's)."""
    file_start, file_end = content.find(FILE_OPEN), content.rfind(FILE_CLOSE)
    if file_start < 0 or file_end < file_start:
        raise MalformedPrompt(f"the prompt has no {FILE_OPEN} section")
    body = content[file_start + len(FILE_OPEN) : file_end]
    body = body[1:] if body.startswith("\n") else body
    path = "untitled"
    if body.startswith(FILE_PATH):
        line_end = body.find("\n")
        path = body[len(FILE_PATH) : line_end if line_end >= 0 else len(body)].strip() or path
        body = body[line_end + 1 :] if line_end >= 0 else ""
    body = body[:-1] if body.endswith("\n") else body
    open_at, close_at = body.find(REGION_OPEN), body.find(REGION_CLOSE)
    if open_at < 0 or close_at < open_at:
        raise MalformedPrompt(f"the prompt has no {REGION_OPEN}…{REGION_CLOSE} region")
    before = body[:open_at]
    region = body[open_at + len(REGION_OPEN) : close_at]
    after = body[close_at + len(REGION_CLOSE) :]
    region = region[1:] if region.startswith("\n") else region
    region = region[:-1] if region.endswith("\n") else region
    cursor_in_region = region.find(CURSOR)
    region = region.replace(CURSOR, "")
    before, after = before.replace(CURSOR, ""), after.replace(CURSOR, "")
    if cursor_in_region < 0:
        cursor_in_region = 0
    text = before + region + after
    start = len(before)
    return EditRequest(
        uri=path,
        path=path,
        text=text,
        cursor=start + cursor_in_region,
        region=(start, start + len(region)),
        history=_history(content, path),
        snippets=tuple(
            ContextChunk(m["path"].strip(), m["text"]) for m in _SNIPPET.finditer(content)
        ),
    )


def _history(content: str, path: str) -> tuple[HistoryEdit, ...]:
    start, end = content.find(HISTORY_OPEN), content.rfind(HISTORY_CLOSE)
    if start < 0 or end < start:
        return ()
    diff = content[start + len(HISTORY_OPEN) : end].strip("\n")
    return (HistoryEdit(path, path, diff),) if diff.strip() else ()
