"""The editor's server starts without the gateway's libraries: every module it imports at start
costs start-up time and idle memory on each editor (`bench_lsp_overhead`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

# Imported only by the gateway (`gateway-ls gateway`), or only once the local model is loaded.
GATEWAY_ONLY = ("redis", "prometheus_client", "starlette", "uvicorn", "websockets", "llama_cpp")


def test_serving_an_editor_imports_none_of_the_gateways_libraries() -> None:
    probe = (
        "import sys\n"
        "from lsp_server.cli import serve\n"
        "from lsp_server.lsp import server\n"
        "from lsp_server.core import engine\n"
        f"print(' '.join(m for m in {GATEWAY_ONLY!r} if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.split() == []
