"""The local model's prompt: `window_tokens` bounds how much of the file it reads, and a preset
decides how it is prompted (Gemma: the prefix alone; Qwen2.5-Coder: FIM with the suffix)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from lsp_server.backends.base import CompletionRequest
from lsp_server.backends.local import LocalBackend
from lsp_server.backends.model_presets import QWEN_CODER_0_5B
from lsp_server.config.model import LocalConfig

LONG_FILE = "".join(f"value_{i} = compute({i}, scale=2)\n" for i in range(400))


async def prompt_tokens(backend: LocalBackend, request: CompletionRequest) -> int:
    async for _ in backend.complete(request):
        break
    return backend.last_prompt_tokens


@pytest.mark.model
async def test_window_tokens_bounds_the_file_in_the_prompt(bundled_model_path: Path) -> None:
    request = CompletionRequest(prefix=LONG_FILE, suffix="", max_tokens=4)
    sizes = {}
    for window in (0, 128):
        backend = LocalBackend(
            LocalConfig(
                model_path=str(bundled_model_path), n_ctx=2048, n_threads=1, window_tokens=window
            )
        )
        await backend.ensure_loaded()
        sizes[window] = await prompt_tokens(backend, request)
        await backend.aclose()

    assert sizes[128] <= 128 + 4  # the window, and the BOS and FIM tokens at most
    assert sizes[0] > 1000  # unbounded, the file fills what n_ctx leaves


@pytest.mark.model
async def test_the_bundled_gemma_preset_has_no_fim(bundled_model_path: Path) -> None:
    backend = LocalBackend(LocalConfig(model="gemma-3-270m", n_ctx=256, n_threads=1))
    await backend.ensure_loaded()

    assert backend.model_path == bundled_model_path
    assert backend.fim_supported is False
    await backend.aclose()


@pytest.mark.model
@pytest.mark.skipif(
    importlib.util.find_spec(QWEN_CODER_0_5B.parts[0][0]) is None,
    reason="the qwen2.5-coder-0.5b packages are not installed (gateway-ls[qwen2-5-coder-0-5b])",
)
async def test_qwen_coder_preset_fills_in_the_middle_with_the_suffix() -> None:
    backend = LocalBackend(LocalConfig(model=QWEN_CODER_0_5B.name, n_ctx=1024, n_threads=1))
    await backend.ensure_loaded()
    request = CompletionRequest(
        prefix="def add(a, b):\n    return ",
        suffix="\n\n\nassert add(2, 3) == 5\n",
        max_tokens=8,
        stop=("\n",),
        single_line=True,
    )
    answer = "".join([piece async for piece in backend.complete(request)])

    assert backend.fim_supported is True
    assert "a + b" in answer or "b + a" in answer
    await backend.aclose()
