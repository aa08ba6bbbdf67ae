"""`[local] model = "auto"`: the best preset this machine serves within the local deadline.

The presets are ranked by their `bench_quality` figure (`ModelPreset.exact_lines`). A preset
fits when its keystrokes, predicted from its calibration (`keystroke_cost`), are within
`MARGIN` of `local.deadline_ms`: a warm one, and a document's first one after a few seconds of
reading, which is warm where the prompt was read ahead by then and otherwise reads at least a
few dozen new prompt tokens (where only the warm one fits, the first keystroke in each document
shows a fragment or nothing). The best installed preset that fits is chosen; before any is
calibrated, the bundled default (or the smallest installed preset). `Adapter` steps down when
the chosen model keeps missing its deadline (a busy machine) and back up once it has had room
for a while.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from lsp_server.backends.local.calibration import Speed
from lsp_server.backends.local.keystroke_cost import (
    first_keystroke_after_reading_s,
    warm_keystroke_s,
)
from lsp_server.backends.model_presets import DEFAULT_PRESET, ModelPreset

# A preset fits when its predicted keystrokes take at most this share of the deadline: the
# prediction is the median keystroke, and the 1.5B's slowest tenth (long lines) took 1.29x its
# median (bench/README.md), so a preset predicted at 0.75 has that tenth within the deadline.
MARGIN = 0.75

# Adapting: this many misses in a row step down; back up after this long on the lower preset
# with this many answers in a row that took at most `ROOM` of the deadline.
MISSES_TO_STEP_DOWN = 3
STEP_UP_AFTER_S = 300.0
ANSWERS_WITH_ROOM = 10
ROOM = 0.4


def fits(speed: Speed, deadline_ms: int, *, read_ahead: bool = True) -> bool:
    """`read_ahead`: `local.read_ahead`, whether a document's prompt is read before typing."""
    first_s = first_keystroke_after_reading_s(speed, deadline_ms, read_ahead=read_ahead)
    keystroke_s = max(warm_keystroke_s(speed, deadline_ms), first_s)
    return keystroke_s * 1000 <= deadline_ms * MARGIN


@dataclass(frozen=True, slots=True)
class Candidate:
    preset: ModelPreset
    installed: bool
    speed: Speed | None  # None: not calibrated yet

    def fits(self, deadline_ms: int, *, read_ahead: bool = True) -> bool:
        return (
            self.installed
            and self.speed is not None
            and fits(self.speed, deadline_ms, read_ahead=read_ahead)
        )


def ranked(presets: Sequence[ModelPreset]) -> list[ModelPreset]:
    """Best first; presets without a quality figure are left out."""
    measured = [p for p in presets if p.exact_lines is not None]
    return sorted(measured, key=lambda p: p.exact_lines or 0.0, reverse=True)


def choose(
    candidates: Sequence[Candidate], deadline_ms: int, *, read_ahead: bool = True
) -> ModelPreset | None:
    """The best installed preset that fits; else the bundled default or the smallest one
    installed; None when none is installed."""
    by_name = {c.preset.name: c for c in candidates}
    for preset in ranked([c.preset for c in candidates]):
        if by_name[preset.name].fits(deadline_ms, read_ahead=read_ahead):
            return preset
    installed = [c.preset for c in candidates if c.installed and c.preset.exact_lines is not None]
    installed = installed or [c.preset for c in candidates if c.installed]
    default = by_name.get(DEFAULT_PRESET)
    if default is not None and default.installed:
        return default.preset
    return min(installed, key=lambda p: p.size) if installed else None


def step_below(current: str, candidates: Sequence[Candidate]) -> ModelPreset | None:
    """The next installed preset ranked below `current` (the faster one to step down to)."""
    order = ranked([c.preset for c in candidates if c.installed])
    names = [p.name for p in order]
    if current not in names:
        return None
    below = order[names.index(current) + 1 :]
    return below[0] if below else None


class Adapter:
    """Counts how the serving preset keeps its deadline, and says when to move.

    `step_down` after `MISSES_TO_STEP_DOWN` misses in a row; `step_up` once the preset stepped
    down to has served `STEP_UP_AFTER_S` and its last `ANSWERS_WITH_ROOM` answers all came
    within `ROOM` of the deadline. The caller switches between requests, never during one."""

    def __init__(self, deadline_ms: int) -> None:
        self._deadline_s = deadline_ms / 1000
        self._misses = 0
        self._with_room = 0
        self._since = time.monotonic()

    def reset(self) -> None:
        self._misses = self._with_room = 0
        self._since = time.monotonic()

    def answered(self, first_text_s: float) -> None:
        self._misses = 0
        if first_text_s <= self._deadline_s * ROOM:
            self._with_room += 1
        else:
            self._with_room = 0

    def missed(self) -> None:
        self._misses += 1
        self._with_room = 0

    @property
    def step_down(self) -> bool:
        return self._misses >= MISSES_TO_STEP_DOWN

    @property
    def step_up(self) -> bool:
        return (
            self._with_room >= ANSWERS_WITH_ROOM
            and time.monotonic() - self._since >= STEP_UP_AFTER_S
        )
