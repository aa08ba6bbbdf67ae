"""The smallest edits that turn one text into another, as str offsets.

A line diff whose changed blocks are narrowed to the characters that differ; a boundary never
falls between the two characters of a \\r\\n, which no editor position can name. Refactors and
next-edit predictions both answer with a rewritten stretch of a document and hand the editor
these edits, never a whole replacement; each front door turns the offsets into its positions.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split where LSP splits them: at \\n, \\r\\n and \\r only."""
    return _LINE.findall(text)


@dataclass(frozen=True, slots=True)
class OffsetEdit:
    """Replace `document[start:end]` with `text`; offsets into the document as it was."""

    start: int
    end: int
    text: str


def apply_edits(text: str, edits: list[OffsetEdit]) -> str:
    """`text` with `edits` applied, all of them read against the original text."""
    spans = sorted(
        ((edit.start, edit.end, order, edit.text) for order, edit in enumerate(edits)),
        key=lambda span: (span[0], span[2]),
    )
    pieces: list[str] = []
    cursor = 0
    for start, end, _, new_text in spans:
        if start < cursor or end < start:
            raise ValueError("overlapping or inverted text edits")
        pieces += [text[cursor:start], new_text]
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


def minimal_edits(old_text: str, new_text: str) -> list[OffsetEdit]:
    """Sorted, non-overlapping edits turning `old_text` into `new_text`: a line diff whose
    changed blocks are narrowed to the characters that differ."""
    old_lines, new_lines = split_lines(old_text), split_lines(new_text)
    head = _common_prefix_length(old_lines, new_lines)
    tail = _common_prefix_length(old_lines[head:][::-1], new_lines[head:][::-1])
    old_middle = old_lines[head : len(old_lines) - tail]
    new_middle = new_lines[head : len(new_lines) - tail]
    old_starts = _offsets(old_lines)
    new_starts = _offsets(new_lines)
    edits: list[OffsetEdit] = []
    for old_first, old_last, new_first, new_last in _changed_blocks(old_middle, new_middle):
        span = _narrow(
            old_text,
            new_text,
            old_starts[head + old_first],
            old_starts[head + old_last],
            new_starts[head + new_first],
            new_starts[head + new_last],
        )
        if span is None:
            continue
        old_start, old_end, new_start, new_end = span
        edits.append(OffsetEdit(old_start, old_end, new_text[new_start:new_end]))
    return edits


def _changed_blocks(old: list[str], new: list[str]) -> list[tuple[int, int, int, int]]:
    """The line blocks that differ, as `difflib` finds them. Where no line is on both sides
    (the usual next edit: one changed line, once the lines alike at either end are set
    aside) that is the whole of both, found without the matcher."""
    if not old and not new:
        return []
    if set(old).isdisjoint(new):
        return [(0, len(old), 0, len(new))]
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return [
        (old_first, old_last, new_first, new_last)
        for tag, old_first, old_last, new_first, new_last in matcher.get_opcodes()
        if tag != "equal"
    ]


def _common_prefix_length(first: list[str], second: list[str]) -> int:
    length = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        length += 1
    return length


def _offsets(lines: list[str]) -> list[int]:
    """Start offset of every line, and the end of the text as one more entry."""
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    return starts


def _narrow(
    old: str, new: str, old_start: int, old_end: int, new_start: int, new_end: int
) -> tuple[int, int, int, int] | None:
    """A changed block shrunk by the characters it keeps at both ends; a boundary is never put
    between the two characters of a \\r\\n, which no LSP position can name."""
    limit = min(old_end - old_start, new_end - new_start)
    prefix = 0
    while prefix < limit and old[old_start + prefix] == new[new_start + prefix]:
        prefix += 1
    limit -= prefix
    suffix = 0
    while suffix < limit and old[old_end - 1 - suffix] == new[new_end - 1 - suffix]:
        suffix += 1
    old_start, new_start = old_start + prefix, new_start + prefix
    old_end, new_end = old_end - suffix, new_end - suffix
    if _splits_crlf(old, old_start) or _splits_crlf(new, new_start):
        old_start, new_start = old_start - 1, new_start - 1
    if _splits_crlf(old, old_end) or _splits_crlf(new, new_end):
        old_end, new_end = old_end + 1, new_end + 1
    if old_start == old_end and new_start == new_end:
        return None
    return old_start, old_end, new_start, new_end


def _splits_crlf(text: str, offset: int) -> bool:
    """Whether `offset` falls between the two characters of a \\r\\n, which no LSP position
    can name."""
    return 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n"
