"""How fast the loaded model reads and writes now, and how much new prompt a keystroke can
afford within its deadline.

A keystroke whose prompt the KV cache does not hold (the first in a document, or after the
cursor jumped) must read it before its first token; on one CPU core a full window of a few
hundred tokens takes seconds and the deadline passes with nothing to show. The pace, measured
on the reads and generations the model does anyway (so it follows a machine that gets busy),
says how many new tokens fit: the prompt is then cut to fit (`prompt_fit`), a suggestion with
less context instead of none.
"""

from __future__ import annotations

from dataclasses import dataclass

from lsp_server.backends.local.calibration import Speed
from lsp_server.backends.local.keystroke_cost import LONG_LINE_TOKENS, MIN_READ_TOKENS

# The share of the deadline a keystroke plans to use: the rest absorbs noise and the request's
# own way through the server.
PLAN_SHARE = 0.75
# At least this share of the deadline is left to reading, however slow the generation.
MIN_READ_SHARE = 0.25
# Weight of the newest measurement in the running figures.
NEWEST_WEIGHT = 0.3


@dataclass(slots=True)
class Pace:
    """Running prompt and generation speeds, in tokens per second; None until measured."""

    prompt_tps: float | None = None
    generation_tps: float | None = None

    def read(self, tokens: int, seconds: float) -> None:
        if tokens > 0 and seconds > 0:
            self.prompt_tps = _blend(self.prompt_tps, tokens / seconds)

    def wrote(self, tokens: int, seconds: float) -> None:
        if tokens > 0 and seconds > 0:
            self.generation_tps = _blend(self.generation_tps, tokens / seconds)

    def speed(self) -> Speed | None:
        """Both speeds, once both were measured (or given)."""
        if self.prompt_tps is None or self.generation_tps is None:
            return None
        return Speed(self.prompt_tps, self.generation_tps)

    def affordable_tokens(self, deadline_ms: int) -> int | None:
        """New prompt tokens a keystroke can read within `deadline_ms` and still write a long
        line (`LONG_LINE_TOKENS`); None while the reading speed is unknown (no limit is set)."""
        if self.prompt_tps is None:
            return None
        deadline_s = deadline_ms / 1000
        writing_s = LONG_LINE_TOKENS / self.generation_tps if self.generation_tps else 0.0
        reading_s = max(deadline_s * PLAN_SHARE - writing_s, deadline_s * MIN_READ_SHARE)
        return max(int(self.prompt_tps * reading_s), MIN_READ_TOKENS)


def _blend(previous: float | None, newest: float) -> float:
    if previous is None:
        return newest
    return previous + NEWEST_WEIGHT * (newest - previous)
