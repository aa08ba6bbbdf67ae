"""A rewritten region turned into the smallest edits of the document, or refused.

The model sees a stretch of the file around the region; one that writes that stretch back
(the lines just before or after the region at its edges) or grows the region out of all
proportion rewrites what it was not given to edit, and its answer is dropped.
"""

from __future__ import annotations

from lsp_server.nextedit.request import EditRequest
from lsp_server.text_edits import OffsetEdit, minimal_edits

# A region may grow by this many lines (a body filled in), not more.
MAX_ADDED_LINES = 20


class OutsideTheRegion(ValueError):
    """The answer rewrites text outside the editable region."""


def region_edits(request: EditRequest, new_region: str) -> list[OffsetEdit]:
    """The document edits that replace the region with `new_region`; [] when it is unchanged."""
    start, end = request.region
    old_region = request.text[start:end]
    # The line breaks the region ends with stay: the region ends before its last line's
    # break, so a break the answer ends with is the line its end marker was written on, and
    # where the region reaches the end of a file that ends with a break, a fenced answer
    # cannot show the empty last line (it is no edit to drop it).
    kept = old_region.rstrip("\r\n")
    new_region = new_region.rstrip("\r\n") + old_region[len(kept) :]
    if new_region == old_region:
        return []
    if new_region.count("\n") > old_region.count("\n") + MAX_ADDED_LINES:
        raise OutsideTheRegion("the answer is far larger than the region")
    before = _line_before(request.text, start)
    after = _line_after(request.text, end)
    new_lines = new_region.splitlines()
    old_lines = old_region.splitlines()
    if before.strip() and new_lines[:1] == [before] and old_lines[:1] != [before]:
        raise OutsideTheRegion("the answer repeats the line before the region")
    if after.strip() and new_lines[-1:] == [after] and old_lines[-1:] != [after]:
        raise OutsideTheRegion("the answer repeats the line after the region")
    return [
        OffsetEdit(start + e.start, start + e.end, e.text)
        for e in minimal_edits(old_region, new_region)
    ]


def hull(edits: list[OffsetEdit], text: str) -> OffsetEdit:
    """One edit spanning all of `edits` (sorted, read against `text`): what a client that
    takes one replacement per suggestion shows."""
    start, end = edits[0].start, edits[-1].end
    pieces: list[str] = []
    cursor = start
    for edit in edits:
        pieces += [text[cursor : edit.start], edit.text]
        cursor = edit.end
    return OffsetEdit(start, end, "".join(pieces))


def _line_before(text: str, offset: int) -> str:
    """The last line of `text[:offset]`, the line breaks it ends with left out. Only that line
    is split, not the document above it (a copy of it on every next edit)."""
    end = offset
    while end > 0 and text[end - 1] in "\r\n":
        end -= 1
    lines = text[text.rfind("\n", 0, end) + 1 : end].splitlines()
    return lines[-1] if lines else ""


def _line_after(text: str, offset: int) -> str:
    """The first line of `text[offset:]`, the line breaks it begins with left out."""
    start = offset
    while start < len(text) and text[start] in "\r\n":
        start += 1
    newline = text.find("\n", start)
    lines = text[start : len(text) if newline < 0 else newline].splitlines()
    return lines[0] if lines else ""
