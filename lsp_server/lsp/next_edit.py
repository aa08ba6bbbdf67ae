"""Next-edit predictions over LSP, in the Copilot language server's words, so that clients
written for it (copilot-lsp, sidekick.nvim) and ours share one method.

`textDocument/copilotInlineEdit` takes `{textDocument: {uri, version}, position}` and answers
`{edits: [...]}`: alternatives, not a sequence (the server proposes one), each
`{text, range, textDocument: {uri, version}, command}` with the range in the negotiated
position encoding. A request for a version the server no longer holds, or whose document
changed while the model worked, gets no edits. `textDocument/didShowInlineEdit` says an edit
was shown; running its command says it was accepted, and `gatewayLs.didDismissInlineEdit`
that it was dismissed (an edit shown and followed by another request is counted dismissed).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from lsp_server.after_answer import later
from lsp_server.lsp.documents import offset_at, open_document, position_at
from lsp_server.lsp.json_result import JsonResult

if TYPE_CHECKING:
    from lsp_server.lsp.feature_server import FeatureServer
    from lsp_server.nextedit.service import NextEdit

COPILOT_INLINE_EDIT = "textDocument/copilotInlineEdit"
DID_SHOW_INLINE_EDIT = "textDocument/didShowInlineEdit"
CMD_ACCEPT_INLINE_EDIT = "gatewayLs.didAcceptInlineEdit"
CMD_DISMISS_INLINE_EDIT = "gatewayLs.didDismissInlineEdit"
ACCEPT_TITLE = "Accept next edit"
NO_EDITS = JsonResult(edits=[])


def register_next_edit(server: LanguageServer) -> None:
    @server.feature(COPILOT_INLINE_EDIT)
    async def copilot_inline_edit(ls: FeatureServer, request: Any) -> dict[str, Any]:
        """The next edit predicted at `{textDocument, position}`, as Copilot's server answers."""
        # The params as sent, plain JSON (`protocol.json_params_converter`).
        if not isinstance(request, Mapping):
            raise ValueError(f"{COPILOT_INLINE_EDIT} takes {{textDocument, position}}")
        identifier = request.get("textDocument")
        uri = identifier.get("uri") if isinstance(identifier, Mapping) else None
        version = identifier.get("version") if isinstance(identifier, Mapping) else None
        position = _position(request.get("position"))
        if not isinstance(uri, str) or position is None:
            raise ValueError(f"{COPILOT_INLINE_EDIT} takes {{textDocument: {{uri}}, position}}")
        return await next_edit_at(ls, uri, version, position)

    @server.feature(DID_SHOW_INLINE_EDIT)
    def did_show_inline_edit(ls: FeatureServer, params: Any) -> None:
        """A proposed next edit was shown."""
        edit_id = _edit_id(params)
        if edit_id is not None and ls.has_engine:
            ls.engine.next_edits.shown(edit_id)

    # Commands are given the server untyped: pygls reads a command's annotations at run time.
    @server.command(CMD_ACCEPT_INLINE_EDIT)
    def accept_inline_edit(ls: Any, *args: Any) -> dict[str, Any]:
        """A proposed next edit was accepted (the command an edit carries)."""
        edit_id = _first_string(args)
        counted = edit_id is not None and ls.engine.next_edits.accepted(edit_id)
        return {"accepted": counted}

    @server.command(CMD_DISMISS_INLINE_EDIT)
    def dismiss_inline_edit(ls: Any, *args: Any) -> dict[str, Any]:
        """A proposed next edit was dismissed."""
        edit_id = _first_string(args)
        counted = edit_id is not None and ls.engine.next_edits.dismissed(edit_id)
        return {"dismissed": counted}


async def next_edit_at(
    ls: FeatureServer, uri: str, version: object, position: types.Position
) -> dict[str, Any]:
    document = open_document(ls, uri)
    if document is None or (isinstance(version, int) and document.version != version):
        return NO_EDITS
    held = document.version
    offset = offset_at(document, position)
    with ls.superseding(uri, COPILOT_INLINE_EDIT):
        if not ls.has_engine:
            await ls.engine_ready()
        edit = await ls.engine.next_edits.predict(
            uri=document.uri,
            text=document.source,
            offset=offset,
            language=document.language_id or "",
        )
    if edit.hull is None or document.version != held:
        return NO_EDITS
    # Noted once the answer is out, before the client can say it showed the edit.
    later(partial(ls.engine.next_edits.proposed, uri, edit))
    return JsonResult(edits=[_wire_edit(document, uri, held, edit)])


def _wire_edit(document: Any, uri: str, version: int | None, edit: NextEdit) -> dict[str, Any]:
    assert edit.hull is not None
    start, end = position_at(document, edit.hull.start), position_at(document, edit.hull.end)
    return {
        "text": edit.hull.text,
        "range": {
            "start": {"line": start.line, "character": start.character},
            "end": {"line": end.line, "character": end.character},
        },
        "textDocument": {"uri": uri, "version": version},
        "command": {
            "title": ACCEPT_TITLE,
            "command": CMD_ACCEPT_INLINE_EDIT,
            "arguments": [edit.id],
        },
    }


def _position(value: Any) -> types.Position | None:
    if not isinstance(value, Mapping):
        return None
    line, character = value.get("line"), value.get("character")
    if not isinstance(line, int) or not isinstance(character, int):
        return None
    if isinstance(line, bool) or isinstance(character, bool) or min(line, character) < 0:
        return None
    return types.Position(line=min(line, 2**31 - 1), character=min(character, 2**31 - 1))


def _edit_id(params: Any) -> str | None:
    """The id in `{item: {command: {arguments: [id]}}}`, as Copilot clients send it."""
    item = params.get("item") if isinstance(params, Mapping) else None
    command = item.get("command") if isinstance(item, Mapping) else None
    arguments = command.get("arguments") if isinstance(command, Mapping) else None
    return _first_string(tuple(arguments)) if isinstance(arguments, list) else None


def _first_string(args: tuple[Any, ...]) -> str | None:
    first = args[0] if args else None
    if isinstance(first, Mapping):
        first = first.get("id")
    return first if isinstance(first, str) and len(first) <= 64 else None
