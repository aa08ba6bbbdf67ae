"""`gateway-ls doctor --recalibrate` measures every installed preset again; without it, only
those not measured yet."""

from __future__ import annotations

import pytest

from lsp_server.backends.local.auto_choice import Candidate
from lsp_server.backends.local.calibration import Speed
from lsp_server.backends.model_presets import (
    GEMMA_3_270M,
    QWEN_CODER_0_5B,
    QWEN_CODER_1_5B,
    ModelPreset,
)
from lsp_server.cli import local_choice
from lsp_server.config.model import LocalConfig

pytestmark = pytest.mark.unit

KEPT = Speed(prompt_tps=40.0, generation_tps=12.8)


@pytest.mark.parametrize(
    ("again", "expected"),
    [(False, [QWEN_CODER_0_5B.name]), (True, [GEMMA_3_270M.name, QWEN_CODER_0_5B.name])],
)
def test_doctor_measures_what_is_missing_or_with_recalibrate_everything_installed(
    monkeypatch: pytest.MonkeyPatch, again: bool, expected: list[str]
) -> None:
    found = [
        Candidate(GEMMA_3_270M, True, KEPT),
        Candidate(QWEN_CODER_0_5B, True, None),
        Candidate(QWEN_CODER_1_5B, False, None),
    ]
    measured: list[str] = []

    def calibrate(preset: ModelPreset, _config: LocalConfig) -> Speed:
        measured.append(preset.name)
        return KEPT

    monkeypatch.setattr(local_choice, "candidates", lambda _config: found)
    monkeypatch.setattr(local_choice, "calibrate", calibrate)

    local_choice._calibrated(LocalConfig(), again)

    assert measured == expected


def test_doctor_shows_the_first_keystroke_cold_and_after_reading() -> None:
    reads_fast = Speed(prompt_tps=200.0, generation_tps=10.5)  # the prompt read in 2.7 s
    candidate = Candidate(QWEN_CODER_0_5B, True, reads_fast)

    *_, warm, cold, after_reading, read_s, fits = local_choice._row(candidate, LocalConfig())
    assert (after_reading, read_s, fits) == (warm, 2.7, "yes")
    assert isinstance(cold, int) and isinstance(warm, int) and cold > warm

    off = LocalConfig(read_ahead=False)
    *_, cold_off, after_reading_off, _, fits_off = local_choice._row(candidate, off)
    assert (after_reading_off, fits_off) == (cold_off, "no")
