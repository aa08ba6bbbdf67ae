"""Live latency statistics of one endpoint.

The router ranks on a log-normal model of the time to first token (mean and variance of its
logarithm, recent requests weighing most, a straggler clipped so it moves the mean little) plus
the time per streamed token, so an endpoint is judged by when a usable suggestion arrives. The
model's uncertainty (few samples, or old ones) is what exploration samples from.

A request that lost a race is a *censored* sample: it took at least as long as the winner. It
enters as the log-normal's expectation beyond that bound, at a weight of at most one half that
shrinks with how unlikely the bound was to bite, so losing races pushes a slow endpoint down
without a wrong guess of how slow, and a bound far below the estimate does not anchor it.
Failures move only the error rate, never the latency, so an endpoint back from an outage is
ranked by what it did before.

A short window of raw samples is kept for the p50/p95 that people read.
"""

from __future__ import annotations

import bisect
import math
import random
import time
from collections import deque
from dataclasses import dataclass, field

from lsp_server.routing.stats_snapshot import EndpointEstimate

EWMA_ALPHA = 0.2  # weight of the newest sample in the plain moving averages shown in status
WINDOW = 200  # samples kept for percentiles
MAX_WEIGHT = 16.0  # the log-latency model remembers about the last sixteen requests
PRIOR_WEIGHT = 1.0  # pseudo-samples of the prior's variance blended into a young estimate
PRIOR_LOG_VAR = 0.5**2  # spread assumed before the data says otherwise
MIN_LOG_VAR = 0.05**2
CLIP_SD = 2.5  # a sample beyond this many standard deviations is clipped to it, unless…
SHIFT_RUN = 3  # …this many in a row lie beyond it on the same side: the level has changed
CENSORED_WEIGHT = 0.5
CERTAINTY_HALF_LIFE_REQUESTS = 20  # not asked for this many requests: half as sure
RESTORED_MAX_WEIGHT = 5.0  # a persisted estimate informs a new process but is soon revised
_INVERSE_MILLS_AT_0 = math.sqrt(2.0 / math.pi)  # E[Z | Z > 0] for a standard normal


@dataclass(slots=True)
class Ewma:
    alpha: float = EWMA_ALPHA
    value: float | None = None
    # Average the logarithms (a geometric mean), so one straggler does not triple the estimate.
    log_space: bool = False

    def add(self, sample: float) -> None:
        if self.log_space and self.value is not None:
            self.value *= math.exp(self.alpha * math.log(max(sample, 1e-3) / self.value))
            return
        self.value = (
            sample if self.value is None else self.value + self.alpha * (sample - self.value)
        )


@dataclass(slots=True)
class LogLatency:
    """Exponentially forgetting mean and variance of ln(milliseconds), with its sample weight."""

    mean: float = 0.0
    var: float = PRIOR_LOG_VAR
    weight: float = 0.0
    surprises: int = 0  # consecutive samples beyond CLIP_SD, signed by their side

    @property
    def known(self) -> bool:
        return self.weight > 0.0

    @property
    def spread(self) -> float:
        """The standard deviation of one sample, the prior blended in while data is scarce."""
        blended = (self.var * self.weight + PRIOR_LOG_VAR * PRIOR_WEIGHT) / (
            self.weight + PRIOR_WEIGHT
        )
        return math.sqrt(max(blended, MIN_LOG_VAR))

    def add(self, log_ms: float, weight: float = 1.0) -> None:
        if self.weight >= 3.0:  # enough to tell a straggler from a change of level
            bound = CLIP_SD * self.spread
            side = (log_ms > self.mean + bound) - (log_ms < self.mean - bound)
            same_side = side != 0 and (self.surprises > 0) == (side > 0)
            self.surprises = self.surprises + side if same_side else side
            if abs(self.surprises) >= SHIFT_RUN:
                self.weight, self.surprises = 1.0, 0  # forget the old level: follow the new
            else:
                log_ms = min(max(log_ms, self.mean - bound), self.mean + bound)
        total = min(self.weight + weight, MAX_WEIGHT)
        alpha = weight / total  # a running mean until the weight is capped, then an EWMA
        delta = log_ms - self.mean
        self.mean += alpha * delta
        self.var = max((1.0 - alpha) * (self.var + alpha * delta * delta), MIN_LOG_VAR)
        if self.weight == 0.0:
            self.var = PRIOR_LOG_VAR
        self.weight = total

    def add_lower_bound(self, log_ms: float) -> None:
        """The latency was at least exp(log_ms): add its expectation given that, at half weight."""
        if not self.known:  # the prior's expectation beyond the bound, centred on the bound
            self.add(log_ms + math.sqrt(PRIOR_LOG_VAR) * _INVERSE_MILLS_AT_0, CENSORED_WEIGHT)
            return
        sd = self.spread
        z = (log_ms - self.mean) / sd
        tail = 0.5 * math.erfc(z / math.sqrt(2.0))
        # Weighed by how likely the bound was to bite: one far below the mean says little, and
        # taken as a whole sample it would only anchor the estimate where it already is.
        weight = CENSORED_WEIGHT * (1.0 - tail)
        if weight < 0.01:
            return
        density = math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
        beyond = log_ms + sd if tail < 1e-9 else self.mean + sd * density / tail
        self.add(max(beyond, log_ms), weight)


@dataclass(slots=True)
class EndpointStats:
    """What the router knows of one endpoint's recent behaviour."""

    ttft: LogLatency = field(default_factory=LogLatency)
    ms_per_token: Ewma = field(default_factory=Ewma)
    first_token_ms: Ewma = field(default_factory=lambda: Ewma(log_space=True))
    total_ms: Ewma = field(default_factory=lambda: Ewma(log_space=True))
    error_rate: Ewma = field(default_factory=lambda: Ewma(alpha=0.1, value=0.0))
    tokens_per_s: Ewma = field(default_factory=Ewma)
    recent_total_ms: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    recent_first_token_ms: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    requests: int = 0
    wins: int = 0
    errors: int = 0
    hedges: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    measured: bool = False  # a whole sample seen (not only lost races' lower bounds)
    last_sample_at: float | None = None  # monotonic time of the last attempt's end
    updated_at: float = 0.0  # Unix time of the last latency sample, for snapshots
    # `recent_first_token_ms` in order once asked for, kept in order as samples come: a
    # keystroke asks for its percentiles three times (hedge delay, race, deadline).
    _ordered_first_token: list[float] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def record_success(
        self, *, first_token_ms: float | None, total_ms: float, tokens: int, won: bool
    ) -> None:
        """`first_token_ms` and `total_ms` exclude connection set-up; no first token measured
        (a non-streamed answer): the whole time stands for it."""
        self.requests += 1
        self.wins += int(won)
        self.tokens += tokens
        self.absorb_success(first_token_ms=first_token_ms, total_ms=total_ms, tokens=tokens)

    def absorb_success(self, *, first_token_ms: float | None, total_ms: float, tokens: int) -> None:
        """The latency a success tells, without counting a request of this process: also how
        another gateway's sample of the endpoint is taken in."""
        first = total_ms if first_token_ms is None else first_token_ms
        self.ttft.add(math.log(max(first, 0.1)))
        self.measured = True
        if first_token_ms is not None:
            self.first_token_ms.add(first_token_ms)
            self._note_first_token(first_token_ms)
            if tokens > 1:
                self.ms_per_token.add(max(0.0, total_ms - first_token_ms) / (tokens - 1))
        self.total_ms.add(total_ms)
        self.recent_total_ms.append(total_ms)
        self.error_rate.add(0.0)
        if tokens and total_ms > 0:
            self.tokens_per_s.add(tokens / (total_ms / 1000))
        self._touch()

    def record_censored(self, at_least_ms: float, *, first_token_ms: float | None = None) -> None:
        """The request was abandoned after `at_least_ms` (it lost a race). When its first token
        had come (`first_token_ms`), that is a whole sample of the time to first token."""
        self.requests += 1
        self.absorb_censored(at_least_ms, first_token_ms=first_token_ms)

    def absorb_censored(self, at_least_ms: float, *, first_token_ms: float | None = None) -> None:
        if first_token_ms is not None:
            self.ttft.add(math.log(max(first_token_ms, 0.1)))
            self.measured = True
            self.first_token_ms.add(first_token_ms)
            self._note_first_token(first_token_ms)
        else:
            self.ttft.add_lower_bound(math.log(max(at_least_ms, 0.1)))
            current = self.total_ms.value
            if current is None or at_least_ms > current:
                self.total_ms.add(at_least_ms)
        self._touch()

    def record_failure(self) -> None:
        """Failures rank through the error rate, not through latency."""
        self.requests += 1
        self.errors += 1
        self.absorb_failure()

    def absorb_failure(self) -> None:
        self.error_rate.add(1.0)
        self.last_sample_at = time.monotonic()

    def percentile(self, q: float) -> float | None:
        """A percentile of recent total latencies."""
        return _percentile(self.recent_total_ms, q)

    def first_token_percentile(self, q: float) -> float | None:
        if self._ordered_first_token is None:
            self._ordered_first_token = sorted(self.recent_first_token_ms)
        return _percentile_of_ordered(self._ordered_first_token, q)

    def _note_first_token(self, first_token_ms: float) -> None:
        """The sample joins the window, and the ordered copy once one is kept: the sample
        that falls out of the window taken out of it and this one put in its place, so a
        request reads its percentiles without sorting the window again."""
        window, ordered = self.recent_first_token_ms, self._ordered_first_token
        if ordered is not None and len(window) == window.maxlen:
            index = bisect.bisect_left(ordered, window[0])
            if index < len(ordered) and ordered[index] == window[0]:
                del ordered[index]
            else:  # not found (a NaN): sorted afresh when next asked
                ordered = self._ordered_first_token = None
        if ordered is not None:
            bisect.insort(ordered, first_token_ms)
        window.append(first_token_ms)

    def forgive_errors(self) -> None:
        """A recovered endpoint starts afresh: its past outage no longer weighs on its rank."""
        self.error_rate.value = 0.0

    def expected_ms(self, prior_ms: float, tokens: float = 1.0) -> float:
        """Expected time to a usable answer of `tokens` tokens; failures inflate it like a
        retry would."""
        first = math.exp(self.ttft.mean) if self.ttft.known else prior_ms
        return self._with_failures(first + self._streaming_ms(tokens))

    def sampled_ms(
        self, prior_ms: float, tokens: float, rng: random.Random, *, unasked_for: int
    ) -> float:
        """One draw from what the typical latency might be, given how much is known (Thompson
        sampling): an endpoint with few samples, or not asked for `unasked_for` requests,
        draws widely and so gets explored."""
        if self.ttft.known:
            weight = self.ttft.weight * 0.5 ** (unasked_for / CERTAINTY_HALF_LIFE_REQUESTS)
            centre, spread = self.ttft.mean, self.ttft.spread / math.sqrt(max(weight, 0.25))
        else:
            centre, spread = math.log(prior_ms), math.sqrt(PRIOR_LOG_VAR)
        first = math.exp(rng.gauss(centre, spread))
        return self._with_failures(first + self._streaming_ms(tokens))

    def _streaming_ms(self, tokens: float) -> float:
        per_token = self.ms_per_token.value
        return 0.0 if per_token is None else per_token * max(0.0, tokens - 1.0)

    def _with_failures(self, ms: float) -> float:
        failure = min(self.error_rate.value or 0.0, 0.95)
        return ms / (1.0 - failure)

    def _touch(self) -> None:
        self.last_sample_at = time.monotonic()
        self.updated_at = time.time()

    # -- snapshots (persisted between runs, shared between processes) ----------------------

    def estimate(self) -> EndpointEstimate | None:
        if not self.ttft.known:
            return None
        return EndpointEstimate(
            self.ttft.mean,
            self.ttft.var,
            self.ttft.weight,
            self.ms_per_token.value,
            self.updated_at,
        )

    def restore(self, estimate: EndpointEstimate) -> None:
        """Start from an estimate made elsewhere (an earlier run, another gateway), at a weight
        that lets this process's own samples take over within a few requests."""
        weight = min(estimate.weight, RESTORED_MAX_WEIGHT)
        if weight <= 0.0 or self.ttft.weight >= weight:
            return
        variance = max(estimate.log_ttft_var, MIN_LOG_VAR)
        self.ttft = LogLatency(estimate.log_ttft_mean, variance, weight)
        self.measured = True
        if estimate.ms_per_token is not None and self.ms_per_token.value is None:
            self.ms_per_token.value = estimate.ms_per_token
        self.updated_at = max(self.updated_at, estimate.updated_at)


def _percentile(samples: deque[float], q: float) -> float | None:
    return _percentile_of_ordered(sorted(samples), q)


def _percentile_of_ordered(ordered: list[float], q: float) -> float | None:
    if not ordered:
        return None
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]
