"""Session-scoped fixtures around the real bundled model; conftest.py imports them.

The model is assembled (first run only) and loaded once per test session; every test that needs
it shares the one `LocalBackend`, so tests read its counters as differences.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from lsp_server.backends.bundled_model import ensure_bundled_model
from lsp_server.backends.local.backend import LocalBackend
from lsp_server.config.model import LocalConfig


@pytest.fixture(scope="session")
def bundled_model_path() -> Path:
    """The verified bundled GGUF file in the cache dir (`$GATEWAY_LS_CACHE_DIR` if set)."""
    return ensure_bundled_model()


@pytest.fixture(scope="session")
def local_backend(bundled_model_path: Path) -> Iterator[LocalBackend]:
    """The bundled model, really loaded, shared by the whole session.

    One thread: test runs share few cores, and llama.cpp's spinning worker threads slow down
    tenfold when the machine has fewer free cores than threads.
    """
    # max_tokens is raised so tests can ask for long generations (and cancel them), and the
    # window unbounded and the deadline long so they can give it long prompts, read whole.
    config = LocalConfig(
        model_path=str(bundled_model_path),
        n_ctx=2048,
        n_threads=1,
        max_tokens=512,
        window_tokens=0,
        deadline_ms=600_000,
    )
    backend = LocalBackend(config)
    asyncio.run(backend.ensure_loaded())
    yield backend
    asyncio.run(backend.aclose())
