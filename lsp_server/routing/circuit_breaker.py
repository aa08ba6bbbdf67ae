"""A circuit breaker per endpoint: stop sending keystrokes to an endpoint that keeps failing.

Closed: traffic flows. Open: no traffic until the back-off (or the server's Retry-After) has
passed. Half-open: one request is let through as a probe; success closes the circuit, failure
opens it again with a doubled back-off. A Retry-After is honoured up to `MAX_RETRY_AFTER_S`:
a server asking for a day's rest still gets a probe within minutes.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from enum import StrEnum

MAX_RETRY_AFTER_S = 300.0


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    def __init__(
        self,
        *,
        consecutive_failures_to_open: int = 3,
        error_rate_to_open: float = 0.5,
        window: int = 20,
        min_samples: int = 10,
        base_backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._threshold = consecutive_failures_to_open
        self._rate_to_open = error_rate_to_open
        self._outcomes: deque[bool] = deque(maxlen=window)
        self._min_samples = min_samples
        self._base_backoff_s = base_backoff_s
        self._max_backoff_s = max_backoff_s
        self._clock = clock
        self._consecutive_failures = 0
        self._backoff_s = base_backoff_s
        self._open_until = 0.0
        self._server_wait_until = 0.0  # the server's own Retry-After, which probes honour too
        self._opened = False
        self._probe_in_flight = False

    @property
    def state(self) -> BreakerState:
        if not self._opened:
            return BreakerState.CLOSED
        if self._clock() < self._open_until:
            return BreakerState.OPEN
        return BreakerState.HALF_OPEN

    @property
    def retry_in_s(self) -> float:
        return max(0.0, self._open_until - self._clock()) if self._opened else 0.0

    def allow(self) -> bool:
        """May a request go to this endpoint now? In half-open state, only one probe at a time."""
        state = self.state
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.HALF_OPEN and not self._probe_in_flight:
            self._probe_in_flight = True
            return True
        return False

    def try_probe(self) -> bool:
        """Take the probe slot of a circuit that is not closed, before its back-off is over.

        For a probe that runs beside a request another endpoint serves, so it costs the user
        nothing; only a Retry-After from the server keeps it waiting.
        """
        if not self._opened or self._probe_in_flight or self._clock() < self._server_wait_until:
            return False
        self._probe_in_flight = True
        return True

    def release(self) -> None:
        """A request that was allowed ended without a verdict (cancelled: it lost a race)."""
        self._probe_in_flight = False

    def record_success(self) -> None:
        self._outcomes.append(True)
        self._consecutive_failures = 0
        self._probe_in_flight = False
        if self._opened:
            self._opened = False
            self._backoff_s = self._base_backoff_s
            self._outcomes.clear()

    def record_failure(self, retry_after_s: float | None = None) -> None:
        self._outcomes.append(False)
        self._consecutive_failures += 1
        was_probe = self._probe_in_flight
        self._probe_in_flight = False
        if retry_after_s is not None:
            self._open_for(min(retry_after_s, MAX_RETRY_AFTER_S))
            self._server_wait_until = self._open_until
            return
        if was_probe and self._opened:
            self._backoff_s = min(self._backoff_s * 2, self._max_backoff_s)
            self._open_for(self._backoff_s)
        elif not self._opened and self._should_open():
            self._open_for(self._backoff_s)

    def hold_open(self, seconds: float) -> None:
        """Open now for `seconds` (or longer, if already open longer): another gateway saw the
        endpoint fail and probes it. Until then this process sends it nothing, not even a
        probe beside a request; that gateway's verdict arrives as `close` or a longer hold.
        Capped like a Retry-After: what comes through shared state is not trusted further."""
        self._open_for(min(seconds, MAX_RETRY_AFTER_S))
        self._server_wait_until = max(self._server_wait_until, self._open_until)

    def close(self) -> None:
        """Close at once: another gateway's probe found the endpoint answering again."""
        self._consecutive_failures = 0
        self._probe_in_flight = False
        if self._opened:
            self._opened = False
            self._open_until = self._server_wait_until = 0.0
            self._backoff_s = self._base_backoff_s
            self._outcomes.clear()

    def _should_open(self) -> bool:
        if self._consecutive_failures >= self._threshold:
            return True
        if len(self._outcomes) < self._min_samples:
            return False
        failures = self._outcomes.count(False)
        return failures / len(self._outcomes) >= self._rate_to_open

    def _open_for(self, seconds: float) -> None:
        self._opened = True
        self._open_until = max(self._open_until, self._clock() + seconds)
