"""`gatewayLs/didMoveCursor`: where the person's cursor rests, as our own clients report it.

The VS Code extension (and the Neovim plugin) send it when the cursor stops moving in a
document, so that the local model reads the prompt of a suggestion there before the first
keystroke asks for it (llama.vim reads ahead on cursor moves in the same way). A client that
sends none (plain Neovim, eglot) loses nothing: the model then reads ahead from the document's
start and around each edit. The frame is the client's: anything malformed is ignored.

    {"textDocument": {"uri": "file:///…"}, "position": {"line": 12, "character": 4}}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lsprotocol import types

NOTIFY_CURSOR = "gatewayLs/didMoveCursor"

# Positions beyond this are no document's: a client bug or a hostile frame.
_MAX_COORDINATE = 1 << 31


@dataclass(frozen=True, slots=True)
class CursorReport:
    uri: str
    position: types.Position


def parse_cursor_report(params: Any) -> CursorReport | None:
    """The report in `params` (a mapping or pygls' attribute object), or None if malformed."""
    document = _field(params, "textDocument")
    position = _field(params, "position")
    uri = _field(document, "uri")
    line = _field(position, "line")
    character = _field(position, "character")
    if not isinstance(uri, str) or not uri:
        return None
    if not all(_coordinate(value) for value in (line, character)):
        return None
    return CursorReport(uri, types.Position(line=line, character=character))


def _field(value: Any, name: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


def _coordinate(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _MAX_COORDINATE
