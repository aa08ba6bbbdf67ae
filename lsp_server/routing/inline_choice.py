"""Which endpoints an inline request asks, in which order, and which one rides along.

The primary is the endpoint with the lowest expected time to a usable suggestion (time to first
token plus the tokens a suggestion needs at its per-token time, inflated by its error rate).
Learning happens beside it, under the hedge budget, at no cost to the keystroke:

- an endpoint not measured yet is asked in parallel with the primary (cold start);
- otherwise one draw per endpoint from the uncertainty of its estimate (Thompson sampling over
  log-latency); when the draw favours another endpoint, that one is asked in parallel;
- an endpoint whose circuit is open is probed in parallel every few requests (not after a
  growing back-off), so traffic returns within a few requests once it answers again; without
  hedge budget left the probe goes first instead, with the hedge as its safety net.

The first answer wins. An exploration that lost runs on to its first token (within the
deadline, its text unused), so exploring measures an endpoint whole; any other loser's time is a
censored sample, so even a lost race teaches. Exploration spends a share of the hedge budget
only: none left, none done (hedges against stragglers come first). With hedging turned off
(`max_hedge_ratio = 0`) a Thompson draw that favours another endpoint makes it the primary.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from lsp_server.reasons import Reason
from lsp_server.routing.circuit_breaker import BreakerState
from lsp_server.routing.endpoint_pool import Endpoint
from lsp_server.routing.hedge_budget import RideBudget

EXPLORED_AFTER = 2  # attempts (won, lost or failed) before an endpoint stops riding by default
PROBE_EVERY_REQUESTS = 4  # an open circuit is probed at most once in this many requests
PROBE_MIN_INTERVAL_S = 0.1  # and at most this often, however fast requests come


@dataclass(frozen=True, slots=True)
class Choice:
    order: list[Endpoint]  # asked in this order: the primary, then hedges and fallbacks
    parallel: int  # how many start at once: 2 when an exploration or a probe rides along
    reason: Reason  # why the primary: FASTEST (measured) or CONFIG_ORDER (nothing measured)
    rider_reason: Reason | None = None  # EXPLORE or PROBE when one rides along

    @property
    def rider(self) -> Endpoint | None:
        return self.order[1] if self.parallel > 1 else None


class InlineChooser:
    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._requests = 0
        self._probed_at: dict[str, tuple[int, float]] = {}  # name -> (request number, time)
        self._asked_at: dict[str, int] = {}  # name -> request number it was last started in

    def choose(
        self,
        healthy: list[Endpoint],
        tripped: list[Endpoint],
        *,
        prior_ms: Callable[[Endpoint], float],
        tokens: float,
        budget: RideBudget,
    ) -> Choice:
        """Order `healthy` (circuit closed) and pick a rider; `tripped` are the endpoints
        whose circuit is not closed, candidates for a probe."""
        self._requests += 1
        return self._note_asked(self._choose(healthy, tripped, prior_ms, tokens, budget))

    def _choose(
        self,
        healthy: list[Endpoint],
        tripped: list[Endpoint],
        prior_ms: Callable[[Endpoint], float],
        tokens: float,
        budget: RideBudget,
    ) -> Choice:
        # An endpoint known only from lost races (a lower bound) ranks after measured ones.
        ranked = sorted(
            healthy,
            key=lambda e: (not e.stats.measured, e.stats.expected_ms(prior_ms(e), tokens)),
        )
        if not ranked:
            # Every circuit is open: whichever is due for its probe answers, if any.
            probes = [e for e in tripped if e.breaker.allow()]
            return Choice(probes, 1, Reason.PROBE if probes else Reason.BREAKER_OPEN)
        primary = ranked[0]
        reason = Reason.FASTEST if primary.stats.measured else Reason.CONFIG_ORDER
        if reason is Reason.FASTEST and _outranked_by_tripped(primary, tripped):
            reason = Reason.BREAKER_OPEN
        probe = self._probe(tripped)
        if probe is not None and budget.probe:
            return Choice([primary, probe, *ranked[1:]], 2, reason, Reason.PROBE)
        if probe is not None:  # no hedge budget: the probe goes first, the hedge covers it
            return Choice([probe, *ranked], 1, Reason.PROBE)
        backups, explored = self._order_backups(ranked, prior_ms, tokens)
        if explored is not None and budget.explore:
            return Choice([primary, *backups], 2, reason, Reason.EXPLORE)
        if explored is not None and budget.explore_alone:
            return Choice([explored, primary, *backups[1:]], 1, Reason.EXPLORE)
        return Choice([primary, *backups], 1, reason)

    def _order_backups(
        self, ranked: list[Endpoint], prior_ms: Callable[[Endpoint], float], tokens: float
    ) -> tuple[list[Endpoint], Endpoint | None]:
        """The endpoints after the primary, and the one worth asking beside it (not asked
        enough yet, or its Thompson draw beat the primary's), which then comes first.

        The rest stay in ranked order: a hedge against a straggler goes to the best estimate,
        not to a draw, since the hedge is the tail and an exploring hedge to a slow endpoint
        is what makes the p99."""
        primary, rest = ranked[0], ranked[1:]
        remotes = [e for e in rest if not e.is_local]  # the local model costs CPU: no rider
        if not remotes:
            return rest, None
        unexplored = [e for e in remotes if e.stats.requests < EXPLORED_AFTER]
        if unexplored:  # cold start: in the configured order, beside the primary
            explored = [e for e in rest if e not in unexplored]
            return [*unexplored, *explored], unexplored[0]
        draws = {id(e): self._draw(e, prior_ms, tokens) for e in remotes}
        favourite = min(remotes, key=lambda e: draws[id(e)])
        if draws[id(favourite)] < self._draw(primary, prior_ms, tokens):
            return [favourite, *(e for e in rest if e is not favourite)], favourite
        return rest, None

    def _draw(
        self, endpoint: Endpoint, prior_ms: Callable[[Endpoint], float], tokens: float
    ) -> float:
        unasked_for = self._requests - self._asked_at.get(endpoint.name, 0)
        return endpoint.stats.sampled_ms(
            prior_ms(endpoint), tokens, self._rng, unasked_for=unasked_for
        )

    def _note_asked(self, choice: Choice) -> Choice:
        for endpoint in choice.order[: choice.parallel]:
            self._asked_at[endpoint.name] = self._requests
        return choice

    def _probe(self, tripped: list[Endpoint]) -> Endpoint | None:
        now = time.monotonic()
        for endpoint in tripped:
            never = (-PROBE_EVERY_REQUESTS, 0.0)
            last_request, last_time = self._probed_at.get(endpoint.name, never)
            if self._requests - last_request < PROBE_EVERY_REQUESTS:
                continue
            if now - last_time < PROBE_MIN_INTERVAL_S:
                continue
            if endpoint.breaker.state is BreakerState.CLOSED or not endpoint.breaker.try_probe():
                continue
            self._probed_at[endpoint.name] = (self._requests, now)
            return endpoint
        return None


def _outranked_by_tripped(primary: Endpoint, tripped: list[Endpoint]) -> bool:
    """Would an endpoint whose circuit is open be faster, were it answering?"""
    mean = primary.stats.ttft.mean
    return any(e.stats.ttft.known and e.stats.ttft.mean < mean for e in tripped)
