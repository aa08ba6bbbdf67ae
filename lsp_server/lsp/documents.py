"""Documents as LSP sees them.

pygls splits lines with `str.splitlines`, which also breaks at form feeds, `\\x1c`-`\\x1e`,
`\\x85`, `\\u2028` and `\\u2029`; LSP breaks lines only at `\\n`, `\\r\\n` and `\\r`. A Python file
with a form feed (the standard library has many) would otherwise put every later position on the
wrong line. Positions are also clamped here the way LSP asks: a column past the end of a line
means the end of that line.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate
from typing import Protocol
from urllib.parse import unquote

from lsprotocol import types
from pygls.workspace import TextDocument, Workspace

_LSP_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_OTHER_BREAKS = ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def lsp_lines(text: str) -> tuple[str, ...]:
    """Lines with their endings, split only where LSP splits them."""
    if not any(mark in text for mark in _OTHER_BREAKS):
        return tuple(text.splitlines(keepends=True))  # the fast path, and the common one
    return tuple(_LSP_LINE.findall(text))


class LspTextDocument(TextDocument):
    """Also remembers its lines, and where each begins, until the text changes: a keystroke's
    didChange and the inline request after it would otherwise split the whole document twice,
    and each position would add up the lengths of every line above it."""

    _lines_of: str | None = None
    _lines: tuple[str, ...] = ()
    _starts_of: str | None = None
    _starts: tuple[int, ...] = ()

    @property
    def lines(self) -> Sequence[str]:
        source = self.source
        if source is not self._lines_of:
            self._lines, self._lines_of = lsp_lines(source), source
        return self._lines

    def line_starts(self) -> tuple[int, ...]:
        """The str offset at which each line begins, and the text's length last."""
        lines = self.lines
        if self._starts_of is not self._lines_of:
            self._starts, self._starts_of = (
                tuple(accumulate(map(len, lines), initial=0)),
                self._lines_of,
            )
        return self._starts


class LspWorkspace(Workspace):
    def _create_text_document(
        self,
        doc_uri: str,
        source: str | None = None,
        version: int | None = None,
        language_id: str | None = None,
    ) -> TextDocument:
        return LspTextDocument(
            doc_uri,
            source=source,
            version=version,
            language_id=language_id,
            sync_kind=self._sync_kind,
            position_codec=self._position_codec,
        )


def offset_at(document: TextDocument, position: types.Position) -> int:
    """The str offset of an LSP position (in the negotiated encoding), clamped into the text."""
    lines = document.lines
    if position.line >= len(lines):
        return len(document.source)
    line = max(0, position.line)
    start = _line_starts(document)[line]
    content = lines[line].rstrip("\r\n")
    if content.isascii():  # one code unit per character in every encoding
        return start + min(max(0, position.character), len(content))
    codec = document.position_codec
    units = 0
    for index, char in enumerate(content):
        units += codec.client_num_units(char)
        if units > position.character:
            return start + index
    return start + len(content)


def position_at(document: TextDocument, offset: int) -> types.Position:
    """The LSP position (in the negotiated encoding) of a str offset into the document."""
    source = document.source
    offset = max(0, min(offset, len(source)))
    starts = _line_starts(document)
    line = bisect_right(starts, offset) - 1
    start = starts[line]
    return types.Position(line=line, character=client_units(document, source[start:offset]))


def _line_starts(document: TextDocument) -> Sequence[int]:
    if isinstance(document, LspTextDocument):
        return document.line_starts()
    return tuple(accumulate(map(len, document.lines), initial=0))


def client_units(document: TextDocument, text: str) -> int:
    """How many code units `text` takes in the negotiated position encoding."""
    units: int = document.position_codec.client_num_units(text)
    return units


class HoldsDocuments(Protocol):
    """A language server, as far as its documents go."""

    @property
    def workspace(self) -> Workspace: ...


def open_document(ls: HoldsDocuments, uri: str) -> TextDocument | None:
    """The open document for `uri`; pygls keys them by the percent-decoded URI."""
    document: TextDocument | None = ls.workspace.text_documents.get(unquote(uri))
    return document
