"""The local model honours a gateway client's `max_tokens`; `local.max_tokens` sizes only the
suggestions it writes for an editor."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.harness.permits import permit_for
from lsp_server.backends.base import CompletionRequest, Usage
from lsp_server.backends.local.backend import LocalBackend
from lsp_server.config.model import LocalConfig

pytestmark = pytest.mark.model

COUNTING = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,"


async def test_a_clients_max_tokens_is_honoured_beyond_local_max_tokens(
    bundled_model_path: Path,
) -> None:
    backend = LocalBackend(
        LocalConfig(model_path=str(bundled_model_path), n_ctx=512, n_threads=1, max_tokens=2)
    )
    try:
        await backend.ensure_loaded()
        editor, client = Usage(), Usage()
        request = CompletionRequest(prefix=COUNTING, suffix="", max_tokens=12)
        async for _ in backend.complete(request, editor, permit=permit_for(backend)):
            pass
        asked = CompletionRequest(prefix=COUNTING, suffix="", max_tokens=12, client_max_tokens=True)
        async for _ in backend.complete(asked, client, permit=permit_for(backend)):
            pass
    finally:
        await backend.aclose()
    assert editor.completion_tokens <= 2
    assert client.completion_tokens > 2
