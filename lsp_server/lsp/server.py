"""The LSP front door: pygls handlers wired to the application core (`Engine`), and nothing more.

Inline completion and completion both ask the core's suggestion service; code actions and the
`gatewayLs.*` commands go to its refactor service and router. A newer request of the same kind
(inline completion, completion) for a document supersedes the one in flight; the two kinds are
independent, as editors that show both send both for one keystroke. `$/cancelRequest` stops the
backend calls at once. The server's state and the services the handlers call are
`GatewayServer` (`lsp/gateway_server.py`); the next edit, the refactor command, the completion
items and the local model's loading progress are modules of their own beside this one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from lsprotocol import types

from lsp_server.config.model import Config
from lsp_server.lsp.client_capabilities import client_expands_snippets
from lsp_server.lsp.completion_items import completion_item
from lsp_server.lsp.cursor_report import NOTIFY_CURSOR, parse_cursor_report
from lsp_server.lsp.documents import offset_at, open_document
from lsp_server.lsp.gateway_server import SETTINGS_KEY, GatewayServer
from lsp_server.lsp.next_edit import register_next_edit
from lsp_server.lsp.refactor_command import CMD_REFACTOR, refactor_actions, run_refactor_command

CMD_SET_OFFLINE = "gatewayLs.setOffline"
CMD_STATUS = "gatewayLs.status"
# The command an inline item carries: LSP 3.18 clients run it once they have inserted the item.
CMD_INLINE_ACCEPTED = "gatewayLs.inlineAccepted"
INLINE_ACCEPTED_TITLE = "Inline suggestion accepted"
OFFLINE_MODES = ("auto", "always", "never")

log = logging.getLogger(__name__)


def create_server(config: Config, *, watch_config: bool = True) -> GatewayServer:
    server = GatewayServer(config, watch_config=watch_config)
    register_features(server)
    return server


def register_features(server: GatewayServer) -> None:
    register_next_edit(server)

    @server.feature(types.INITIALIZE)
    def initialize(ls: GatewayServer, params: types.InitializeParams) -> None:
        """Starts preparing the engine; `initializationOptions.gatewayLs` applies over the file."""
        ls.start_preparing()
        options = params.initialization_options
        if isinstance(options, Mapping) and SETTINGS_KEY in options:
            ls.apply_overrides(options[SETTINGS_KEY], origin="initializationOptions")

    @server.feature(types.INITIALIZED)
    async def initialized(ls: GatewayServer, params: types.InitializedParams) -> None:
        """Watches the file, starts the services and warns of API keys not set."""
        ls.client_log.attach()
        await ls.start_watching()  # first: a change made while services start is not missed
        await ls.start_services_when_prepared()
        ls.start_publishing()
        ls.warn_missing_keys()

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: GatewayServer, params: None) -> None:
        """Stops the services, the local model with them."""
        await ls.stop()
        ls.client_log.detach()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(
        ls: GatewayServer, params: types.DidChangeConfigurationParams
    ) -> None:
        """Applies `settings.gatewayLs` over the file (screened: see Configuration)."""
        settings = params.settings
        if isinstance(settings, Mapping) and SETTINGS_KEY in settings:
            ls.apply_overrides(settings[SETTINGS_KEY], origin="workspace/didChangeConfiguration")

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: GatewayServer, params: types.DidOpenTextDocumentParams) -> None:
        """Gathers context from the document and has the local model read ahead in it."""
        ls.note_document(params.text_document.uri, "opened")
        ls.read_ahead(params.text_document.uri, None)

    @server.feature(NOTIFY_CURSOR)
    def did_move_cursor(ls: GatewayServer, params: Any) -> None:
        """gateway-ls's own: the cursor came to rest; the local model reads the prompt there."""
        report = parse_cursor_report(params)
        if report is not None:
            ls.cursor_moved(report.uri, report.position)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: GatewayServer, params: types.DidSaveTextDocumentParams) -> None:
        """Gathers context from the saved document."""
        ls.note_document(params.text_document.uri, "saved")

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def did_change_workspace_folders(
        ls: GatewayServer, params: types.DidChangeWorkspaceFoldersParams
    ) -> None:
        """Follows the workspace folders, where context and imports are looked up."""
        ls.update_workspace_folders()

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: GatewayServer, params: types.DidChangeTextDocumentParams) -> None:
        """The model reads ahead up to where the person is typing (the last change's end),
        and a next edit asked there once typing pauses is prepared."""
        uri = params.text_document.uri
        document = open_document(ls, uri)
        change = params.content_changes[-1] if params.content_changes else None
        if document is None or change is None:
            return
        if isinstance(change, types.TextDocumentContentChangePartial):
            offset = offset_at(document, change.range.start) + len(change.text)
            ls.note_document(uri, "changed", change.range.start.line)
        else:
            offset = None
            ls.note_document(uri, "changed")
        ls.prefill(uri, offset)
        if offset is not None:
            ls.prepare_next_edit(uri, offset)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: GatewayServer, params: types.DidCloseTextDocumentParams) -> None:
        """Forgets the document."""
        ls.forget_document(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(
        ls: GatewayServer, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList:
        """Ghost text at the cursor from the fastest endpoint that may see the document."""
        found = await ls.suggest_at(
            params.text_document.uri, params.position, kind=types.TEXT_DOCUMENT_INLINE_COMPLETION
        )
        if found is None or not found[1].text:
            return types.InlineCompletionList(items=[])
        document, suggestion = found
        offer_id = ls.engine.suggestions.offer(
            document.uri, offset_at(document, params.position), suggestion
        )
        accepted = None
        if offer_id is not None:
            accepted = types.Command(
                title=INLINE_ACCEPTED_TITLE, command=CMD_INLINE_ACCEPTED, arguments=[offer_id]
            )
        item = types.InlineCompletionItem(
            insert_text=suggestion.text,
            range=types.Range(start=params.position, end=params.position),
            command=accepted,
        )
        return types.InlineCompletionList(items=[item])

    @server.feature(
        types.TEXT_DOCUMENT_COMPLETION,
        types.CompletionOptions(trigger_characters=[".", "(", " ", "\n"], resolve_provider=False),
    )
    async def completion(ls: GatewayServer, params: types.CompletionParams) -> types.CompletionList:
        """The same suggestion as one completion item, for clients without ghost text."""
        found = await ls.suggest_at(
            params.text_document.uri, params.position, kind=types.TEXT_DOCUMENT_COMPLETION
        )
        if found is None or not found[1].text:
            return types.CompletionList(is_incomplete=True, items=[])
        document, suggestion = found
        return types.CompletionList(
            is_incomplete=True,
            items=[
                completion_item(
                    document, params.position, suggestion, snippets=client_expands_snippets(ls)
                )
            ],
        )

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.RefactorRewrite]),
    )
    def code_action(ls: GatewayServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        """Refactor actions (`refactor.rewrite`) for a selection, with ready instructions."""
        selection = params.range
        if selection.start == selection.end:
            return []
        if open_document(ls, params.text_document.uri) is None:
            return []
        only = params.context.only
        if only and not any(types.CodeActionKind.RefactorRewrite.startswith(k) for k in only):
            return []
        return refactor_actions(params.text_document.uri, selection)

    @server.command(CMD_STATUS)
    async def status(ls: GatewayServer, *args: Any) -> dict[str, Any]:
        """The routing status: endpoints, recent decisions with their reasons, work in flight;
        answered once the server is ready for a keystroke (the core built and prepared)."""
        await ls.keystrokes_ready()
        engine = ls.engine
        return {
            **engine.router.status(),
            "inflight": ls.inflight(),
            "context": engine.context.status(),
            "privacy": {"withheld_pieces": engine.privacy.withheld},
        }

    @server.command(CMD_INLINE_ACCEPTED)
    def inline_accepted(ls: Any, *args: Any) -> dict[str, Any]:
        """An inline suggestion was inserted (the command its item carries): counted for the
        endpoint that answered, and its kept rate measured later. The one argument is the id
        the server gave the item; anything else the client sends is ignored."""
        offer_id = args[0] if args else None
        counted = isinstance(offer_id, str) and ls.engine.suggestions.accepted(offer_id)
        if not counted:
            log.info(
                "%s: no inline suggestion offered lately has the id %.40r; ignored",
                CMD_INLINE_ACCEPTED,
                offer_id,
            )
        return {"accepted": counted}

    @server.command(CMD_SET_OFFLINE)
    def set_offline(ls: GatewayServer, *args: Any) -> dict[str, Any]:
        """Sets offline mode: "auto", "always" or "never"."""
        mode = args[0] if args else None
        if isinstance(mode, Mapping):
            mode = mode.get("mode")
        if mode not in OFFLINE_MODES:
            raise ValueError(f"gatewayLs.setOffline takes one of {', '.join(OFFLINE_MODES)}")
        ls.engine.router.set_offline(mode)
        return {"offline": mode}

    @server.command(CMD_REFACTOR)
    async def refactor(ls: GatewayServer, *args: Any) -> dict[str, Any]:
        """Rewrites `{uri, range, instruction}` with a reasoning model, as a reviewable edit."""
        request_id = ls.gateway_protocol.link_current_task()
        return await run_refactor_command(ls, args, request_id=request_id)
