"""The threads a next edit runs on: every core, unless they read its prompt no faster than the
configured threads do.

A next edit is asked after a pause in typing, and a keystroke stops it (a keystroke always
wins the model), so the cores the configured count leaves to the editor can serve it. But
llama.cpp's threads spin: one without a core (a build, the editor, another model) holds every
step back, and all cores can then be several times slower than one thread. So each edit
measures it on its own reading: a full step read on all cores is compared with the configured
threads' reading speed (the pace of the reads they do; when none is known, the edit's first
step is read on them to learn it), and an edit that all cores do not read at least `WIDE_GAIN`
times as fast goes on, and writes, on the configured threads. That one step on contended
cores cost up to 3.3 s of a 10 s edit (bench/README.md), and the work that holds a core
(a build) goes on for a while, so after such an edit the next ones keep to the configured
threads for `HOLD_S` before all cores are tried again (`CoreVerdict`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llama_cpp import Llama

WIDE_GAIN = 1.2
MEASURED_STEP_TOKENS = 32  # a shorter step's speed says little
HOLD_S = 30.0


class CoreVerdict:
    """Whether a next edit may try every core now: not within `HOLD_S` of one that found
    them slower."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._until = float("-inf")

    def allowed(self) -> bool:
        return self._clock() >= self._until

    def slower(self) -> None:
        self._until = self._clock() + HOLD_S


class EditThreads:
    """While entered, the model's thread count for one next edit; `on_step` hears each step
    of its prompt's reading (tokens, seconds) and passes the configured threads' steps on to
    `configured_read`."""

    def __init__(
        self,
        llm: Llama,
        *,
        configured: int,
        cores: int,
        configured_tps: float | None,
        configured_read: Callable[[int, float], None],
    ) -> None:
        self._llm = llm
        self._configured = configured
        self._cores = cores
        self._configured_tps = configured_tps
        self._configured_read = configured_read
        self._decided = cores <= configured
        self.threads = configured
        self.fell_back = False  # all cores were tried and read no faster

    def __enter__(self) -> EditThreads:
        if not self._decided and self._configured_tps is not None:
            self._use(self._cores)
        return self

    def __exit__(self, *_exc: object) -> None:
        self._use(self._configured)

    def on_step(self, tokens: int, seconds: float) -> None:
        if self.threads == self._configured:
            self._configured_read(tokens, seconds)
        if self._decided or tokens < MEASURED_STEP_TOKENS or seconds <= 0:
            return
        speed = tokens / seconds
        if self.threads == self._configured:
            self._configured_tps = speed
            self._use(self._cores)  # the next step on all cores, to compare
            return
        self._decided = True
        assert self._configured_tps is not None
        if speed < WIDE_GAIN * self._configured_tps:
            self._use(self._configured)
            self.fell_back = True

    def _use(self, threads: int) -> None:
        if threads != self.threads:
            import llama_cpp

            llama_cpp.llama_set_n_threads(self._llm.ctx, threads, threads)
            self.threads = threads
