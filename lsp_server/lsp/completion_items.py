"""A suggestion as an LSP completion item: plain text or a snippet, replacing the word typed."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.workspace import TextDocument

from lsp_server.lsp.documents import client_units, offset_at

if TYPE_CHECKING:
    from lsp_server.suggest.service import Suggestion

_WORD_AT_END = re.compile(r"\w+$")


def completion_item(
    document: TextDocument, position: types.Position, suggestion: Suggestion, *, snippets: bool
) -> types.CompletionItem:
    """The suggestion as a completion item that replaces the word being typed, so clients
    that filter by word (Zed, Neovim) keep showing it while the person types on.

    One line goes as plain text. Several lines go, to a client that expands snippets, as a
    snippet with every snippet character escaped (the text is inserted as is): such clients
    insert only the first line of a plain-text item (Neovim 0.12 does), while a snippet is
    inserted whole, its later lines indented relative to the line it starts on. A client that
    declares no snippet support (eglot without yasnippet) would insert the escapes too, so it
    gets plain text with its own indentation, which it inserts whole."""
    cursor = offset_at(document, position)
    line_start = document.source.rfind("\n", 0, cursor) + 1
    word = _WORD_AT_END.search(document.source, line_start, cursor)
    typed = word.group(0) if word else ""
    start = types.Position(
        line=position.line, character=position.character - client_units(document, typed)
    )
    new_text = typed + suggestion.text
    first_line = new_text.strip().splitlines()[0] if new_text.strip() else new_text
    detail = f"gateway-ls · {suggestion.endpoint or 'cache'}"
    if not suggestion.from_cache:
        detail += f" · {suggestion.latency_ms:.0f} ms"
    multiline = "\n" in new_text
    as_snippet = multiline and snippets
    line_text = document.source[line_start:cursor]
    indent = line_text[: len(line_text) - len(line_text.lstrip())]
    return types.CompletionItem(
        label=first_line[:80],
        kind=types.CompletionItemKind.Text,
        detail=detail,
        documentation=types.MarkupContent(
            kind=types.MarkupKind.Markdown, value=f"```\n{new_text}\n```"
        ),
        filter_text=new_text,
        sort_text="0",
        preselect=True,
        insert_text_format=(
            types.InsertTextFormat.Snippet if as_snippet else types.InsertTextFormat.PlainText
        ),
        insert_text_mode=_indentation_mode(multiline=multiline, as_snippet=as_snippet),
        text_edit=types.TextEdit(
            range=types.Range(start=start, end=position),
            new_text=_snippet_literal(_relative_to(indent, new_text)) if as_snippet else new_text,
        ),
    )


def _indentation_mode(*, multiline: bool, as_snippet: bool) -> types.InsertTextMode | None:
    if not multiline:
        return None
    return types.InsertTextMode.AdjustIndentation if as_snippet else types.InsertTextMode.AsIs


def _relative_to(indent: str, text: str) -> str:
    """`text` with `indent` taken off its later lines: with `AdjustIndentation` the client puts
    the line's own indentation back on each of them (VS Code and Neovim both do)."""
    first, *rest = text.split("\n")
    if not indent or not all(line.startswith(indent) or not line.strip() for line in rest):
        return text
    return "\n".join([first, *(line[len(indent) :] for line in rest)])


def _snippet_literal(text: str) -> str:
    """`text` as a snippet that inserts exactly `text` (no tabstops, no variables)."""
    return re.sub(r"([\\$}])", r"\\\1", text)
