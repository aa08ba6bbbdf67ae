"""`gateway-ls serve`: run the language server over stdio, TCP or WebSocket."""

from __future__ import annotations

import logging
import os
import sys
from typing import BinaryIO

from lsp_server.config.model import Config
from lsp_server.loopback import is_loopback
from lsp_server.lsp.server import create_server
from lsp_server.lsp.stdio_transport import serve_stdio

log = logging.getLogger(__name__)


def serve(
    config: Config, *, tcp: tuple[str, int] | None = None, ws: tuple[str, int] | None = None
) -> int:
    server = create_server(config)
    if tcp is not None:
        _warn_if_exposed(tcp[0])
        server.start_tcp(*tcp)
    elif ws is not None:
        _warn_if_exposed(ws[0])
        server.start_ws(*ws)
    else:
        return serve_stdio(server, sys.stdin.buffer, _private_stdout())
    return 0


def _private_stdout() -> BinaryIO:
    """The protocol channel on a private copy of stdout, with fd 1 itself sent to stderr.

    Native code in the process writes to fd 1: llama-cpp-python even points fd 1 at /dev/null
    while it loads a model, which on stdio would swallow the replies sent meanwhile. With the
    channel on its own descriptor, stray output lands in the log instead.
    """
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return channel


def _warn_if_exposed(host: str) -> None:
    if not is_loopback(host):
        log.warning(
            "listening on %s: the LSP has no authentication; anyone who can reach this "
            "address can read the documents the editor sends",
            host,
        )
