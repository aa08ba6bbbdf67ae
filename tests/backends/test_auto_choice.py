"""How `[local] model = "auto"` ranks, fits and adapts, from calibration figures."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest

from lsp_server.backends.local import auto_choice
from lsp_server.backends.local.auto_choice import (
    Adapter,
    Candidate,
    choose,
    fits,
    step_below,
)
from lsp_server.backends.local.auto_model import AutoModel
from lsp_server.backends.local.calibration import CalibrationCache, MachineKey, Speed
from lsp_server.backends.local.completion_text import more_lines_seconds
from lsp_server.backends.local.keystroke_cost import (
    LINE_TOKENS,
    MIN_READ_TOKENS,
    PROMPT_TOKENS,
    READ_BEFORE_TYPING_S,
    READ_TOKENS,
    first_keystroke_after_reading_s,
    first_keystroke_s,
    warm_keystroke_s,
)
from lsp_server.backends.model_presets import GEMMA_3_270M, QWEN_CODER_0_5B, QWEN_CODER_1_5B
from lsp_server.config.model import LocalConfig

pytestmark = pytest.mark.unit

# A warm keystroke, and a document's first one.
FAST = Speed(prompt_tps=150.0, generation_tps=40.0)  # 0.78 s (the line time), 0.49 s
MIDDLING = Speed(prompt_tps=120.0, generation_tps=16.0)  # 0.81 s, 0.95 s
SLOW = Speed(prompt_tps=25.0, generation_tps=8.0)  # 1.38 s, 2.66 s
# The 1.5B and the 0.5B calibrated on the bench machine (one thread, quiet): the 1.5B's warm
# keystroke fits 1500 ms, its first one does not.
LARGE_ON_ONE_CORE = Speed(prompt_tps=32.6, generation_tps=11.6)
SMALL_ON_ONE_CORE = Speed(prompt_tps=69.5, generation_tps=24.3)


def everything_installed(
    gemma: Speed | None, small: Speed | None, large: Speed | None
) -> list[Candidate]:
    return [
        Candidate(GEMMA_3_270M, True, gemma),
        Candidate(QWEN_CODER_0_5B, True, small),
        Candidate(QWEN_CODER_1_5B, True, large),
    ]


def test_a_warm_keystroke_is_the_typed_token_and_a_line_each_one_decode() -> None:
    assert warm_keystroke_s(SLOW, 1500) == pytest.approx((READ_TOKENS + LINE_TOKENS) / 8)
    # A read of a token or two is no batch: the prompt speed plays no part.
    faster_reading = replace(SLOW, prompt_tps=SLOW.prompt_tps * 10)
    assert warm_keystroke_s(faster_reading, 1500) == warm_keystroke_s(SLOW, 1500)
    assert fits(MIDDLING, 1500) and not fits(SLOW, 1500) and fits(SLOW, 4000)


def test_a_line_done_sooner_than_the_line_time_goes_on_until_then() -> None:
    line_time_s = more_lines_seconds(1500)
    assert warm_keystroke_s(FAST, 1500) == pytest.approx(READ_TOKENS / 40 + line_time_s)
    # Twice as fast a machine: the same keystroke, for the line time bounds it.
    twice = Speed(FAST.prompt_tps * 2, FAST.generation_tps * 2)
    assert warm_keystroke_s(twice, 1500) == pytest.approx(READ_TOKENS / 80 + line_time_s)


def test_a_first_keystroke_reads_the_least_a_cut_prompt_reads_then_writes_its_line() -> None:
    assert first_keystroke_s(SLOW) == pytest.approx(
        MIN_READ_TOKENS / 25 + (READ_TOKENS + LINE_TOKENS) / 8
    )


def test_a_preset_that_reads_the_prompt_before_typing_begins_fits_as_a_warm_one() -> None:
    """Reading fast and writing slowly: its cold first keystroke misses the margin, but the
    document's prompt is read within `READ_BEFORE_TYPING_S`, so the first keystroke people
    make is a warm one. With reading ahead off, the cold one decides."""
    reads_fast = Speed(prompt_tps=200.0, generation_tps=10.5)
    margin_s = 1.5 * auto_choice.MARGIN
    assert PROMPT_TOKENS / reads_fast.prompt_tps <= READ_BEFORE_TYPING_S
    assert warm_keystroke_s(reads_fast, 1500) <= margin_s < first_keystroke_s(reads_fast)
    assert first_keystroke_after_reading_s(reads_fast, 1500, read_ahead=True) == (
        warm_keystroke_s(reads_fast, 1500)
    )
    assert fits(reads_fast, 1500, read_ahead=True)
    assert not fits(reads_fast, 1500, read_ahead=False)
    found = everything_installed(FAST, reads_fast, None)
    assert choose(found, 1500, read_ahead=True) == QWEN_CODER_0_5B
    assert choose(found, 1500, read_ahead=False) == GEMMA_3_270M


def test_a_preset_still_reading_when_typing_begins_fits_by_its_cut_first_keystroke() -> None:
    assert PROMPT_TOKENS / LARGE_ON_ONE_CORE.prompt_tps > READ_BEFORE_TYPING_S
    assert first_keystroke_after_reading_s(LARGE_ON_ONE_CORE, 1500, read_ahead=True) == (
        first_keystroke_s(LARGE_ON_ONE_CORE)
    )


def test_a_preset_whose_first_keystroke_cannot_fit_is_not_chosen() -> None:
    assert warm_keystroke_s(LARGE_ON_ONE_CORE, 1500) * 1000 <= 1500 * auto_choice.MARGIN
    assert not fits(LARGE_ON_ONE_CORE, 1500)
    found = everything_installed(FAST, SMALL_ON_ONE_CORE, LARGE_ON_ONE_CORE)
    assert choose(found, 1500) == QWEN_CODER_0_5B
    assert choose(found, 3000) == QWEN_CODER_1_5B


def test_the_best_preset_that_fits_is_chosen() -> None:
    assert choose(everything_installed(FAST, MIDDLING, SLOW), 1500) == QWEN_CODER_0_5B
    assert choose(everything_installed(FAST, MIDDLING, SLOW), 4000) == QWEN_CODER_1_5B
    assert choose(everything_installed(FAST, SLOW, SLOW), 1500) == GEMMA_3_270M


def test_a_preset_not_installed_is_never_chosen() -> None:
    found = everything_installed(FAST, MIDDLING, FAST)
    found[2] = replace(found[2], installed=False)
    assert choose(found, 1500) == QWEN_CODER_0_5B


def test_before_any_calibration_the_bundled_default_serves_as_today() -> None:
    assert choose(everything_installed(None, None, None), 1500) == GEMMA_3_270M
    only_qwen = [
        Candidate(GEMMA_3_270M, False, None),
        Candidate(QWEN_CODER_0_5B, True, None),
        Candidate(QWEN_CODER_1_5B, True, None),
    ]
    assert choose(only_qwen, 1500) == QWEN_CODER_0_5B  # the smallest installed
    assert choose([Candidate(GEMMA_3_270M, False, None)], 1500) is None


def test_stepping_down_goes_to_the_next_installed_preset_below() -> None:
    found = everything_installed(FAST, MIDDLING, SLOW)
    assert step_below(QWEN_CODER_1_5B.name, found) == QWEN_CODER_0_5B
    assert step_below(GEMMA_3_270M.name, found) is None
    found[1] = replace(found[1], installed=False)
    assert step_below(QWEN_CODER_1_5B.name, found) == GEMMA_3_270M


def test_the_adapter_steps_down_after_misses_in_a_row_only() -> None:
    adapter = Adapter(1500)
    adapter.missed()
    adapter.missed()
    adapter.answered(0.9)  # an answer breaks the run
    adapter.missed()
    adapter.missed()
    assert not adapter.step_down
    adapter.missed()
    assert adapter.step_down


def test_the_adapter_steps_up_after_a_while_with_room(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr("lsp_server.backends.local.auto_choice.time.monotonic", lambda: clock[0])
    adapter = Adapter(1500)
    for _ in range(auto_choice.ANSWERS_WITH_ROOM):
        adapter.answered(0.3)
    assert not adapter.step_up  # too soon after the last switch
    clock[0] += auto_choice.STEP_UP_AFTER_S
    assert adapter.step_up
    adapter.answered(1.2)  # no room: the count starts again
    assert not adapter.step_up


def test_calibrations_are_kept_by_machine_file_build_and_threads(tmp_path: Path) -> None:
    cache = CalibrationCache(tmp_path / "calibration.json")
    key = MachineKey("AMD EPYC", 2, "ab" * 32, "0.3.36", 1)
    assert cache.get(key) is None
    cache.put(key, MIDDLING)
    assert CalibrationCache(tmp_path / "calibration.json").get(key) == MIDDLING
    for other in (replace(key, threads=2), replace(key, llama_cpp="0.3.37"), replace(key, cores=4)):
        assert cache.get(other) is None


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        "[1, 2]",
        json.dumps({"AMD EPYC|2|" + "ab" * 32 + "|0.3.36|1": {"prompt_tps": "x"}}),
        json.dumps(
            {"AMD EPYC|2|" + "ab" * 32 + "|0.3.36|1": {"prompt_tps": -1, "generation_tps": 3}}
        ),
    ],
)
def test_a_damaged_calibration_file_counts_as_none(tmp_path: Path, content: str) -> None:
    path = tmp_path / "calibration.json"
    path.write_text(content)
    key = MachineKey("AMD EPYC", 2, "ab" * 32, "0.3.36", 1)
    assert CalibrationCache(path).get(key) is None
    CalibrationCache(path).put(key, FAST)  # and is replaced by the next measurement
    assert CalibrationCache(path).get(key) == FAST


def test_the_chooser_gives_the_model_its_calibrated_speed_as_its_first_pace() -> None:
    chooser = AutoModel(LocalConfig(), host=cast(Any, None))
    chooser._candidates = everything_installed(FAST, MIDDLING, None)

    assert chooser.calibrated(QWEN_CODER_0_5B) == MIDDLING
    assert chooser.calibrated(QWEN_CODER_1_5B) is None
