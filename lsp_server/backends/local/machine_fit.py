"""The presets as this machine sees them: installed or not, and their calibrated speed.

Shared by the local backend (which chooses and calibrates in the background) and `gateway-ls
doctor` (which prints the table and calibrates what is missing, since it is no keystroke).
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path

from lsp_server.backends.bundled_model import cache_dir, ensure_preset_model, preset_installed
from lsp_server.backends.local.auto_choice import Candidate
from lsp_server.backends.local.calibration import (
    CACHE_FILE,
    CalibrationCache,
    Speed,
    machine_key,
    measure,
)
from lsp_server.backends.local.loading import open_model
from lsp_server.backends.model_presets import PRESETS, ModelPreset
from lsp_server.config.model import LocalConfig


def calibration_cache() -> CalibrationCache:
    return CalibrationCache(cache_dir() / CACHE_FILE)


def threads_used(config: LocalConfig) -> int:
    return config.n_threads or os.cpu_count() or 1


def candidates(config: LocalConfig, cache: CalibrationCache | None = None) -> list[Candidate]:
    """Every preset, whether it is installed, and its calibration at the configured threads."""
    cache = cache or calibration_cache()
    threads = threads_used(config)
    return [
        Candidate(preset, preset_installed(preset), _cached(cache, preset, threads))
        for preset in PRESETS.values()
    ]


def _cached(cache: CalibrationCache, preset: ModelPreset, threads: int) -> Speed | None:
    try:
        return cache.get(machine_key(preset.sha256, threads))
    except ImportError:  # no llama-cpp-python: nothing can be calibrated
        return None


def calibrate(
    preset: ModelPreset, config: LocalConfig, stop: threading.Event | None = None
) -> Speed | None:
    """Open the preset's model, measure it, close it, and keep the figures; None if stopped."""
    path: Path = ensure_preset_model(preset)
    llm = open_model(path, replace(config, model=preset.name, model_path=""))
    try:
        speed = measure(llm, stop or threading.Event())
    finally:
        llm.close()
    if speed is not None:
        remember(preset, config, speed)
    return speed


def remember(preset: ModelPreset, config: LocalConfig, speed: Speed) -> None:
    calibration_cache().put(machine_key(preset.sha256, threads_used(config)), speed)
