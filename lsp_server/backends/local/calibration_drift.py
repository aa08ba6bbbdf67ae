"""When a kept calibration no longer says how fast this machine is, and it is time to measure
again.

A calibration is measured once and kept (`calibration`); one taken while a build ran keeps
`model = "auto"` on a weaker preset on a quiet machine, and one taken on a quiet machine keeps
a preset the machine can no longer serve. The live pace (`pace`), measured on every read and
generation the serving model does anyway, is the evidence: when the keystroke's line it
predicts (`keystroke_cost.line_s`, the part that follows the machine's speed; a fast model's
keystroke is the line time whatever its speed) and the one the calibration predicts differ by
`FACTOR`, over at least `MIN_OBSERVATIONS`
requests since the last measurement, the presets are measured again. So is it when the
adapter wants to step up and the kept figures would not let it. At most once every
`MIN_INTERVAL_S`, so a machine whose load comes and goes never has its model measured over
and over; the measuring itself runs only while the model is idle.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from lsp_server.backends.local.calibration import Speed
from lsp_server.backends.local.keystroke_cost import line_s

# The live prediction and the kept one differ by this factor, either way: the machine is not
# the one that was measured. The live pace runs a little below a bare measurement (sampling,
# streaming), well within it.
FACTOR = 1.3
# Requests served since the last measurement before the live pace counts as evidence: it
# starts at the kept figures and moves a share of the way with each request (`pace`).
MIN_OBSERVATIONS = 8
# Measurements at most this often.
MIN_INTERVAL_S = 600.0


class DriftWatch:
    """Compares the serving preset's live pace with its kept calibration."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._kept: Speed | None = None
        self._observations = 0
        self._last_measured: float | None = None
        self.drift = 1.0  # kept prediction / live prediction: above 1, the machine is faster

    def rebase(self, kept: Speed | None) -> None:
        """The serving preset and its kept calibration, after a switch or a measurement."""
        self._kept = kept
        self._observations = 0
        self.drift = 1.0

    def measured(self) -> None:
        """The presets were just measured again."""
        self._last_measured = self._clock()

    def observe(self, live: Speed) -> bool:
        """Note the live pace after a request; True when the presets should be measured again."""
        if self._kept is None:
            return False
        self._observations += 1
        self.drift = line_s(self._kept) / line_s(live)
        disagrees = self.drift >= FACTOR or self.drift <= 1 / FACTOR
        return disagrees and self._observations >= MIN_OBSERVATIONS and self.may_measure()

    def may_measure(self) -> bool:
        last = self._last_measured
        return last is None or self._clock() - last >= MIN_INTERVAL_S
