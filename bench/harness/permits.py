"""The gate's permits for tests that call a backend directly: they ask the gate as the router
does (`routing/gate.py`), with nothing to keep home and the offline mode "never"."""

from __future__ import annotations

from lsp_server.backends.base import Backend
from lsp_server.permit import Permit
from lsp_server.routing.gate import Gate

_OPEN = Gate(lambda: "never")


def permit_for(backend: Backend) -> Permit:
    """Leave to call `backend` for a request with nothing private in it."""
    return _OPEN.permit(backend.name, remote=not backend.is_local, held=None)
