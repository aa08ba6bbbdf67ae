"""The server's log goes to the editor (`window/logMessage`) while one is connected.

Editors show the server's stderr as errors (VS Code marks every stderr line `[error]`), so
normal lines there look like failures. While a client is connected, log records and progress
lines go to it as `window/logMessage` with their own type, and stderr stays quiet; before the
client connects and after it leaves, stderr is the log as usual.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading

from lsprotocol import types
from pygls.lsp.server import LanguageServer

_TYPES = (
    (logging.ERROR, types.MessageType.Error),
    (logging.WARNING, types.MessageType.Warning),
    (logging.INFO, types.MessageType.Info),
)


def message_type(level: int) -> types.MessageType:
    for threshold, kind in _TYPES:
        if level >= threshold:
            return kind
    return types.MessageType.Log


class ClientLog(logging.Handler):
    """A root-logger handler sending records to the client, and a filter muting stderr meanwhile."""

    def __init__(self, server: LanguageServer) -> None:
        super().__init__()
        self._server = server
        self._loop: asyncio.AbstractEventLoop | None = None
        self._muted: list[logging.Handler] = []
        self._sending = threading.local()
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    @property
    def attached(self) -> bool:
        return self._loop is not None

    def attach(self) -> None:
        """Call on the event loop once the client has said `initialized`."""
        if self._loop is not None:
            return
        self._loop = asyncio.get_running_loop()
        root = logging.getLogger()
        self._muted = [h for h in root.handlers if _writes_to_a_stream(h)]
        for handler in self._muted:
            handler.addFilter(_MUTE)
        root.addHandler(self)

    def detach(self) -> None:
        if self._loop is None:
            return
        logging.getLogger().removeHandler(self)
        for handler in self._muted:
            handler.removeFilter(_MUTE)
        self._muted = []
        self._loop = None

    def send(self, kind: types.MessageType, message: str) -> None:
        """`message` to the client's log, from any thread; dropped once the loop is gone."""
        loop = self._loop
        if loop is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._send_now(kind, message)
            return
        with contextlib.suppress(RuntimeError):  # the loop has closed
            loop.call_soon_threadsafe(self._send_now, kind, message)

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(self._sending, "active", False):
            return  # a record logged while sending one: never loop
        try:
            text = self.format(record)
        except Exception:
            self.handleError(record)
            return
        self.send(message_type(record.levelno), text)

    def _send_now(self, kind: types.MessageType, message: str) -> None:
        if self._loop is None:
            return
        self._sending.active = True
        try:
            with contextlib.suppress(Exception):  # the transport is gone: not worth a crash
                self._server.window_log_message(types.LogMessageParams(type=kind, message=message))
        finally:
            self._sending.active = False


def _writes_to_a_stream(handler: logging.Handler) -> bool:
    return isinstance(handler, logging.StreamHandler) and not isinstance(
        handler, logging.FileHandler
    )


def _mute(record: logging.LogRecord) -> bool:
    return False


_MUTE = _mute
