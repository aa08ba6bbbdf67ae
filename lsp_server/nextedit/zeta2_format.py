"""The prompts of Zed's Zeta 2 and Zeta 2.1 models, written, read and answered.

Both are Seed-Coder fill-in-the-middle prompts in suffix-prefix-middle order, as Zed's
`zeta_prompt` crate writes them (`seed_coder.rs`, `multi_region.rs`): the text after the
editable region first, then the related files, the edit history (`<filename>edit_history`, a
unified diff per edit) and the cursor's file down to the region, then the middle marker.

- Zeta 2 (`V0211SeedCoder`) puts the region between git merge markers (`<<<<<<< CURRENT` ...
  `=======`) with the cursor inside; the model writes the region again and ends with
  `>>>>>>> UPDATED`. Zed takes everything before that marker as the new region, so the answer
  for "no change" is the region as it was (Zed reads `NO_EDITS` only in later formats).
- Zeta 2.1 (`V0318SeedMultiRegions`) splits the region into blocks with numbered markers
  (`<|marker_1|>` ... `<|marker_N|>`); the model writes one span from marker i to marker j and
  ends with `<[end▁of▁sentence]>`. The same marker twice means no change.

Zed sends these to an OpenAI-compatible `/v1/completions` (`prompt_format` `zeta2` or
`zeta2.1`, or a model of that name); the gateway reads the prompt back
(`parse_zeta2_prompt`) and answers in the form Zed parses (`zeta2_answer`). An `edit`
endpoint with `edit_format = "zeta2"` (a llama.cpp server hosting a Zeta 2 GGUF) is asked in
the Zeta 2 form (`zeta2_prompt`) and its answer read back (`read_zeta2_answer`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from lsp_server.backends.base import ContextChunk
from lsp_server.nextedit.request import EditRequest, HistoryEdit
from lsp_server.text_edits import minimal_edits

FIM_SUFFIX = "<[fim-suffix]>"
FIM_PREFIX = "<[fim-prefix]>"
FIM_MIDDLE = "<[fim-middle]>"
FILE_MARKER = "<filename>"
EDIT_HISTORY = "edit_history"
CURSOR = "<|user_cursor|>"
START_MARKER = "<<<<<<< CURRENT\n"
SEPARATOR = "=======\n"
END_MARKER = ">>>>>>> UPDATED\n"
NO_EDITS = "NO_EDITS"
MULTI_REGION_END = "<[end▁of▁sentence]>"
# Zed asks for no stop in Zeta 2's form: its answer ends with END_MARKER, where an endpoint
# asked in that form may stop.
STOP = (END_MARKER.rstrip("\n"),)

_MARKER = re.compile(r"<\|marker_(\d+)\|>")
_FILE_HEADER = re.compile(rf"(?:\A|\n){re.escape(FILE_MARKER)}([^\n]*)\n")
_EVENT = re.compile(r"^--- a/(?P<old>[^\n]*)\n\+\+\+ b/(?P<new>[^\n]*)\n", re.MULTILINE)

Zeta2Form = Literal["zeta2", "zeta2.1"]


@dataclass(frozen=True, slots=True)
class Zeta2Prompt:
    """A client's Zeta 2 or 2.1 prompt read back: the request it describes, and for Zeta 2.1
    the region as the prompt wrote it (with its final line break) and where its markers are."""

    request: EditRequest
    form: Zeta2Form
    editable: str
    markers: tuple[int, ...] = ()


def is_zeta2_prompt(prompt: str) -> bool:
    """A Seed-Coder prompt with Zeta's region markers, whatever model the client named."""
    if not prompt.startswith(FIM_SUFFIX) or not prompt.rstrip().endswith(FIM_MIDDLE):
        return False
    if FIM_PREFIX not in prompt or CURSOR not in prompt:
        return False
    return START_MARKER in prompt or "<|marker_1|>" in prompt


def parse_zeta2_prompt(prompt: str) -> Zeta2Prompt:
    """The request a Zeta 2 or 2.1 prompt describes; ValueError when it is not one."""
    if not is_zeta2_prompt(prompt):
        raise ValueError("not a Zeta 2 prompt: no Seed-Coder markers around a region")
    prefix_at = prompt.index(FIM_PREFIX)
    suffix = prompt[len(FIM_SUFFIX) : prefix_at]
    body = prompt[prefix_at + len(FIM_PREFIX) : prompt.rstrip().rindex(FIM_MIDDLE)]
    sections = _sections(body)
    if not sections:
        raise ValueError("not a Zeta 2 prompt: no file section")
    path, cursor_file = sections[-1]
    history: list[HistoryEdit] = []
    snippets: list[ContextChunk] = []
    for order, (name, content) in enumerate(sections[:-1]):
        if name == EDIT_HISTORY:
            history.extend(_events(content))
        else:
            snippets.append(ContextChunk(name, content.rstrip("\n"), order))
    path = path.strip() or "untitled"
    markers: tuple[int, ...] = ()
    form: Zeta2Form = "zeta2"
    if START_MARKER in cursor_file:
        before, _, rest = cursor_file.partition(START_MARKER)
        if not rest.endswith(SEPARATOR):
            raise ValueError("not a Zeta 2 prompt: the region does not end with '======='")
        editable = rest[: -len(SEPARATOR)]
    else:
        first = _MARKER.search(cursor_file)
        if first is None or first.group(1) != "1":
            raise ValueError("not a Zeta 2.1 prompt: no '<|marker_1|>'")
        before, tagged = cursor_file[: first.start()], cursor_file[first.start() :]
        editable, markers = _untagged(tagged.removesuffix("\n"))
        form = "zeta2.1"
    cursor = editable.find(CURSOR)
    if cursor < 0:
        raise ValueError("not a Zeta 2 prompt: no cursor in the region")
    editable = editable.replace(CURSOR, "", 1)
    markers = tuple(m if m <= cursor else m - len(CURSOR) for m in markers)
    region = editable.removesuffix("\n")
    start = len(before)
    request = EditRequest(
        uri=path,
        path=path,
        text=before + editable + suffix,
        cursor=start + min(cursor, len(region)),
        region=(start, start + len(region)),
        history=tuple(history),
        snippets=tuple(snippets),
    )
    return Zeta2Prompt(request, form, editable, markers)


def zeta2_answer(prompt: Zeta2Prompt, region: str) -> str:
    """The rewritten `region` (the request's region, no final line break needed) in the form
    Zed's `parse_zeta2_model_output` reads for the prompt's format."""
    old = prompt.editable
    kept = old.rstrip("\r\n")
    new = region.rstrip("\r\n") + old[len(kept) :]
    if prompt.form == "zeta2":
        return new + ("" if new.endswith("\n") or not new else "\n") + END_MARKER
    return _marker_span(old, new, prompt.markers, prompt.request.cursor - prompt.request.region[0])


def zeta2_prompt(request: EditRequest, context: tuple[int, int]) -> str:
    """A request in Zeta 2's form (`V0211SeedCoder`), for an endpoint hosting the model:
    `context` is the stretch of the document the prompt shows around the region."""
    text, (start, end), cursor = request.text, request.region, request.cursor
    suffix = text[end : context[1]]
    prompt = FIM_SUFFIX + suffix + ("" if suffix.endswith("\n") else "\n") + FIM_PREFIX
    related = "".join(
        f"{FILE_MARKER}{chunk.path}\n{chunk.text}" + ("" if chunk.text.endswith("\n") else "\n")
        for chunk in request.snippets
    )
    if related:
        prompt += related + "\n"
    if request.history:
        events = "".join(_event_text(edit) for edit in request.history)
        prompt += f"{FILE_MARKER}{EDIT_HISTORY}\n{events}\n"
    region = text[start:cursor] + CURSOR + text[cursor:end]
    prompt += f"{FILE_MARKER}{request.path}\n{text[context[0] : start]}{START_MARKER}{region}"
    return prompt + ("" if region.endswith("\n") else "\n") + SEPARATOR + FIM_MIDDLE


def read_zeta2_answer(answer: str) -> str | None:
    """The rewritten region of a Zeta 2 answer: what comes before `>>>>>>> UPDATED`, the
    cursor marker dropped; None for `NO_EDITS`."""
    if answer.lstrip().startswith(NO_EDITS):
        return None
    end = answer.find(END_MARKER.rstrip("\n"))
    region = answer if end < 0 else answer[:end]
    return region.replace(CURSOR, "")


def _sections(body: str) -> list[tuple[str, str]]:
    """The prompt's `<filename>` sections, in order, each without the blank line that
    separates it from the next."""
    headers = list(_FILE_HEADER.finditer(body))
    sections = []
    for i, header in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(body)
        content = body[header.end() : end]
        if i + 1 < len(headers):
            content = content.removesuffix("\n")
        sections.append((header.group(1), content))
    return sections


def _events(content: str) -> list[HistoryEdit]:
    """Zed's events (`write_event`): `--- a/old` and `+++ b/new` headers, then the hunks."""
    heads = list(_EVENT.finditer(content))
    edits = []
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(content)
        path = head.group("new")
        diff = content[head.start() : end].rstrip("\n")
        diff = diff.removesuffix("\n// User accepted prediction:")
        edits.append(HistoryEdit(path, path, diff))
    return edits


def _event_text(edit: HistoryEdit) -> str:
    diff = edit.diff
    if not diff.startswith("--- "):
        diff = f"--- a/{edit.path}\n+++ b/{edit.path}\n{diff}"
    return diff + "\n"


def _untagged(tagged: str) -> tuple[str, tuple[int, ...]]:
    """The region without its numbered markers, and each marker's offset in it (in order)."""
    pieces: list[str] = []
    markers: list[int] = []
    length, at = 0, 0
    for expected, match in enumerate(_MARKER.finditer(tagged), start=1):
        if int(match.group(1)) != expected:
            raise ValueError("not a Zeta 2.1 prompt: markers out of order")
        piece = tagged[at : match.start()]
        pieces.append(piece)
        length += len(piece)
        markers.append(length)
        at = match.end()
    if at != len(tagged) or len(markers) < 2:
        raise ValueError("not a Zeta 2.1 prompt: the region does not end with a marker")
    return "".join(pieces), tuple(markers)


def _marker_span(old: str, new: str, markers: tuple[int, ...], cursor: int) -> str:
    """The answer Zed's `apply_marker_span_v0318` turns into `new`: from the last marker
    before the change to the first after it, the span rewritten, then the markers it covered
    (content between two of them is joined, so they may follow the span empty)."""
    if old == new:
        nearest = min(range(len(markers)), key=lambda i: abs(markers[i] - cursor))
        return _tag(nearest) * 2 + MULTI_REGION_END
    edits = minimal_edits(old, new)
    head, change_end = edits[0].start, edits[-1].end
    first = max(i for i, m in enumerate(markers) if m <= head)
    last = next((i for i, m in enumerate(markers) if m >= change_end), len(markers) - 1)
    if first == last:
        if last < len(markers) - 1:
            last += 1
        else:
            first -= 1
    span = new[markers[first] : len(new) - (len(old) - markers[last])]
    covered = "".join(_tag(i) for i in range(first + 1, last + 1))
    return _tag(first) + span + covered + MULTI_REGION_END


def _tag(index: int) -> str:
    return f"<|marker_{index + 1}|>"
