"""What the feature modules (the next edit, the refactor command, the model's loading
progress) need of the language server: `GatewayServer` is one. Typed against this, a feature
does not import the server that registers it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from lsprotocol import types
    from pygls.progress import Progress
    from pygls.workspace import Workspace

    from lsp_server.core.engine import Engine
    from lsp_server.lsp.client_log import ClientLog
    from lsp_server.lsp.protocol import GatewayProtocol
    from lsp_server.lsp.superseding import Superseding


class FeatureServer(Protocol):
    client_log: ClientLog

    # -- the core, and the requests running ------------------------------------------------

    @property
    def engine(self) -> Engine: ...

    @property
    def has_engine(self) -> bool: ...

    async def engine_ready(self) -> None: ...

    def superseding(self, uri: str, kind: str) -> Superseding: ...

    @property
    def gateway_protocol(self) -> GatewayProtocol: ...

    # -- pygls: the documents, the client and the messages to it ---------------------------

    @property
    def workspace(self) -> Workspace: ...

    @property
    def client_capabilities(self) -> types.ClientCapabilities: ...

    @property
    def work_done_progress(self) -> Progress: ...

    def window_show_message(self, params: types.ShowMessageParams) -> None: ...

    async def window_show_message_request_async(
        self, params: types.ShowMessageRequestParams
    ) -> types.MessageActionItem | None: ...

    async def workspace_apply_edit_async(
        self, params: types.ApplyWorkspaceEditParams
    ) -> types.ApplyWorkspaceEditResult: ...
