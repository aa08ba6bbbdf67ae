"""The editor's side of `workspace/applyEdit` for end-to-end tests: record, answer, apply."""

from __future__ import annotations

from typing import Any

from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.support.lsp_positions import apply_text_edits


def record_applied_edits(client: LanguageClient) -> list[types.ApplyWorkspaceEditParams]:
    """Answer every `workspace/applyEdit` as applied and return the list it is recorded in."""
    received: list[types.ApplyWorkspaceEditParams] = []

    # pygls' `feature` decorator is unannotated.
    @client.feature(types.WORKSPACE_APPLY_EDIT)  # type: ignore[untyped-decorator]
    def apply_edit(
        _: LanguageClient, params: types.ApplyWorkspaceEditParams
    ) -> types.ApplyWorkspaceEditResult:
        received.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    return received


def read_code_actions_whole(client: LanguageClient) -> None:
    """Make `client` read a code action that carries a command as a `CodeAction`.

    lsprotocol tells `Command` from `CodeAction` by the presence of a `command` key, so a
    `CodeAction` with a command (a string in `Command`, an object in `CodeAction`) comes out as a
    `Command` whose command is the text of that object. Editors read the JSON right; so must we.
    """
    converter = client.protocol._converter

    def structure(value: Any, _: type) -> types.Command | types.CodeAction:
        if isinstance(value.get("command"), str):
            return converter.structure(value, types.Command)
        return converter.structure(value, types.CodeAction)

    converter.register_structure_hook(types.Command | types.CodeAction, structure)


def text_edits_for(edit: types.WorkspaceEdit, uri: str) -> list[types.TextEdit]:
    """The text edits a workspace edit makes to `uri`, from `documentChanges` or `changes`."""
    found: list[types.TextEdit] = []
    for change in edit.document_changes or []:
        if isinstance(change, types.TextDocumentEdit) and change.text_document.uri == uri:
            found += [e for e in change.edits if isinstance(e, types.TextEdit)]
    found += list((edit.changes or {}).get(uri, []))
    return found


def apply_workspace_edit(text: str, edit: types.WorkspaceEdit, uri: str) -> str:
    """`text`, the content of `uri`, as an editor would show it after applying `edit`."""
    return apply_text_edits(text, text_edits_for(edit, uri))
