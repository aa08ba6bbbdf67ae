"""Chunks: pieces of a document that may join another prompt, and how alike two of them are."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from lsp_server.backends.base import context_tokens
from lsp_server.context.identifiers import identifiers

_sequence = itertools.count()


class ChunkKind:
    """What a chunk is; the order of stability in a prompt (lower: changes less, goes first)."""

    DEFINITION = 0  # the definition of a name the current file imports
    FILE = 1  # lines of a file the person opened or edited
    EDIT = 2  # lines around a recent edit


@dataclass(frozen=True, slots=True)
class Chunk:
    uri: str
    path: str  # relative to its workspace folder
    start_line: int  # 0-based
    text: str
    kind: int = ChunkKind.FILE
    name: str = ""  # a definition's name
    # A definition the file reaches through its module (`errors.Name` after `from email import
    # errors`): the module's name there; "" when the file imports the name itself.
    module: str = ""
    words: frozenset[str] = field(default=frozenset(), compare=False)
    tokens: int = field(default=0, compare=False)  # its cost in a prompt
    # Gathered later: higher. Orders chunks of a kind in a prompt, oldest (most stable) first.
    sequence: int = field(default_factory=lambda: next(_sequence), compare=False)

    @classmethod
    def of(
        cls, uri: str, path: str, start_line: int, text: str, kind: int = ChunkKind.FILE
    ) -> Chunk:
        return cls(
            uri,
            path,
            start_line,
            text,
            kind,
            words=identifiers(text),
            tokens=context_tokens(path, text),
        )

    @property
    def end_line(self) -> int:
        """The line after its last."""
        return self.start_line + self.text.count("\n") + (0 if self.text.endswith("\n") else 1)

    def overlaps(self, other: Chunk) -> bool:
        return (
            self.uri == other.uri
            and self.start_line < other.end_line
            and other.start_line < self.end_line
        )


def lines_around(text: str, line: int, size: int) -> tuple[int, str]:
    """Up to `size` whole lines of `text` centred on `line`: (first line, the text)."""
    lines = text.splitlines(keepends=True)
    if not lines:
        return 0, ""
    line = min(max(0, line), len(lines) - 1)
    start = max(0, min(line - size // 2, len(lines) - size))
    return start, "".join(lines[start : start + size])


def line_similarity(a: str, b: str) -> float:
    """How much two chunks overlap: the share of lines they have in common (llama.vim's
    measure: twice the common lines over the lines of both)."""
    lines_a, lines_b = a.splitlines(), b.splitlines()
    if not lines_a or not lines_b:
        return 0.0
    common = len(set(lines_a) & set(lines_b))
    return 2 * common / (len(set(lines_a)) + len(set(lines_b)))
