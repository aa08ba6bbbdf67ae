"""`gateway-ls serve`: run the language server over stdio, TCP or WebSocket."""

from __future__ import annotations

import logging
import sys

from lsp_server.bounded_stdin import BoundedStdin
from lsp_server.config import Config
from lsp_server.loopback import is_loopback
from lsp_server.server import create_server

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
        server.start_io(stdin=BoundedStdin(sys.stdin.buffer))  # type: ignore[arg-type]
    return 0


def _warn_if_exposed(host: str) -> None:
    if not is_loopback(host):
        log.warning(
            "listening on %s: the LSP has no authentication; anyone who can reach this "
            "address can read the documents the editor sends",
            host,
        )
