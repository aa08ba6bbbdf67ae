"""The prompt of Zed's open Zeta model (its first format), written, read and answered.

As Zed's `zeta_prompt` crate writes it for a raw completions API: an instruction, the user's
edits (`User edited <path>:` and a fenced diff each, oldest first), and the excerpt around the
cursor in a fence named by the path, with `<|editable_region_start|>`,
`<|user_cursor_is_here|>` and `<|editable_region_end|>`, then `### Response:`. The model
answers with the excerpt's region rewritten between the same markers. Zed itself sends this
prompt to an OpenAI-compatible `/v1/completions` (`prompt_format: "zeta"`); the gateway reads
it back (`parse_zeta_prompt`) and answers in the shape Zed reads (`zeta_answer`).
"""

from __future__ import annotations

import re

from lsp_server.nextedit.request import EditRequest, HistoryEdit

INSTRUCTION = (
    "### Instruction:\n"
    "You are a code completion assistant and your task is to analyze user edits and then "
    "rewrite an excerpt that the user provides, suggesting the appropriate edits within the "
    "excerpt, taking into account the cursor location.\n\n"
    "### User Edits:\n\n"
)
EXCERPT_HEADER = "\n\n### User Excerpt:\n\n"
RESPONSE_HEADER = "\n\n### Response:\n"
CURSOR = "<|user_cursor_is_here|>"
START_OF_FILE = "<|start_of_file|>"
REGION_START = "<|editable_region_start|>"
REGION_END = "<|editable_region_end|>"
STOP = (REGION_END, f"{REGION_END}\n", f"{REGION_END}\n\n", f"{REGION_END}\n\n\n")
# Lines of the file around the region in the excerpt (Zed sends about 150 tokens' worth).
ZETA_CONTEXT_LINES = 10

_EVENT = re.compile(r"User edited (?P<path>[^\n]*):\n```diff\n(?P<diff>.*?)\n```", re.DOTALL)


def zeta_prompt(request: EditRequest, context: tuple[int, int]) -> str:
    events = "\n\n".join(
        f"User edited {edit.path}:\n```diff\n{_hunks_only(edit.diff)}\n```"
        for edit in request.history
    )
    text, (start, end), cursor = request.text, request.region, request.cursor
    excerpt = f"```{request.path}\n"
    if context[0] == 0:
        excerpt += f"{START_OF_FILE}\n"
    excerpt += (
        text[context[0] : start]
        + f"{REGION_START}\n"
        + text[start:cursor]
        + CURSOR
        + text[cursor:end]
        + f"\n{REGION_END}"
        + text[end : context[1]]
        + "\n```"
    )
    return INSTRUCTION + events + EXCERPT_HEADER + excerpt + RESPONSE_HEADER


def read_zeta_answer(answer: str) -> str | None:
    """The rewritten region, as Zed reads it: between the region markers when they are
    there (a line break next to each belongs to the markers), the cursor marker dropped."""
    content = answer.replace(CURSOR, "")
    start = content.find(REGION_START)
    start = 0 if start < 0 else start + len(REGION_START)
    if content.startswith("\n", start):
        start += 1
    end = content.find(REGION_END)
    end = len(content) if end < 0 else end
    if end > 0 and content[end - 1] == "\n" and end - 1 >= start:
        end -= 1
    if start > end:
        return None
    return content[start:end]


def zeta_answer(region: str) -> str:
    """A rewritten region in the form Zed's Zeta client reads back."""
    return f"{REGION_START}\n{region}\n{REGION_END}"


def is_zeta_prompt(prompt: str) -> bool:
    return REGION_START in prompt and REGION_END in prompt and "### User Excerpt:" in prompt


def parse_zeta_prompt(prompt: str) -> EditRequest:
    """The request a Zeta prompt describes; ValueError when it is not one."""
    excerpt_at = prompt.find("### User Excerpt:")
    if excerpt_at < 0:
        raise ValueError("not a Zeta prompt: no '### User Excerpt:'")
    events = prompt[:excerpt_at]
    excerpt = prompt[excerpt_at + len("### User Excerpt:") :]
    response_at = excerpt.rfind("### Response:")
    if response_at >= 0:
        excerpt = excerpt[:response_at]
    excerpt = excerpt.strip("\n")
    fence_end = excerpt.find("\n")
    if not excerpt.startswith("```") or fence_end < 0:
        raise ValueError("not a Zeta prompt: the excerpt is not fenced")
    path = excerpt[3:fence_end].strip() or "untitled"
    body = excerpt[fence_end + 1 :]
    if body.endswith("```"):
        body = body[:-3]
    body = body[:-1] if body.endswith("\n") else body
    if body.startswith(f"{START_OF_FILE}\n"):
        body = body[len(START_OF_FILE) + 1 :]
    open_at, close_at = body.find(REGION_START), body.find(REGION_END)
    if open_at < 0 or close_at < open_at:
        raise ValueError("not a Zeta prompt: no editable region")
    before = body[:open_at]
    region = body[open_at + len(REGION_START) : close_at]
    after = body[close_at + len(REGION_END) :]
    region = region[1:] if region.startswith("\n") else region
    region = region[:-1] if region.endswith("\n") else region
    cursor = region.find(CURSOR)
    region = region.replace(CURSOR, "")
    start = len(before)
    history = tuple(
        HistoryEdit(path.strip(), path.strip(), diff)
        for path, diff in (m.group("path", "diff") for m in _EVENT.finditer(events))
    )
    return EditRequest(
        uri=path,
        path=path,
        text=before + region + after,
        cursor=start + max(cursor, 0),
        region=(start, start + len(region)),
        history=history,
    )


def _hunks_only(diff: str) -> str:
    """A diff without its file header: Zed's events carry hunks alone."""
    lines = diff.split("\n")
    while lines and lines[0].startswith(("--- ", "+++ ")):
        lines.pop(0)
    return "\n".join(lines)
