"""An editor's reading of LSP positions in UTF-16 code units (the protocol's default encoding),
for tests that apply a server's text edits as a client would."""

from __future__ import annotations

import re
from bisect import bisect_right

from lsprotocol.types import Position, TextEdit

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def utf16_length(text: str) -> int:
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


class LineIndex:
    """Converts between str offsets and LSP positions (UTF-16 code units) of one text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.line_starts = [0]
        for line in _LINE.findall(text):
            self.line_starts.append(self.line_starts[-1] + len(line))
        if text and not text.endswith(("\n", "\r")):
            self.line_starts.pop()  # the last line has no ending: no line starts after it

    def position(self, offset: int) -> Position:
        line = bisect_right(self.line_starts, offset) - 1
        start = self.line_starts[line]
        return Position(line=line, character=utf16_length(self.text[start:offset]))

    def offset(self, position: Position) -> int:
        """The offset of `position`; past the end of a line means its end, as LSP says."""
        if position.line >= len(self.line_starts):
            return len(self.text)
        start = self.line_starts[position.line]
        end = (
            self.line_starts[position.line + 1]
            if position.line + 1 < len(self.line_starts)
            else len(self.text)
        )
        while end > start and self.text[end - 1] in "\r\n":
            end -= 1
        units = 0
        for offset in range(start, end):
            if units >= position.character:
                return offset
            units += 2 if ord(self.text[offset]) > 0xFFFF else 1
        return end


def apply_text_edits(text: str, edits: list[TextEdit]) -> str:
    """`text` with LSP `edits` (UTF-16 positions) applied, all read against the original."""
    index = LineIndex(text)
    spans = sorted(
        (index.offset(e.range.start), index.offset(e.range.end), order, e.new_text)
        for order, e in enumerate(edits)
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
