"""The language server's state and the plain services its handlers call (`lsp/server.py`
registers those handlers): the core (`Engine`), built once the event loop runs, the
configuration and the editor's overrides, what the context store sees, and inline
suggestions, superseded per document and kind.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import unquote

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from lsp_server import __version__
from lsp_server.backends.factory import preparing_remote_backends
from lsp_server.config.editor_settings import RefusedSetting, Settings
from lsp_server.config.loader import ConfigError, missing_api_keys
from lsp_server.config.model import Config
from lsp_server.config.watcher import ConfigWatcher
from lsp_server.lsp.client_log import ClientLog
from lsp_server.lsp.documents import offset_at, open_document
from lsp_server.lsp.first_messages import read_and_write_once
from lsp_server.lsp.model_progress import ModelProgress
from lsp_server.lsp.protocol import GatewayProtocol, json_params_converter
from lsp_server.lsp.superseding import Superseding
from lsp_server.reasons import Reason

if TYPE_CHECKING:
    from lsp_server.core.engine import Engine
    from lsp_server.routing.status_file import StatusPublisher
    from lsp_server.suggest.service import Suggestion

log = logging.getLogger(__name__)

# The core (`Engine` and the services, routing and privacy under it) is imported where it is first
# used, and on a worker thread once `initialize` is answered (`_prepare`): the editor waits for
# that answer, and it needs none of them.
ENGINE_MODULE = "lsp_server.core.engine"

SETTINGS_KEY = "gatewayLs"
# A read-ahead is done again once the context store has gathered, within this long.
GATHERING_WAIT_S = 10.0
GATHERING_POLL_S = 0.1


@dataclass(frozen=True, slots=True)
class _Cursor:
    """Where a suggestion is asked for: a document's text and the cursor's offset in it."""

    uri: str
    text: str
    offset: int
    language: str


class GatewayServer(LanguageServer):
    def __init__(self, config: Config, *, watch_config: bool = True) -> None:
        super().__init__(
            "gateway-ls",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=GatewayProtocol,
            converter_factory=json_params_converter,
        )
        self.settings = Settings(config, on_refused=self.report_refused_setting)
        self._watch_config = watch_config
        self._watcher: ConfigWatcher | None = None
        self._engine: Engine | None = None
        self._inflight: dict[tuple[str, str], asyncio.Task[Any]] = {}
        # Where our own clients last reported the cursor, per open document.
        self._cursors: dict[str, types.Position] = {}
        self._reading_after_gathering: asyncio.Task[None] | None = None
        self._publisher: StatusPublisher | None = None
        self.client_log = ClientLog(self)
        self._prepared: asyncio.Future[None] | None = None
        # What the core does once before the first keystroke, on a thread (`Engine`).
        self._keystrokes_prepared: asyncio.Future[None] | None = None
        self._messages_read: asyncio.Future[None] | None = None

    @property
    def gateway_protocol(self) -> GatewayProtocol:
        return cast(GatewayProtocol, self.protocol)

    # -- the core, built once the event loop runs -----------------------------------------

    def start_preparing(self) -> None:
        """Have the HTTP stack imported and its certificates loaded (if the command line has
        not started that already) and the core imported, off the event loop; on the loop they
        would delay the first keystroke by more than its deadline."""
        if self._prepared is None:
            self._prepared = asyncio.ensure_future(self._prepare())

    async def _prepare(self) -> None:
        """The HTTP stack's and the core's imports begin once the `initialize` answer is
        written (a task's first step runs on the loop's next turn): imports hold the
        interpreter lock, and begun any earlier, even on a thread, they delay the answer the
        editor waits for by their whole length. Then the converter learns a keystroke's
        messages on a thread (`first_messages`), which a keystroke need not wait for."""
        http_stack = asyncio.wrap_future(preparing_remote_backends())
        await asyncio.to_thread(importlib.import_module, ENGINE_MODULE)
        self._messages_read = asyncio.ensure_future(
            asyncio.to_thread(read_and_write_once, self.protocol)
        )
        await http_stack

    async def start_services_when_prepared(self) -> None:
        if self._prepared is not None:
            await asyncio.shield(self._prepared)
        self.start_services()

    def start_services(self) -> None:
        """Build the core now and start loading the local model if it is enabled: it is
        the answer for offline and sensitive work, which may come with the first keystroke."""
        self.engine.start_local_model()

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            from lsp_server.core.engine import Engine

            progress = ModelProgress(self, asyncio.get_running_loop())
            self._engine = Engine.for_process(self.settings.effective, on_model_progress=progress)
            self._keystrokes_prepared = asyncio.ensure_future(
                asyncio.to_thread(self._engine.prepare_keystrokes)
            )
            self.update_workspace_folders()
            for document in list(self.workspace.text_documents.values()):
                self.note_document(document.uri, "opened")
        return self._engine

    @property
    def has_engine(self) -> bool:
        return self._engine is not None

    async def engine_ready(self) -> None:
        """Wait for the core's imports (begun after `initialize`) rather than import it on
        the event loop."""
        if self._engine is None and self._prepared is not None:
            await asyncio.shield(self._prepared)
            self.start_services()

    async def keystrokes_ready(self) -> None:
        """Wait until the core is built and has done what the first keystroke would do once
        (where `initialize` began preparing it)."""
        await self.engine_ready()
        for preparing in (self._keystrokes_prepared, self._messages_read):
            if preparing is not None:
                await asyncio.shield(preparing)

    def superseding(self, uri: str, kind: str) -> Superseding:
        """Run the current request as the one of `kind` for `uri`: an older one still running
        is cancelled, and a newer one cancels this."""
        return Superseding(self._inflight, (uri, kind))

    # -- what the context store sees -------------------------------------------------------

    def update_workspace_folders(self) -> None:
        if self._engine is None:
            return
        folders = [folder.uri for folder in self.workspace.folders.values()]
        if not folders and self.workspace.root_uri:
            folders = [self.workspace.root_uri]
        self._engine.context.set_workspace_folders(folders)

    def note_document(self, uri: str, event: str, line: int | None = None) -> None:
        """Tell the context store and the edit history of a document event ("opened",
        "changed" at `line`, None when the whole text was sent, "saved"); the store only
        notes it, and gathers once typing pauses."""
        document = open_document(self, uri)
        if document is None or self._engine is None:
            return
        context, language = self._engine.context, document.language_id or ""
        history = self._engine.next_edits
        if event == "changed":
            history.changed(document.uri, document.source, line)
        elif event == "opened":
            history.opened(document.uri, document.source)
        if event == "changed" and line is not None:
            context.changed(document.uri, document.source, language, line)
        elif event == "saved":
            context.saved(document.uri, document.source, language)
        elif event == "opened":
            context.opened(document.uri, document.source, language)

    def apply_config(self, config: Config) -> None:
        if self._engine is not None:
            self._engine.reconfigure(config)
            self._engine.start_local_model()

    # -- configuration --------------------------------------------------------------------

    def apply_overrides(self, overrides: Any, *, origin: str) -> None:
        if overrides is None:
            return
        if not isinstance(overrides, Mapping):
            self.report_config_error(
                ConfigError("expected an object", file=origin, key=SETTINGS_KEY)
            )
            return
        try:
            config = self.settings.with_overrides(overrides, origin=origin)
        except ConfigError as error:
            self.report_config_error(error)
            return
        self.apply_config(config)

    def on_file_config(self, config: Config) -> None:
        try:
            effective = self.settings.with_file(config)
        except ConfigError as error:
            self.report_config_error(error)
            return
        log.info("configuration reloaded from %s", config.source or "defaults")
        self.apply_config(effective)

    def report_config_error(self, error: ConfigError) -> None:
        message = f"gateway-ls: invalid configuration, the last good one stays in force: {error}"
        log.error("%s", message)
        self.window_show_message(
            types.ShowMessageParams(type=types.MessageType.Error, message=message)
        )

    def report_refused_setting(self, refusal: RefusedSetting, origin: str) -> None:
        message = (
            f"gateway-ls: ignored the editor setting {SETTINGS_KEY}.{refusal.key} "
            f"(from {origin}): {refusal.why}; the other settings apply"
        )
        log.warning("%s", message)
        self.window_show_message(
            types.ShowMessageParams(type=types.MessageType.Warning, message=message)
        )

    async def start_watching(self) -> None:
        if not self._watch_config or self._watcher is not None:
            return
        self._watcher = ConfigWatcher(
            self.settings.effective.source,
            self.on_file_config,
            self.report_config_error,
            loaded=self.settings.file_config,
        )
        await self._watcher.start()

    def start_publishing(self) -> None:
        if self._publisher is None:
            from lsp_server.routing.status_file import StatusPublisher

            self._publisher = StatusPublisher(self.engine.router.status, kind="lsp")
            self._publisher.start()

    async def stop(self) -> None:
        if self._publisher is not None:
            await self._publisher.stop()
        if self._watcher is not None:
            await self._watcher.stop()
        if self._engine is not None:
            await self._engine.aclose()

    # -- inline suggestions ---------------------------------------------------------------

    def cursor_moved(self, uri: str, position: types.Position) -> None:
        """The client says the cursor rests at `position`: read the prompt there ahead."""
        document = open_document(self, uri)
        if document is None:
            return
        self._cursors[unquote(uri)] = position  # one per open document, dropped on close
        self.read_ahead(uri, offset_at(document, position))

    def read_ahead(self, uri: str, offset: int | None) -> None:
        """`prefill` now, and once more when the context store has gathered what the latest
        events gave it: the prompt then starts with that context, and the first read would not
        be its start (a second read of an unchanged prompt costs one token)."""
        self.prefill(uri, offset)
        if self._engine is None or not self._engine.context.status()["gathering"]:
            return
        if self._reading_after_gathering is not None:
            self._reading_after_gathering.cancel()
        self._reading_after_gathering = asyncio.get_running_loop().create_task(
            self._prefill_once_gathered(uri, offset)
        )

    async def _prefill_once_gathered(self, uri: str, offset: int | None) -> None:
        engine = self._engine
        deadline = asyncio.get_running_loop().time() + GATHERING_WAIT_S
        while engine is not None and engine.context.status()["gathering"]:
            if asyncio.get_running_loop().time() > deadline:
                return
            await asyncio.sleep(GATHERING_POLL_S)
        self.prefill(uri, offset)

    def forget_document(self, uri: str) -> None:
        self._cursors.pop(unquote(uri), None)
        for key in [k for k in self._inflight if k[0] == uri]:
            self._inflight.pop(key).cancel()
        if self._engine is not None:
            self._engine.suggestions.forget(uri)
            self._engine.context.closed(uri)
            self._engine.next_edits.closed(uri)

    async def suggest_at(
        self, uri: str, position: types.Position, *, kind: str
    ) -> tuple[TextDocument, Suggestion] | None:
        """The suggestion at `position`; `kind` names the request (the LSP method), and only a
        newer request of the same kind for the same document supersedes this one."""
        document = open_document(self, uri)
        if document is None:
            return None
        offset = offset_at(document, position)
        with self.superseding(uri, kind):  # an older keystroke's request is cancelled
            request = _Cursor(uri, document.source, offset, document.language_id or "")
            if self._engine is None and self._prepared is not None:
                suggestion = await self._suggest_once_prepared(request)
            else:
                suggestion = await self._suggest(request)
        return document, suggestion

    def prefill(self, uri: str, offset: int | None) -> None:
        """Let the local model read the prompt of a suggestion at `offset` while idle; None:
        where the client last reported the cursor, else the document's start (where an editor
        opens a file)."""
        document = open_document(self, uri)
        if document is None or self._engine is None:
            return
        if offset is None:
            cursor = self._cursors.get(unquote(uri))
            offset = offset_at(document, cursor) if cursor is not None else 0
        position = min(offset, len(document.source))
        self._engine.suggestions.prefill(
            uri=uri, text=document.source, offset=position, language=document.language_id or ""
        )

    def prepare_next_edit(self, uri: str, offset: int) -> None:
        """A next edit asked at `offset` once typing pauses finds its request assembled."""
        document = open_document(self, uri)
        if document is None or self._engine is None:
            return
        self._engine.next_edits.prepare(
            uri=document.uri,
            text=document.source,
            offset=offset,
            language=document.language_id or "",
        )

    async def _suggest(self, cursor: _Cursor) -> Suggestion:
        return await self.engine.suggestions.suggest(
            uri=cursor.uri, text=cursor.text, offset=cursor.offset, language=cursor.language
        )

    async def _suggest_once_prepared(self, request: _Cursor) -> Suggestion:
        """A keystroke that comes while the HTTP stack is still being prepared waits for it,
        and is served, within its one deadline; past it, it gets no suggestion."""
        assert self._prepared is not None
        budget_s = self.settings.effective.routing.inline_deadline_ms / 1000
        try:
            async with asyncio.timeout(budget_s):
                await asyncio.shield(self._prepared)
                self.start_services()
                return await self._suggest(request)
        except TimeoutError:
            from lsp_server.suggest.service import Suggestion

            return Suggestion("", None, Reason.DEADLINE, budget_s * 1000, timed_out=True)

    def inflight(self) -> dict[str, int]:
        """Work under way, for `gatewayLs.status`: the counts a leak would make grow."""
        return {
            "requests": len(self.protocol._request_futures),
            "inline": len(self._inflight),
            "tasks": len(asyncio.all_tasks()),
        }

    # -- what the person should know -------------------------------------------------------

    def warn_missing_keys(self) -> None:
        for endpoint, variable in missing_api_keys(self.settings.effective):
            message = (
                f"gateway-ls: endpoint {endpoint}: environment variable {variable} is not set; "
                "its requests fail until it is"
            )
            log.warning("%s", message)
            self.window_show_message(
                types.ShowMessageParams(type=types.MessageType.Warning, message=message)
            )
