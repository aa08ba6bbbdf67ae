"""Live latency statistics of one endpoint.

Two views of the same samples: exponentially weighted means (recent requests weigh most; the
router ranks on them) and a short window of recent samples for the p50/p95 that people read.
A request that lost a hedge race is recorded as a *censored* sample: we know only that it took
at least as long as the winner, and that lower bound still pushes a slow endpoint down the ranking.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import deque
from dataclasses import dataclass, field

EWMA_ALPHA = 0.2  # weight of the newest sample: about the last ten requests dominate
WINDOW = 200  # samples kept for percentiles
# The ranking reads the median of the last few requests (lost races counted at their lower
# bound): with hedging, a straggler costs one hedge, so what should decide the order is the
# typical latency, and a median ignores the odd straggler that would swing a mean.
RANKING_WINDOW = 15
RANKING_MIN_SAMPLES = 5


@dataclass(slots=True)
class Ewma:
    alpha: float = EWMA_ALPHA
    value: float | None = None
    # Average the logarithms (a geometric mean): one straggler at ten times the usual latency
    # then moves the estimate by a factor of about 1.6 instead of tripling it, so a single slow
    # request does not hand the ranking to a slower endpoint.
    log_space: bool = False

    def add(self, sample: float) -> None:
        if self.log_space and self.value is not None:
            self.value *= math.exp(self.alpha * math.log(max(sample, 1e-3) / self.value))
            return
        self.value = (
            sample if self.value is None else self.value + self.alpha * (sample - self.value)
        )


@dataclass(slots=True)
class EndpointStats:
    """What the router knows of one endpoint's recent behaviour."""

    first_token_ms: Ewma = field(default_factory=lambda: Ewma(log_space=True))
    total_ms: Ewma = field(default_factory=lambda: Ewma(log_space=True))
    error_rate: Ewma = field(default_factory=lambda: Ewma(alpha=0.1, value=0.0))
    tokens_per_s: Ewma = field(default_factory=Ewma)
    recent_total_ms: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    recent_first_token_ms: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    ranking_ms: deque[float] = field(default_factory=lambda: deque(maxlen=RANKING_WINDOW))
    requests: int = 0
    wins: int = 0
    errors: int = 0
    hedges: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    last_sample_at: float | None = None

    def record_success(
        self, *, first_token_ms: float | None, total_ms: float, tokens: int, won: bool
    ) -> None:
        self.requests += 1
        self.wins += int(won)
        self.tokens += tokens
        if first_token_ms is not None:
            self.first_token_ms.add(first_token_ms)
            self.recent_first_token_ms.append(first_token_ms)
        self.total_ms.add(total_ms)
        self.recent_total_ms.append(total_ms)
        self.ranking_ms.append(total_ms)
        self.error_rate.add(0.0)
        if tokens and total_ms > 0:
            self.tokens_per_s.add(tokens / (total_ms / 1000))
        self.last_sample_at = time.monotonic()

    def record_censored(self, at_least_ms: float) -> None:
        """The request was abandoned after `at_least_ms` with no answer (it lost a race)."""
        self.requests += 1
        current = self.total_ms.value
        if current is None or at_least_ms > current:
            self.total_ms.add(at_least_ms)
            self.first_token_ms.add(at_least_ms)
            self.ranking_ms.append(at_least_ms)
        self.last_sample_at = time.monotonic()

    def record_failure(self) -> None:
        """Failures rank through the error rate, not through latency."""
        self.requests += 1
        self.errors += 1
        self.error_rate.add(1.0)
        self.last_sample_at = time.monotonic()

    def percentile(self, q: float) -> float | None:
        """A percentile of recent total latencies."""
        return _percentile(self.recent_total_ms, q)

    def first_token_percentile(self, q: float) -> float | None:
        return _percentile(self.recent_first_token_ms, q)

    def forgive_errors(self) -> None:
        """A recovered endpoint starts afresh: its past outage no longer weighs on its rank."""
        self.error_rate.value = 0.0

    def expected_ms(self, prior_ms: float) -> float:
        """Expected time to a usable answer; failures inflate it like a retry would."""
        if len(self.ranking_ms) >= RANKING_MIN_SAMPLES:
            base = statistics.median(self.ranking_ms)
        elif self.total_ms.value is not None:
            base = self.total_ms.value
        else:
            base = prior_ms
        failure = min(self.error_rate.value or 0.0, 0.95)
        return base / (1.0 - failure)


def _percentile(samples: deque[float], q: float) -> float | None:
    if not samples:
        return None
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]
