"""What every route tells about its attempts, in one place.

A route (the inline race, the sequential route of refactors and chats, the Responses
pass-through) asks endpoints; each attempt (`routing/attempt.py`) is settled here once, by
`settle`, from a `finally`, so a cancelled request settles its attempts too, and nothing else
touches an endpoint's statistics, its breaker (this process's and the one shared
with peer gateways), the offline monitor, the hedge budget or the decision log. So a success
closes a breaker and forgives earlier errors whichever route saw it, and a failure reaches the
offline monitor and the shared state whichever route saw it.
"""

from __future__ import annotations

import logging
import time

from lsp_server.backends.base import BackendError
from lsp_server.reasons import Reason
from lsp_server.routing.attempt import Attempt, Ending
from lsp_server.routing.circuit_breaker import BreakerState
from lsp_server.routing.decision_log import Decision, DecisionKind, DecisionLog, estimate_cost
from lsp_server.routing.edit_outcomes import EditOutcomes
from lsp_server.routing.endpoint_pool import Endpoint
from lsp_server.routing.hedge_budget import HedgeBudget
from lsp_server.routing.inline_outcomes import InlineOutcomes
from lsp_server.routing.offline_monitor import OfflineMonitor
from lsp_server.routing.shared_state import SharedState

log = logging.getLogger(__name__)


class Outcomes:
    """The one recorder of attempts and decisions; owned by the `Router`."""

    def __init__(
        self, *, offline: OfflineMonitor, decisions: DecisionLog, budget: HedgeBudget
    ) -> None:
        self.offline = offline
        self.decisions = decisions
        self.budget = budget
        self.edit_budget = HedgeBudget()  # next edits hedge within their own share
        self.chat_budget = HedgeBudget()  # and chats (refactors, gateway chats) within theirs
        self.edits = EditOutcomes()  # what became of the next edits shown
        self.inline = InlineOutcomes()  # and of the inline suggestions offered
        self.shared: SharedState | None = None  # set once the router shares its state

    # -- attempts ----------------------------------------------------------------------------

    def settle(
        self,
        attempt: Attempt,
        *,
        won: bool = False,
        endpoints_fault: bool = True,
        ended: float | None = None,
    ) -> None:
        """What `attempt` did, told once (a second call does nothing): an answer, a failure
        (with `endpoints_fault` false, the request's doing, which counts against nothing), or
        an attempt stopped before its end, whose time up to `ended` is a lower bound."""
        if attempt.settled:
            return
        attempt.settled = True
        endpoint, hedge = attempt.endpoint, attempt.hedge
        ending = attempt.ending
        if ending is Ending.FAILED and attempt.error is not None:
            self._failure(
                endpoint=endpoint, error=attempt.error, hedge=hedge, endpoints_fault=endpoints_fault
            )
        elif ending is Ending.ANSWERED:
            self._success(
                endpoint=endpoint,
                first_token_ms=attempt.first_token_ms(),
                total_ms=attempt.total_ms(),
                tokens=attempt.usage.completion_tokens,
                won=won,
                hedge=hedge,
            )
        else:
            self._lost(
                endpoint=endpoint,
                at_least_ms=attempt.total_ms(ended),
                first_token_ms=attempt.first_token_ms(),
                hedge=hedge,
            )

    def _success(
        self,
        *,
        endpoint: Endpoint,
        first_token_ms: float | None,
        total_ms: float,
        tokens: int,
        won: bool,
        hedge: bool = False,
    ) -> None:
        """An attempt that ran to the end of its answer. A breaker that was open or probing
        closes, and the errors that opened it are forgiven."""
        stats = endpoint.stats
        if hedge:
            stats.hedges += 1
        stats.record_success(
            first_token_ms=first_token_ms, total_ms=total_ms, tokens=tokens, won=won
        )
        reopened = endpoint.breaker.state is not BreakerState.CLOSED
        if reopened:
            stats.forgive_errors()
        endpoint.breaker.record_success()
        if endpoint.is_local:
            return  # the local model is this process's own business
        self.offline.note_success(endpoint.name)
        if self.shared is not None and not endpoint.edit_view:
            self.shared.observed_success(
                endpoint.name, first_token_ms=first_token_ms, total_ms=total_ms, tokens=tokens
            )
            if reopened:
                self.shared.breaker_closed(endpoint.name)

    def _failure(
        self,
        *,
        endpoint: Endpoint,
        error: BackendError,
        hedge: bool = False,
        endpoints_fault: bool = True,
    ) -> None:
        """An attempt that failed. With `endpoints_fault` false the failure is the request's
        doing (a shape the endpoint cannot serve, a body the upstream refused, a fill-in-the-
        middle model asked to chat): it is remembered as the endpoint's last error and counts
        against nothing."""
        if hedge:
            endpoint.stats.hedges += 1
        endpoint.last_error = error.message
        if not endpoints_fault:
            endpoint.breaker.release()
            return
        open_before_s = endpoint.breaker.retry_in_s
        endpoint.stats.record_failure()
        endpoint.breaker.record_failure(error.retry_after_s)
        log.warning("%s", error)
        if endpoint.is_local:
            return
        self.offline.note_failure(error)
        if self.shared is not None and not endpoint.edit_view:
            self.shared.observed_failure(endpoint.name)
            open_for_s = endpoint.breaker.retry_in_s
            if open_for_s > open_before_s:
                self.shared.breaker_opened(endpoint.name, open_for_s)

    def _lost(
        self,
        *,
        endpoint: Endpoint,
        at_least_ms: float,
        first_token_ms: float | None,
        hedge: bool = False,
    ) -> None:
        """An attempt cancelled because another answered first (or at the deadline): its
        time is a lower bound, and a probe it held is given back."""
        if hedge:
            endpoint.stats.hedges += 1
        endpoint.stats.record_censored(at_least_ms, first_token_ms=first_token_ms)
        endpoint.breaker.release()
        if not endpoint.is_local and self.shared is not None and not endpoint.edit_view:
            self.shared.observed_censored(endpoint.name, at_least_ms, first_token_ms=first_token_ms)

    # -- a peer's verdicts (`shared_state`) -----------------------------------------------------

    def peer_opened(self, endpoint: Endpoint, open_for_s: float) -> None:
        """Another gateway saw `endpoint` fail and probes it: hold it open meanwhile."""
        endpoint.breaker.hold_open(open_for_s)

    def peer_closed(self, endpoint: Endpoint) -> None:
        """Another gateway's probe found `endpoint` answering: closed, as after a success of
        this process's own, and the outage's errors forgiven."""
        endpoint.breaker.close()
        endpoint.stats.forgive_errors()

    def not_asked(self, *, endpoint: Endpoint) -> None:
        """A candidate allowed through its breaker as a probe but never asked."""
        endpoint.breaker.release()

    # -- what became of a next edit ----------------------------------------------------------

    def edit_shown(self, *, endpoint: str) -> None:
        self.edits.shown[endpoint] += 1

    def edit_accepted(self, *, endpoint: str) -> None:
        self.edits.accepted[endpoint] += 1

    def edit_dismissed(self, *, endpoint: str) -> None:
        self.edits.dismissed[endpoint] += 1

    def edit_kept(self, endpoint: str, kept: int, inserted: int) -> None:
        """Of the `inserted` characters of an accepted edit, `kept` were still there later."""
        self.edits.kept(endpoint, kept, inserted)

    # -- what became of an inline suggestion ------------------------------------------------

    def inline_offered(self, *, endpoint: str) -> None:
        self.inline.offered[endpoint] += 1

    def inline_accepted(self, *, endpoint: str) -> None:
        self.inline.accepted[endpoint] += 1

    def inline_kept(self, endpoint: str, kept: int, inserted: int) -> None:
        """Of the `inserted` characters of an accepted suggestion, `kept` were still there
        later."""
        self.inline.chars.add(endpoint, kept, inserted)

    # -- requests ----------------------------------------------------------------------------

    def request_started(self, *, kind: DecisionKind) -> None:
        if kind is DecisionKind.INLINE:
            self.budget.count_request()
        elif kind is DecisionKind.EDIT:
            self.edit_budget.count_request()
        elif kind is DecisionKind.CHAT:
            self.chat_budget.count_request()

    def request_ended(self, *, kind: DecisionKind, hedged: bool, explored: bool = False) -> None:
        """Count whether a request asked more than one endpoint at once, against the hedge
        budget (inline traffic shares its count with peer gateways)."""
        if kind is DecisionKind.INLINE:
            self.budget.count_outcome(hedged=hedged, explored=explored)
            if self.shared is not None:
                self.shared.counted_inline(hedged=hedged)
        elif kind is DecisionKind.EDIT:
            self.edit_budget.count_outcome(hedged=hedged, explored=explored)
        elif kind is DecisionKind.CHAT:
            self.chat_budget.count_outcome(hedged=hedged, explored=False)

    def decision(
        self,
        *,
        kind: DecisionKind,
        served_by: Endpoint | None,
        reason: Reason,
        started: float,
        ended: float | None = None,
        prompt_tokens: int = 0,
        tokens: int = 0,
        uri: str | None = None,
        hedged: bool = False,
        detail: str | None = None,
    ) -> Decision:
        """Log who served a request (None: nobody) and why, its latency from `started` to
        `ended` (by default now); the answer's cost is added to the endpoint's account."""
        cost = 0.0
        if served_by is not None:
            cost = estimate_cost(served_by.price, prompt_tokens, tokens)
            served_by.stats.cost_usd += cost
        decision = Decision(
            kind=kind,
            endpoint=served_by.name if served_by is not None else None,
            reason=reason,
            latency_ms=round(((ended or time.monotonic()) - started) * 1000, 2),
            tokens=tokens if served_by is not None else 0,
            cost_usd=cost,
            uri=uri,
            hedged=hedged,
            detail=detail,
        )
        self.decisions.add(decision)
        return decision

    def cache_hit(self, *, endpoint: str | None, uri: str | None) -> None:
        """A suggestion served again from the completion cache is a decision too, so the
        status names what the editor shows rather than the request before it."""
        self.decisions.add(
            Decision(
                kind=DecisionKind.INLINE,
                endpoint=endpoint,
                reason=Reason.CACHE,
                latency_ms=0.0,
                tokens=0,
                cost_usd=0.0,
                uri=uri,
            )
        )
