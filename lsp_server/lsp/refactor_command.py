"""`gatewayLs.refactor`: the code actions that offer it, and the command that runs a refactor
with work-done progress and applies its edit whole or not at all."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from lsp_server.lsp.client_capabilities import client_supports_progress
from lsp_server.lsp.documents import offset_at, open_document, position_at
from lsp_server.lsp.errors import refactor_message

if TYPE_CHECKING:
    from lsp_server.lsp.feature_server import FeatureServer

log = logging.getLogger(__name__)

CMD_REFACTOR = "gatewayLs.refactor"
REFACTOR_ACTION_TITLE = "Refactor with reasoning model…"
INSTRUCTION_QUESTION_S = 600.0  # a person choosing; a client that never answers lets go then


async def run_refactor_command(
    ls: FeatureServer, args: tuple[Any, ...], *, request_id: object = None
) -> dict[str, Any]:
    """Validate the arguments, run the refactor with progress, apply the edit; never partial.

    `request_id` is the `workspace/executeCommand` request; a cancel from the progress UI
    cancels it as `$/cancelRequest` would, so that it is answered."""
    from lsp_server.refactor.service import RefactorFailed

    params = args[0] if args else None
    if not isinstance(params, Mapping):
        raise ValueError("gatewayLs.refactor takes one argument: {uri, range, instruction}")
    uri = params.get("uri")
    document = open_document(ls, uri) if isinstance(uri, str) else None
    if document is None:
        raise ValueError(f"gatewayLs.refactor: document not open: {uri}")
    selection = _parse_range(params.get("range"))
    instruction = params.get("instruction") or ""
    if not isinstance(instruction, str):
        raise ValueError("gatewayLs.refactor: instruction must be a string")
    if not instruction.strip():
        chosen = await ask_instruction(ls)
        if chosen is None:
            return {"applied": False, "error": "no instruction chosen"}
        instruction = chosen
    version = document.version
    start, end = offset_at(document, selection.start), offset_at(document, selection.end)
    progress = RefactorProgress(ls, request_id)
    progress.begin()
    try:
        result = await ls.engine.refactors.refactor(
            uri=document.uri,
            text=document.source,
            start=start,
            end=end,
            language=document.language_id or "",
            instruction=instruction,
            on_tokens=progress.tokens,
        )
    except RefactorFailed as failure:
        progress.end("failed")
        ls.window_show_message(refactor_message(failure))
        return {"applied": False, "error": str(failure)}
    except asyncio.CancelledError:
        progress.end("cancelled")
        raise
    if document.version != version:
        progress.end("document changed")
        message = "gateway-ls: the document changed while the model worked; nothing was applied"
        ls.window_show_message(
            types.ShowMessageParams(type=types.MessageType.Warning, message=message)
        )
        return {"applied": False, "error": "document changed"}
    progress.end(f"answered by {result.endpoint}")
    if not result.edits:
        message = f"gateway-ls: {result.endpoint} answered with the code unchanged"
        ls.window_show_message(
            types.ShowMessageParams(type=types.MessageType.Info, message=message)
        )
        return {"applied": False, "endpoint": result.endpoint, "error": "no change"}
    label = f"gateway-ls: {result.instruction[:60]} (model: {result.endpoint})"
    edit = types.WorkspaceEdit(
        document_changes=[
            types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(
                    uri=document.uri, version=version
                ),
                edits=[
                    types.TextEdit(
                        range=types.Range(
                            start=position_at(document, e.start), end=position_at(document, e.end)
                        ),
                        new_text=e.text,
                    )
                    for e in result.edits
                ],
            )
        ]
    )
    response = await ls.workspace_apply_edit_async(
        types.ApplyWorkspaceEditParams(edit=edit, label=label)
    )
    applied = bool(getattr(response, "applied", False))
    return {"applied": applied, "endpoint": result.endpoint, "edits": len(result.edits)}


async def ask_instruction(ls: FeatureServer) -> str | None:
    """The instruction for a refactor asked without one (editors with no input box: Neovim,
    Emacs): the person picks one of the ready instructions; None if they dismiss the question.
    A client that cannot ask gets the default instruction rather than an empty one."""
    from lsp_server.refactor.prompt import READY_INSTRUCTIONS
    from lsp_server.refactor.service import DEFAULT_INSTRUCTION

    titles = {title: instruction for title, instruction in READY_INSTRUCTIONS}
    question = types.ShowMessageRequestParams(
        type=types.MessageType.Info,
        message="gateway-ls: how should the selection be refactored?",
        actions=[types.MessageActionItem(title=title) for title in titles],
    )
    try:
        choice = await asyncio.wait_for(
            ls.window_show_message_request_async(question), INSTRUCTION_QUESTION_S
        )
    except TimeoutError:
        return None
    except Exception as error:  # the client cannot ask: refactor with the default instruction
        log.info("cannot ask for a refactor instruction (%s); using the default", error)
        return DEFAULT_INSTRUCTION
    if choice is None:
        return None
    return titles.get(choice.title)


class RefactorProgress:
    """Work-done progress for one refactor, cancellable from the editor's progress UI."""

    def __init__(self, ls: FeatureServer, request_id: object = None) -> None:
        self._ls = ls
        self._request_id = request_id
        self._token: str | None = None
        self._task = asyncio.current_task()
        self._last_percentage = -1

    def begin(self) -> None:
        if not client_supports_progress(self._ls):
            return
        token = self._token = f"gateway-ls-refactor-{uuid.uuid4()}"
        progress = self._ls.work_done_progress
        progress.create(token, callback=lambda *_: self._on_created(token))
        progress.begin(
            token,
            types.WorkDoneProgressBegin(
                title="gateway-ls: refactoring", message="asking the model…", cancellable=True
            ),
        )
        self._cancel_on(progress.tokens.get(token))

    def _on_created(self, token: str) -> None:
        """pygls files a new cancel future for the token once the client confirms it."""
        tokens = self._ls.work_done_progress.tokens
        if self._token != token:  # ended before the client answered
            tokens.pop(token, None)
            return
        self._cancel_on(tokens.get(token))

    def _cancel_on(self, future: Future[Any] | None) -> None:
        if future is not None:
            future.add_done_callback(lambda f: self._cancel() if f.cancelled() else None)

    def _cancel(self) -> None:
        """Stop the refactor; the request is answered as cancelled, as the protocol asks.
        Cancelling the task alone would leave pygls waiting on it and the editor unanswered."""
        if self._request_id is not None:
            self._ls.gateway_protocol.cancel_request(self._request_id)
        elif self._task is not None:
            self._task.cancel()

    def tokens(self, received: int, budget: int) -> None:
        if self._token is None:
            return
        percentage = min(99, received * 100 // max(budget, 1))
        if percentage == self._last_percentage:
            return
        self._last_percentage = percentage
        self._ls.work_done_progress.report(
            self._token,
            types.WorkDoneProgressReport(message=f"{received} tokens", percentage=percentage),
        )

    def end(self, message: str) -> None:
        if self._token is None:
            return
        self._ls.work_done_progress.end(self._token, types.WorkDoneProgressEnd(message=message))
        self._ls.work_done_progress.tokens.pop(self._token, None)
        self._token = None


def refactor_actions(uri: str, selection: types.Range) -> list[types.CodeAction]:
    """The refactor offered on a selection: one that asks for the instruction, and one per
    ready instruction."""
    from lsp_server.refactor.prompt import READY_INSTRUCTIONS  # not needed to start

    target = {"uri": uri, "range": _range_json(selection)}
    actions = [_refactor_action(REFACTOR_ACTION_TITLE, {**target, "instruction": ""})]
    for title, instruction in READY_INSTRUCTIONS:
        actions.append(
            _refactor_action(f"Refactor: {title}", {**target, "instruction": instruction})
        )
    return actions


def _refactor_action(title: str, argument: dict[str, Any]) -> types.CodeAction:
    return types.CodeAction(
        title=title,
        kind=types.CodeActionKind.RefactorRewrite,
        command=types.Command(title=title, command=CMD_REFACTOR, arguments=[argument]),
    )


def _range_json(selection: types.Range) -> dict[str, Any]:
    return {
        "start": {"line": selection.start.line, "character": selection.start.character},
        "end": {"line": selection.end.line, "character": selection.end.character},
    }


def _parse_range(value: Any) -> types.Range:
    try:
        start, end = value["start"], value["end"]
        return types.Range(
            start=types.Position(line=int(start["line"]), character=int(start["character"])),
            end=types.Position(line=int(end["line"]), character=int(end["character"])),
        )
    except (KeyError, TypeError, ValueError):
        raise ValueError("gatewayLs.refactor: range must be {start, end} positions") from None
