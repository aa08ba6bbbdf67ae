"""A kept calibration that no longer holds is measured again: on the evidence of the live pace
or of room to step up, never more often than the bound allows, and the choice follows."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from lsp_server.backends.local import calibration_drift
from lsp_server.backends.local.auto_choice import Candidate
from lsp_server.backends.local.auto_model import AutoModel
from lsp_server.backends.local.calibration import Speed
from lsp_server.backends.local.calibration_drift import DriftWatch
from lsp_server.backends.local.pace import Pace
from lsp_server.backends.model_presets import (
    GEMMA_3_270M,
    QWEN_CODER_0_5B,
    QWEN_CODER_1_5B,
    ModelPreset,
)
from lsp_server.config.model import LocalConfig

pytestmark = pytest.mark.unit

# The figures of the bench's calibration table: measured while the machine was busy, and on a
# quiet one; and a machine loaded further, where only Gemma's keystroke fits 1500 ms.
GEMMA_BUSY = Speed(prompt_tps=140.0, generation_tps=20.2)
SMALL_BUSY = Speed(prompt_tps=40.0, generation_tps=12.8)
LARGE_BUSY = Speed(prompt_tps=13.0, generation_tps=5.7)
SMALL_LOADED = Speed(prompt_tps=20.0, generation_tps=7.0)
GEMMA_QUIET = Speed(prompt_tps=201.3, generation_tps=40.1)
SMALL_QUIET = Speed(prompt_tps=70.0, generation_tps=23.6)
LARGE_QUIET = Speed(prompt_tps=29.6, generation_tps=10.8)
QUIET = {GEMMA_3_270M: GEMMA_QUIET, QWEN_CODER_0_5B: SMALL_QUIET, QWEN_CODER_1_5B: LARGE_QUIET}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Host:
    """The backend as the chooser sees it: always idle, switches recorded."""

    closed = False

    def __init__(self) -> None:
        self.switched: list[str] = []

    def idle_for(self) -> float:
        return 60.0

    def run_when_idle(self, work: Callable[[threading.Event], Any]) -> Any:
        return work(threading.Event())

    def switch_to(self, preset: ModelPreset, llm: Any) -> None:
        self.switched.append(preset.name)


class Model:
    def close(self) -> None:
        pass


def chooser_kept_busy(
    clock: Clock, monkeypatch: pytest.MonkeyPatch, now: dict[ModelPreset, Speed]
) -> tuple[AutoModel, Host, list[str]]:
    """Serving Gemma from a calibration kept while the machine was busy; measuring gives `now`."""
    host = Host()
    chooser = AutoModel(LocalConfig(deadline_ms=1500), host)
    chooser._drift = DriftWatch(clock)
    chooser._candidates = [
        Candidate(GEMMA_3_270M, True, GEMMA_BUSY),
        Candidate(QWEN_CODER_0_5B, True, SMALL_LOADED),
        Candidate(QWEN_CODER_1_5B, True, LARGE_BUSY),
    ]
    chooser.serving = GEMMA_3_270M
    chooser._drift.rebase(GEMMA_BUSY)
    measured: list[str] = []

    def calibrate(preset: ModelPreset) -> Speed:
        measured.append(preset.name)
        return now[preset]

    monkeypatch.setattr(chooser, "_calibrate", calibrate)
    monkeypatch.setattr(chooser, "_open", lambda _preset: Model())
    return chooser, host, measured


def act(chooser: AutoModel) -> None:
    """What the chooser's thread does once woken."""
    chooser._wake.clear()
    chooser._act()


def serve(chooser: AutoModel, live: Speed, requests: int) -> None:
    for _ in range(requests):
        chooser.observed(live)


def test_a_quieter_machine_than_the_kept_one_is_measured_again_and_served_better(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    chooser, host, measured = chooser_kept_busy(clock, monkeypatch, QUIET)

    serve(chooser, GEMMA_QUIET, calibration_drift.MIN_OBSERVATIONS - 1)
    assert not chooser._wake.is_set()  # too few requests to go on
    serve(chooser, GEMMA_QUIET, 1)
    assert chooser._wake.is_set()
    act(chooser)

    assert measured == [QWEN_CODER_1_5B.name, QWEN_CODER_0_5B.name, GEMMA_3_270M.name]
    assert host.switched == [QWEN_CODER_0_5B.name]
    assert chooser.serving == QWEN_CODER_0_5B
    assert "faster than the kept calibration" in chooser.reason
    assert chooser.measured_again is not None
    assert chooser.status()["measured_again"]["why"].startswith("the live pace predicts")
    assert chooser.calibrated(QWEN_CODER_0_5B) == SMALL_QUIET


def test_a_busier_machine_than_the_kept_one_is_measured_again_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    chooser, host, measured = chooser_kept_busy(clock, monkeypatch, QUIET)
    chooser._candidates = [Candidate(c.preset, True, QUIET[c.preset]) for c in chooser._candidates]
    chooser.serving = QWEN_CODER_0_5B
    chooser._drift.rebase(SMALL_QUIET)
    busy = {GEMMA_3_270M: GEMMA_BUSY, QWEN_CODER_0_5B: SMALL_LOADED, QWEN_CODER_1_5B: LARGE_BUSY}

    def calibrate(preset: ModelPreset) -> Speed:
        measured.append(preset.name)
        return busy[preset]

    monkeypatch.setattr(chooser, "_calibrate", calibrate)

    serve(chooser, Speed(prompt_tps=30.0, generation_tps=9.0), calibration_drift.MIN_OBSERVATIONS)
    act(chooser)

    assert len(measured) == 3
    assert "slower than the kept calibration" in chooser.reason
    assert host.switched == [GEMMA_3_270M.name]


def test_a_pace_within_the_factor_is_no_evidence(monkeypatch: pytest.MonkeyPatch) -> None:
    chooser, host, measured = chooser_kept_busy(Clock(), monkeypatch, QUIET)
    # 10 % faster reading and writing: noise, not another machine.
    nearly = Speed(GEMMA_BUSY.prompt_tps * 1.1, GEMMA_BUSY.generation_tps * 1.1)

    serve(chooser, nearly, 50)
    act(chooser)

    assert measured == [] and host.switched == [] and not chooser._wake.is_set()


def test_measuring_again_is_bounded_so_a_changing_load_never_thrashes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    chooser, host, measured = chooser_kept_busy(clock, monkeypatch, QUIET)
    chooser._drift.measured()  # measured at start-up, a moment ago

    serve(chooser, GEMMA_QUIET, 100)
    assert not chooser._wake.is_set()
    clock.now += calibration_drift.MIN_INTERVAL_S - 1
    serve(chooser, GEMMA_QUIET, 1)
    assert not chooser._wake.is_set() and measured == []

    clock.now += 1
    serve(chooser, GEMMA_QUIET, 1)
    act(chooser)
    assert len(measured) == 3 and host.switched == [QWEN_CODER_0_5B.name]

    # The load comes back at once: the new preset's evidence waits for the bound again.
    serve(chooser, SMALL_BUSY, 100)
    assert not chooser._wake.is_set() and len(measured) == 3


def test_room_to_step_up_that_the_kept_figures_deny_measures_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chooser, host, measured = chooser_kept_busy(Clock(), monkeypatch, QUIET)
    monkeypatch.setattr(type(chooser._adapter), "step_up", property(lambda _self: True))

    act(chooser)

    assert len(measured) == 3
    assert host.switched == [QWEN_CODER_0_5B.name]
    assert chooser.reason == "room again within the deadline"


def test_the_best_preset_serving_has_nothing_to_step_up_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chooser, host, measured = chooser_kept_busy(Clock(), monkeypatch, QUIET)
    chooser.serving = QWEN_CODER_1_5B
    monkeypatch.setattr(type(chooser._adapter), "step_up", property(lambda _self: True))

    act(chooser)

    assert measured == [] and host.switched == []


def test_the_live_pace_is_reported_once_both_speeds_are_known() -> None:
    pace = Pace()
    assert pace.speed() is None
    pace.read(64, 1.0)
    assert pace.speed() is None
    pace.wrote(12, 1.0)
    assert pace.speed() == Speed(64.0, 12.0)
