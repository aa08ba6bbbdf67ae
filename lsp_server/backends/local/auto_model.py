"""`[local] model = "auto"` at run time: calibrate in the background, choose, adapt, switch.

One thread of its own does the slow parts: it opens each installed preset that has no
calibration yet and measures it on the model's worker thread while the model is idle (a
request stops it at once; it is tried again later), then chooses (`auto_choice.choose`) and
has the backend switch to the choice. While serving it counts misses and answers with room
(`Adapter`) and steps down or back up. When the live pace says the machine is not the one the
kept calibration measured, or it has room to step up that the kept figures deny, the presets
are measured again (`calibration_drift`, bounded in how often). A switch opens the new model
on this thread and swaps it in on the worker thread between two jobs, so no keystroke ever
sees half a switch; each is logged and listed in the status.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from lsp_server.backends.bundled_model import ensure_preset_model
from lsp_server.backends.local.auto_choice import (
    MISSES_TO_STEP_DOWN,
    Adapter,
    Candidate,
    choose,
    ranked,
    step_below,
)
from lsp_server.backends.local.calibration import Speed, measure
from lsp_server.backends.local.calibration_drift import DriftWatch
from lsp_server.backends.local.keystroke_cost import (
    first_keystroke_after_reading_s,
    first_keystroke_s,
    warm_keystroke_s,
)
from lsp_server.backends.local.loading import open_model
from lsp_server.backends.local.machine_fit import candidates, remember
from lsp_server.backends.model_presets import ModelPreset
from lsp_server.config.model import LocalConfig

if TYPE_CHECKING:
    from llama_cpp import Llama

log = logging.getLogger(__name__)

T = TypeVar("T")

# The model counts as idle once nothing has asked it for this long.
IDLE_S = 2.0
_POLL_S = 0.5
_TRIES = 5  # calibrations stopped by requests this many times wait for the next start
_SWITCHES_KEPT = 10


class ModelHost(Protocol):
    """What the backend lets the chooser do."""

    @property
    def closed(self) -> bool: ...

    def idle_for(self) -> float:
        """Seconds since the model last served or was asked."""
        ...

    def run_when_idle(self, work: Callable[[threading.Event], T]) -> T | None:
        """Run `work` on the model's worker thread, stopped (its event set) by any request;
        blocks; None if it could not run."""
        ...

    def switch_to(self, preset: ModelPreset, llm: Llama) -> None:
        """Serve `llm` from the next job on; blocks until swapped."""
        ...


class AutoModel:
    def __init__(self, config: LocalConfig, host: ModelHost) -> None:
        self._config = config
        self._host = host
        self._adapter = Adapter(config.deadline_ms)
        self._drift = DriftWatch()
        self._measure_again_why = ""  # set on the event loop, handled on the chooser's thread
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._candidates: list[Candidate] = []
        self.serving: ModelPreset | None = None
        self.reason = ""
        self.switches: deque[dict[str, Any]] = deque(maxlen=_SWITCHES_KEPT)
        self.measured_again: dict[str, Any] | None = None  # the last time, and why

    def initial(self) -> ModelPreset | None:
        """The preset to load first, from the calibrations kept (no measuring here)."""
        self._candidates = candidates(self._config)
        chosen = self._choose()
        self.serving = chosen
        self.reason = self._why(chosen)
        self._drift.rebase(self.calibrated(chosen) if chosen else None)
        return chosen

    def start(self) -> None:
        """Calibrate and adapt in the background from now on (once the model is loaded)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="gateway-ls-local-auto", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        self._wake.set()

    # What the backend reports

    def answered(self, first_text_s: float) -> None:
        self._adapter.answered(first_text_s)
        if self._adapter.step_up:
            self._wake.set()

    def missed(self) -> None:
        self._adapter.missed()
        if self._adapter.step_down:
            self._wake.set()

    def observed(self, live: Speed) -> None:
        """The serving model's live pace after a request: evidence for or against its kept
        calibration."""
        if self._drift.observe(live) and not self._measure_again_why:
            drift = self._drift.drift
            self._measure_again_why = (
                f"the live pace predicts a keystroke's line {max(drift, 1 / drift):.1f}x "
                f"{'faster' if drift > 1 else 'slower'} than the kept calibration"
            )
            self._wake.set()

    def calibrated(self, preset: ModelPreset) -> Speed | None:
        """The speed kept for `preset` on this machine, if it was calibrated."""
        match = next((c for c in self._candidates if c.preset == preset), None)
        return match.speed if match is not None else None

    def status(self) -> dict[str, Any]:
        return {
            "preset": self.serving.name if self.serving else "",
            "reason": self.reason,
            "switches": list(self.switches),
            "measured_again": self.measured_again,
            "calibration": [
                {
                    "preset": c.preset.name,
                    "installed": c.installed,
                    "prompt_tps": round(c.speed.prompt_tps, 1) if c.speed else None,
                    "generation_tps": round(c.speed.generation_tps, 1) if c.speed else None,
                    "predicted_keystroke_ms": (
                        round(warm_keystroke_s(c.speed, self._config.deadline_ms) * 1000)
                        if c.speed
                        else None
                    ),
                    "predicted_first_keystroke_ms": (
                        round(first_keystroke_s(c.speed) * 1000) if c.speed else None
                    ),
                    "predicted_first_keystroke_after_reading_ms": (
                        round(self._first_after_reading_s(c.speed) * 1000) if c.speed else None
                    ),
                    "fits": self._fits(c),
                }
                for c in self._candidates
            ],
        }

    # The thread

    def _run(self) -> None:
        try:
            self._calibrate_missing()
            best = self._choose()
            if best is not None and best != self.serving:
                self._switch(best, self._why(best))
            elif best is not None:
                self.reason = self._why(best)
            self._adapt()
        except Exception:  # never take the server down: the model in use stays
            log.exception("choosing the local model failed; keeping %s", self.serving)

    def _calibrate_missing(self) -> None:
        for preset in ranked([c.preset for c in self._candidates if c.installed]):
            if self._candidate(preset).speed is not None:
                continue
            speed = self._calibrate(preset)
            if self._host.closed:
                return
            if speed is not None:
                self._keep(preset, speed)
                self._drift.measured()
        self._drift.rebase(self.calibrated(self.serving) if self.serving else None)

    def _measure_again(self, why: str) -> None:
        """Measure every installed preset again and keep the new figures."""
        log.warning("local model: measuring the presets again: %s", why)
        self._drift.measured()
        self._measure_again_why = ""
        for preset in ranked([c.preset for c in self._candidates if c.installed]):
            before = self._candidate(preset).speed
            speed = self._calibrate(preset)
            if self._host.closed:
                return
            if speed is not None:
                self._keep(preset, speed)
                if before is not None:
                    log.info(
                        "local model %s: predicted keystroke %.0f ms, was %.0f ms",
                        preset.name,
                        warm_keystroke_s(speed, self._config.deadline_ms) * 1000,
                        warm_keystroke_s(before, self._config.deadline_ms) * 1000,
                    )
        self.measured_again = {"at": time.time(), "why": why}
        self._drift.rebase(self.calibrated(self.serving) if self.serving else None)

    def _keep(self, preset: ModelPreset, speed: Speed) -> None:
        self._candidates = [
            replace(c, speed=speed) if c.preset == preset else c for c in self._candidates
        ]

    def _calibrate(self, preset: ModelPreset) -> Speed | None:
        for _ in range(_TRIES):
            if not self._wait_idle():
                return None
            llm = self._open(preset)

            def measured(stop: threading.Event, llm: Llama = llm) -> Speed | None:
                return measure(llm, stop)

            try:
                speed = self._host.run_when_idle(measured)
            finally:
                llm.close()
            if speed is not None:
                remember(preset, self._config, speed)
                log.info(
                    "local model %s calibrated: %.0f prompt tokens/s, %.1f generated tokens/s",
                    preset.name,
                    speed.prompt_tps,
                    speed.generation_tps,
                )
                return speed
        return None

    def _adapt(self) -> None:
        while not self._host.closed:
            self._wake.wait()
            self._wake.clear()
            if self._host.closed or self.serving is None:
                return
            self._act()

    def _act(self) -> None:
        """Step down, step up or measure again, as the evidence since the last wake says."""
        serving = self.serving
        if serving is None:
            return
        if self._adapter.step_down:
            lower = step_below(serving.name, self._candidates)
            if lower is not None:
                self._switch(lower, f"missed the deadline {MISSES_TO_STEP_DOWN} times in a row")
            self._adapter.reset()
        elif self._adapter.step_up:
            best = self._choose()
            # Room to step up that the kept figures deny: they may be a busier day's.
            denied = not self._ranks_above(best, serving)
            better = self._ranks_above(self._best_installed(), serving)
            if denied and better and self._drift.may_measure():
                self._measure_again("room within the deadline, but no better preset fits")
                best = self._choose()
            if best is not None and self._ranks_above(best, serving):
                self._switch(best, "room again within the deadline")
            self._adapter.reset()
        if self._measure_again_why:
            why = self._measure_again_why
            self._measure_again(why)
            best = self._choose()
            if best is not None and best != self.serving:
                self._switch(best, f"measured again: {why}")

    def _switch(self, preset: ModelPreset, reason: str) -> None:
        if not self._wait_idle():
            return
        previous = self.serving.name if self.serving else ""
        llm = self._open(preset)
        self._host.switch_to(preset, llm)
        self.serving = preset
        self.reason = reason
        self._drift.rebase(self.calibrated(preset))
        self._measure_again_why = ""  # the evidence was the previous preset's
        self.switches.append(
            {"at": time.time(), "from": previous, "to": preset.name, "reason": reason}
        )
        log.warning("local model: %s -> %s (%s)", previous, preset.name, reason)

    def _open(self, preset: ModelPreset) -> Llama:
        path = ensure_preset_model(preset)
        return open_model(
            path,
            replace(self._config, model=preset.name, model_path=""),
            chat_format=preset.chat_format,
        )

    def _wait_idle(self) -> bool:
        while not self._host.closed:
            if self._host.idle_for() >= IDLE_S:
                return True
            time.sleep(_POLL_S)
        return False

    def _best_installed(self) -> ModelPreset | None:
        order = ranked([c.preset for c in self._candidates if c.installed])
        return order[0] if order else None

    def _ranks_above(self, preset: ModelPreset | None, other: ModelPreset) -> bool:
        """Whether `preset` has the better quality figure (stepping up goes only up)."""
        if preset is None or preset.exact_lines is None:
            return False
        return other.exact_lines is None or preset.exact_lines > other.exact_lines

    def _choose(self) -> ModelPreset | None:
        return choose(
            self._candidates, self._config.deadline_ms, read_ahead=self._config.read_ahead
        )

    def _fits(self, candidate: Candidate) -> bool:
        return candidate.fits(self._config.deadline_ms, read_ahead=self._config.read_ahead)

    def _first_after_reading_s(self, speed: Speed) -> float:
        return first_keystroke_after_reading_s(
            speed, self._config.deadline_ms, read_ahead=self._config.read_ahead
        )

    def _candidate(self, preset: ModelPreset) -> Candidate:
        return next(c for c in self._candidates if c.preset == preset)

    def _why(self, chosen: ModelPreset | None) -> str:
        if chosen is None:
            return "no preset installed"
        match = next((c for c in self._candidates if c.preset == chosen), None)
        if match is not None and self._fits(match):
            return "the best installed preset that fits the deadline"
        return "no calibration fits yet: the bundled default or the smallest installed"
