"""What a next-edit prediction is asked from: a document, its cursor and editable region, the
recent edits and the recently viewed code, whatever the front door that asked."""

from __future__ import annotations

from dataclasses import dataclass

from lsp_server.backends.base import ChatMessage, ContextChunk, estimate_tokens

# Room for the rewritten region: twice its own size (it may grow), and a floor for small ones.
ANSWER_TOKENS_FLOOR = 128


@dataclass(frozen=True, slots=True)
class HistoryEdit:
    """One recent edit, as a unified diff of the file it changed (`--- a/p`, `+++ b/p`, hunks)."""

    uri: str
    path: str  # as prompts name the file
    diff: str

    @property
    def lines(self) -> str:
        """The diff's lines as they stand in the file, before and after, without the diff's
        own marks (`+`, `-`, the headers): what privacy rules that read a line from its start
        (a `.pgpass` line, a `KEY=value`) are run over."""
        kept = []
        for line in self.diff.splitlines():
            if line.startswith(("--- ", "+++ ", "@@")):
                continue
            kept.append(line[1:] if line[:1] in "+- " else line)
        return "\n".join(kept)


@dataclass(frozen=True, slots=True)
class EditRequest:
    """`text` is the document (or the excerpt of it a client sent); `region` the (start, end)
    offsets of the whole lines the model may rewrite (`end` before the last line's break),
    `cursor` inside it. `history` is oldest first; `snippets` are already judged shareable."""

    uri: str
    path: str
    text: str
    cursor: int
    region: tuple[int, int]
    history: tuple[HistoryEdit, ...] = ()
    snippets: tuple[ContextChunk, ...] = ()
    language: str = ""
    # A Mercury-style client's own messages: a Mercury endpoint gets them as they came.
    mercury_messages: tuple[ChatMessage, ...] = ()

    @property
    def region_text(self) -> str:
        return self.text[self.region[0] : self.region[1]]

    @property
    def answer_cap(self) -> int:
        """The most tokens an endpoint is asked for: what the rewritten region may take."""
        return max(ANSWER_TOKENS_FLOOR, 2 * estimate_tokens(len(self.region_text)))
