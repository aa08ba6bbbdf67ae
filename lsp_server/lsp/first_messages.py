"""The converter's work for a keystroke's messages, done before the first keystroke.

lsprotocol's converter (cattrs) writes the function that reads or writes a message class the
first time it meets that class: tens of milliseconds for an inline completion's request and
answer, hundreds for a completion's, and the first `didChange` pays too. Met first on the event
loop, that is the first keystroke's time. `read_and_write_once` has the protocol read and write
one of each, on the thread that prepares the server once `initialize` is answered.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types
from pygls.protocol import JsonRPCProtocol

_DOCUMENT = {"uri": "file:///first-keystroke.py"}
_POSITION = {"line": 0, "character": 0}
_RANGE = {"start": _POSITION, "end": _POSITION}

# What an editor sends from a document's opening to its keystrokes, as the protocol reads it.
_SENT: tuple[dict[str, Any], ...] = (
    {
        "method": types.TEXT_DOCUMENT_DID_OPEN,
        "params": {"textDocument": {**_DOCUMENT, "languageId": "python", "version": 1, "text": ""}},
    },
    {
        "method": types.TEXT_DOCUMENT_DID_CHANGE,
        "params": {
            "textDocument": {**_DOCUMENT, "version": 2},
            "contentChanges": [{"range": _RANGE, "text": "x"}, {"text": "x"}],
        },
    },
    {
        "id": 0,
        "method": types.TEXT_DOCUMENT_INLINE_COMPLETION,
        "params": {
            "textDocument": _DOCUMENT,
            "position": _POSITION,
            "context": {"triggerKind": types.InlineCompletionTriggerKind.Automatic.value},
        },
    },
    {
        "id": 0,
        "method": types.TEXT_DOCUMENT_COMPLETION,
        "params": {
            "textDocument": _DOCUMENT,
            "position": _POSITION,
            "context": {"triggerKind": types.CompletionTriggerKind.Invoked.value},
        },
    },
    {"method": types.CANCEL_REQUEST, "params": {"id": 0}},
)


def _answers() -> tuple[Any, ...]:
    """What the server answers to a keystroke, as the protocol writes it."""
    span = types.Range(start=types.Position(0, 0), end=types.Position(0, 0))
    edit = types.TextEdit(range=span, new_text="x")
    item = types.CompletionItem(
        label="x",
        kind=types.CompletionItemKind.Text,
        detail="x",
        documentation=types.MarkupContent(kind=types.MarkupKind.Markdown, value="x"),
        filter_text="x",
        sort_text="0",
        preselect=True,
        insert_text_format=types.InsertTextFormat.Snippet,
        insert_text_mode=types.InsertTextMode.AdjustIndentation,
        text_edit=edit,
    )
    return (
        types.InlineCompletionResponse(
            id=0,
            result=types.InlineCompletionList(
                [
                    types.InlineCompletionItem(
                        "x",
                        range=span,
                        command=types.Command(title="x", command="x", arguments=["x"]),
                    )
                ]
            ),
        ),
        types.CompletionResponse(id=0, result=types.CompletionList(True, [item])),
    )


def read_and_write_once(protocol: JsonRPCProtocol) -> None:
    """Have `protocol` read each message of a keystroke and write each answer once; on any
    thread (what the converter writes for a class is kept for every later message)."""
    for message in _SENT:
        protocol.structure_message({"jsonrpc": "2.0", **message})
    for answer in _answers():
        protocol._serialize_message(answer)
