"""The local model's loading progress, told to the person: on the editor's log (or stderr
before a client listens) and as work-done progress in the editor's UI; a failed load is an
error message."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from lsprotocol import types

from lsp_server.backends.local_model import LocalState
from lsp_server.lsp.client_capabilities import client_supports_progress
from lsp_server.progress import StderrProgress

if TYPE_CHECKING:
    from lsp_server.lsp.feature_server import FeatureServer

log = logging.getLogger(__name__)


class ModelProgress:
    """Called with (message, fraction) from the thread that loads the model; reports on the
    server's event loop."""

    def __init__(self, ls: FeatureServer, loop: asyncio.AbstractEventLoop) -> None:
        self._ls = ls
        self._loop = loop
        self._token: str | None = None
        self._stderr = StderrProgress()
        self._last_message = ""

    def __call__(self, message: str, fraction: float | None) -> None:
        client_log = self._ls.client_log
        if client_log.attached:
            if message != self._last_message:
                self._last_message = message
                client_log.send(types.MessageType.Info, f"gateway-ls: {message}")
        else:
            self._stderr(message, fraction)
        self._loop.call_soon_threadsafe(self._report, message, fraction)

    def _local_model_failed(self) -> bool:
        model = self._ls.engine.router.pool.local_model if self._ls.has_engine else None
        return model is not None and model.state is LocalState.FAILED

    def _report(self, message: str, fraction: float | None) -> None:
        ls = self._ls
        percentage = None if fraction is None else int(fraction * 100)
        done = fraction is not None and fraction >= 1.0
        if done and self._local_model_failed():
            log.error("%s", message)
            ls.window_show_message(
                types.ShowMessageParams(
                    type=types.MessageType.Error, message=f"gateway-ls: {message}"
                )
            )
        if not client_supports_progress(ls):
            return
        if self._token is None:
            token = f"gateway-ls-model-{uuid.uuid4()}"
            self._token = token
            ls.work_done_progress.create(token)
            ls.work_done_progress.begin(
                token,
                types.WorkDoneProgressBegin(
                    title="gateway-ls: loading the local model",
                    message=message,
                    percentage=percentage,
                ),
            )
        token = self._token
        if done:
            ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))
            self._token = None
        else:
            ls.work_done_progress.report(
                token, types.WorkDoneProgressReport(message=message, percentage=percentage)
            )
