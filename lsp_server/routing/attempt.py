"""One endpoint asked for one request: the record every route keeps, and its measures.

The inline race, the sequential route and the Responses pass-through each make attempts; each
attempt is settled once (`Outcomes.settle`), from a `finally`, so an attempt cut short by a
cancelled request (a superseded keystroke, a gateway client that went away) is settled too. The
measures that ranking reads are defined here once, for every route: time to the first token
and the whole time, both from when the request could be sent, connection set-up (TCP, TLS)
left out, since that is the network's cost, paid once per connection, not the model's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum

from lsp_server.backends.base import BackendError, Usage
from lsp_server.routing.endpoint_pool import Endpoint


class Ending(StrEnum):
    """How an attempt ended."""

    ANSWERED = "answered"  # it ran to the end of its answer
    FAILED = "failed"  # with a `BackendError` (`error` says which `FailureKind`)
    LOST = "lost"  # stopped before its end: another answered first, the deadline, a cancel


@dataclass(slots=True, kw_only=True)
class Attempt:
    endpoint: Endpoint
    started_at: float = field(default_factory=time.monotonic)
    hedge: bool = False  # asked beside another endpoint (a hedge, an exploration, a probe)
    usage: Usage = field(default_factory=Usage)
    first_token_at: float | None = None
    finished_at: float | None = None
    error: BackendError | None = None
    cancelled: bool = False  # stopped from outside before its end
    settled: bool = False  # told to `Outcomes` (once)

    @property
    def ending(self) -> Ending:
        if self.error is not None:
            return Ending.FAILED
        if self.finished_at is not None and not self.cancelled:
            return Ending.ANSWERED
        return Ending.LOST

    @property
    def succeeded(self) -> bool:
        return self.ending is Ending.ANSWERED

    def first_token_ms(self) -> float | None:
        """Time to the first token, set-up left out; None before one came."""
        if self.first_token_at is None:
            return None
        return self._less_setup(self.first_token_at)

    def total_ms(self, now: float | None = None) -> float:
        """The time it took (or has taken by `now`, if still running), set-up left out."""
        return self._less_setup(self.finished_at or now or time.monotonic())

    def _less_setup(self, at: float) -> float:
        return max(0.0, (at - self.started_at) * 1000 - self.usage.setup_ms)
