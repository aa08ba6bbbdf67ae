"""The local model's prompt: `window_tokens` bounds how much of the file it reads, and a preset
decides how it is prompted (Gemma: the prefix alone; Qwen2.5-Coder: FIM with the suffix)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from bench.harness.permits import permit_for
from lsp_server.backends.base import CompletionRequest
from lsp_server.backends.bundled_model import preset_model_path
from lsp_server.backends.local.backend import LocalBackend
from lsp_server.backends.model_presets import QWEN_CODER_0_5B
from lsp_server.config.model import LocalConfig

LONG_FILE = "".join(f"value_{i} = compute({i}, scale=2)\n" for i in range(400))


async def prompt_tokens(backend: LocalBackend, request: CompletionRequest) -> int:
    async for _ in backend.complete(request, permit=permit_for(backend)):
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


needs_qwen = pytest.mark.skipif(
    importlib.util.find_spec(QWEN_CODER_0_5B.parts[0][0]) is None
    and not preset_model_path(QWEN_CODER_0_5B).is_file(),
    reason="qwen2.5-coder-0.5b is neither installed (gateway-ls[qwen2-5-coder-0-5b]) nor pulled",
)


@pytest.mark.model
@needs_qwen
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
    answer = "".join(
        [piece async for piece in backend.complete(request, permit=permit_for(backend))]
    )

    assert backend.fim_supported is True
    assert "a + b" in answer or "b + a" in answer
    await backend.aclose()


@pytest.mark.model
@needs_qwen
async def test_a_typed_character_continues_the_middle_without_reading_the_suffix_again() -> None:
    backend = LocalBackend(LocalConfig(model=QWEN_CODER_0_5B.name, n_ctx=2048, n_threads=1))
    await backend.ensure_loaded()
    suffix = "".join(f"\nassert add({i}, {i}) == {2 * i}" for i in range(60)) + "\n"
    cold = CompletionRequest(prefix="def add(a, b):\n    ", suffix=suffix, max_tokens=8)
    "".join([piece async for piece in backend.complete(cold, permit=permit_for(backend))])
    cold_prompt = backend.last_prompt_tokens
    assert cold_prompt > 150  # the suffix (up to a quarter of the window) is most of it

    typed = CompletionRequest(prefix="def add(a, b):\n    r", suffix=suffix, max_tokens=8)
    answer = "".join([piece async for piece in backend.complete(typed, permit=permit_for(backend))])

    # Only the typed text was new: the prompt is the cold one with it after the middle token.
    assert backend.last_prompt_tokens - backend.last_reused_tokens <= 3
    assert backend.last_prompt_tokens <= cold_prompt + 3
    assert "a + b" in answer or "b + a" in answer  # "r" went on as code: `return`, or `r = `
    await backend.aclose()


@pytest.mark.unit
@pytest.mark.parametrize(
    ("config", "asked"),
    [
        (LocalConfig(model="gemma-3-270m"), False),  # bench_next_edit: false edits
        (LocalConfig(model=QWEN_CODER_0_5B.name), True),
        (LocalConfig(model="qwen2.5-coder-1.5b"), True),
        (LocalConfig(model="qwen2.5-coder-0.5b-base"), False),  # not measured
        (LocalConfig(model_path="/models/own.gguf"), True),  # the user's own choice
        (LocalConfig(model="auto"), None),  # the preset auto serves, once loaded
    ],
)
def test_a_preset_says_whether_it_is_asked_for_next_edits(
    config: LocalConfig, asked: bool | None
) -> None:
    backend = LocalBackend(config)
    assert backend.next_edit_supported is asked
