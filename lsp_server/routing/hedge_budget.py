"""How much extra traffic a router may send: hedges, explorations and probes, in one budget.

`max_hedge_ratio` bounds the requests that ask a second endpoint. Hedges against stragglers may
use all of it (the tail is what the person sees); probes of an endpoint coming back from an
outage ride along while it lasts (they are how an endpoint returns); explorations, which only
learn a rival's latency, use at most `EXPLORATION_SHARE` of it. `HEDGE_BURST` requests beyond
the ratio cover a short bad patch at once. Gateways that share state share one budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, overload

from lsp_server.routing.latency_stats import EndpointStats

EXPLORATION_SHARE = 0.25  # of the hedge budget, at most, for explorations riding along
HEDGE_BURST = 5  # hedges allowed beyond the ratio, so a short bad patch is covered at once
ADAPTIVE_HEDGE_MIN_SAMPLES = 10  # first-token samples before the hedge delay adapts
ADAPTIVE_HEDGE_FLOOR_MS = 15.0  # never hedge sooner than this


@overload
def hedge_delay_s(primary: EndpointStats, configured_ms: float) -> float: ...
@overload
def hedge_delay_s(primary: EndpointStats, configured_ms: None) -> float | None: ...
def hedge_delay_s(primary: EndpointStats, configured_ms: float | None) -> float | None:
    """When to ask the next endpoint beside a primary with these statistics, for every route
    that hedges: the primary's 95th-percentile time to a first token once it has
    `ADAPTIVE_HEDGE_MIN_SAMPLES` of them (never sooner than the floor, never later than
    `configured_ms`), else `configured_ms` (None: a route with no configured delay does not
    hedge until the primary's tail is known).

    Waiting out the full delay on a straggler is what makes the tail; hedging once the primary
    is slower than nineteen times in twenty bounds it, and leaves most of the hedge budget for
    the stragglers themselves (hedging at the p90 spent it on the ordinary tail).
    """
    p95 = None
    if len(primary.recent_first_token_ms) >= ADAPTIVE_HEDGE_MIN_SAMPLES:
        p95 = primary.first_token_percentile(0.95)
    if p95 is None:
        return None if configured_ms is None else configured_ms / 1000
    delay_ms = max(ADAPTIVE_HEDGE_FLOOR_MS, p95)
    if configured_ms is not None:
        delay_ms = min(configured_ms, delay_ms)
    return delay_ms / 1000


@dataclass(frozen=True, slots=True)
class RideBudget:
    """What the budget allows beside the primary of one request."""

    probe: bool  # a probe of an open circuit may ride along (else it goes first)
    explore: bool  # an exploration may ride along
    explore_alone: bool  # hedging is off: an exploration may be the primary instead


class PeerCounts(Protocol):
    """The inline and hedged requests of the other gateways that share state."""

    @property
    def peer_inline(self) -> int: ...

    @property
    def peer_hedged(self) -> int: ...


class HedgeBudget:
    def __init__(self) -> None:
        self.inline_requests = 0
        self.hedged_requests = 0
        self.explored_requests = 0  # the hedged requests that had an exploration riding along
        self.peers: PeerCounts | None = None

    def count_request(self) -> None:
        self.inline_requests += 1

    def count_outcome(self, *, hedged: bool, explored: bool) -> None:
        if hedged:
            self.hedged_requests += 1
        if explored:
            self.explored_requests += 1

    def hedge_left(self, ratio: float) -> bool:
        """A hedge against a straggler may be sent now."""
        inline, hedged = self.inline_requests, self.hedged_requests
        if self.peers is not None:
            inline += self.peers.peer_inline
            hedged += self.peers.peer_hedged
        return hedged < ratio * inline + HEDGE_BURST

    def ride(self, ratio: float) -> RideBudget:
        """What may ride beside the next request's primary."""
        if ratio <= 0:
            return RideBudget(probe=False, explore=False, explore_alone=True)
        hedge_left = self.hedge_left(ratio)
        share = EXPLORATION_SHARE * ratio * self.inline_requests + HEDGE_BURST
        return RideBudget(
            probe=hedge_left,
            explore=hedge_left and self.explored_requests < share,
            explore_alone=False,
        )
