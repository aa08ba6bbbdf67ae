"""`model = "auto"` with real models: misses in a row step down to the next installed preset,
answers with room step back up, and each switch waits for the request under way to end."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from bench.harness.permits import permit_for
from lsp_server.backends.base import CompletionRequest
from lsp_server.backends.local import auto_choice, machine_fit
from lsp_server.backends.local.auto_choice import MISSES_TO_STEP_DOWN
from lsp_server.backends.local.backend import LocalBackend
from lsp_server.backends.local.calibration import CalibrationCache, Speed
from lsp_server.backends.model_presets import (
    GEMMA_3_270M,
    PRESETS,
    QWEN_CODER_0_5B,
    QWEN_CODER_1_5B,
)
from lsp_server.config.model import LocalConfig
from tests.support.real_tools import bundled_model_package, require_preset

# Kept figures under which Gemma and the 0.5B fit the deadline and the 1.5B does not, whatever
# the machine: nothing is left to calibrate, and the 0.5B serves first.
FITS = Speed(prompt_tps=2000.0, generation_tps=200.0)
DOES_NOT_FIT = Speed(prompt_tps=2.0, generation_tps=0.5)
REQUEST = CompletionRequest(prefix="def add(a, b):\n    return", suffix="\n", max_tokens=8)
# A request the model writes for a few seconds: under way while the misses come.
LONG = CompletionRequest(
    prefix="# The first 500 prime numbers\nPRIMES = [2, 3, 5, 7, 11, 13, ", suffix="", max_tokens=48
)


async def switched_to(
    backend: LocalBackend, preset: str, timeout_s: float = 120.0
) -> dict[str, Any]:
    """The switch to `preset` once it is listed, the model swapped in."""
    deadline = time.monotonic() + timeout_s
    while True:
        switches = backend.details()["auto"]["switches"]
        if switches and switches[-1]["to"] == preset:
            assert backend.details()["preset"] == preset
            return dict(switches[-1])
        assert time.monotonic() < deadline, f"still {backend.details()['preset']}, not {preset}"
        await asyncio.sleep(0.2)


@pytest.mark.model
async def test_auto_steps_down_after_misses_and_back_up_with_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundled_model_package()
    require_preset(QWEN_CODER_0_5B)
    cache = CalibrationCache(tmp_path / "calibration.json")
    monkeypatch.setattr(machine_fit, "calibration_cache", lambda: cache)
    monkeypatch.setattr(auto_choice, "STEP_UP_AFTER_S", 0.0)
    config = LocalConfig(model="auto")
    for preset in PRESETS.values():
        machine_fit.remember(preset, config, DOES_NOT_FIT if preset == QWEN_CODER_1_5B else FITS)
    backend = LocalBackend(config)
    try:
        await backend.ensure_loaded()
        assert backend.details()["preset"] == QWEN_CODER_0_5B.name
        auto = backend._auto
        assert auto is not None

        # A request under way when the misses call for a step down ends on the model it began
        # on: the switch waits for it.
        stream = backend.complete(LONG, permit=permit_for(backend))
        written = [await anext(stream)]
        for _ in range(MISSES_TO_STEP_DOWN):
            auto.missed()
        written += [piece async for piece in stream]
        assert len("".join(written)) > 20
        assert backend.details()["preset"] == QWEN_CODER_0_5B.name
        switch = await switched_to(backend, GEMMA_3_270M.name)
        assert switch["from"] == QWEN_CODER_0_5B.name
        assert "missed the deadline" in switch["reason"]
        assert await collect(backend, REQUEST)  # the lower preset serves

        for _ in range(auto_choice.ANSWERS_WITH_ROOM):
            auto.answered(0.01)
        switch = await switched_to(backend, QWEN_CODER_0_5B.name)
        assert switch["reason"] == "room again within the deadline"
        assert await collect(backend, REQUEST)
    finally:
        await backend.aclose()


async def collect(backend: LocalBackend, request: CompletionRequest) -> str:
    return "".join([piece async for piece in backend.complete(request, permit=permit_for(backend))])
