"""The race: one keystroke-level request (an inline suggestion, a next edit) raced across the
endpoints of its role, and what it taught recorded.

Inline: sensitive or offline → local only, under the local budget (`local.deadline_ms`), a model
still loading waited for within it; otherwise the endpoints of the role ranked by expected time
to a usable suggestion (`inline_choice`: time to first token plus streaming, inflated by the
error rate), endpoints with an open breaker skipped, the local model last unless it has proved
faster; exploration and probes ride beside the primary under the hedge budget. `InlineRace`
runs the attempts; this module chooses the candidates, asks the gate for each attempt's permit,
and settles every attempt with the outcome recorder, after the answer is written, or at once
when the request is cancelled.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from lsp_server.after_answer import later as after_the_answer
from lsp_server.backends.base import Usage
from lsp_server.backends.local_model import LocalModel, LocalState
from lsp_server.config.model import Config, Role
from lsp_server.failures import EndpointFailure
from lsp_server.reasons import Reason
from lsp_server.routing.answerers import Answerers
from lsp_server.routing.decision_log import DecisionKind
from lsp_server.routing.endpoint_pool import Endpoint, EndpointPool, healthy_first
from lsp_server.routing.gate import Gate
from lsp_server.routing.hedge_budget import HedgeBudget, hedge_delay_s
from lsp_server.routing.inline_choice import Choice, InlineChooser
from lsp_server.routing.inline_race import (
    InlineRace,
    RaceAttempt,
    RaceOutcome,
    RaceRequest,
    TextCall,
)
from lsp_server.routing.latency_stats import Ewma
from lsp_server.routing.outcomes import Outcomes

SUGGESTION_TOKENS_PRIOR = 8.0  # tokens a suggestion needs, until winners have told us


@dataclass(frozen=True, slots=True)
class Routed:
    """What happened to one routed request: who answered, why them, and what failed."""

    text: str
    endpoint: str | None
    reason: Reason
    latency_ms: float
    tokens: int
    timed_out: bool = False
    usage: Usage | None = None  # the answering call's counts and finish reason
    max_tokens: int | None = None  # the most tokens the answering endpoint was asked for
    failures: tuple[EndpointFailure, ...] = ()

    @property
    def detail(self) -> str | None:
        """What went wrong, in one line, when something did."""
        if self.failures:
            return "; ".join(str(f) for f in self.failures)
        if self.timed_out:
            return "no answer within the deadline"
        return None


class RaceRoute:
    """Races requests of the `inline` and `edit` roles; owned by the `Router`."""

    def __init__(
        self,
        *,
        config: Callable[[], Config],
        pool: EndpointPool,
        outcomes: Outcomes,
        gate: Gate,
        answerers: Callable[[Role, Reason | None], Answerers],
        connect: Callable[[], None],
        recorded: Callable[[], None],
        chooser: InlineChooser,
    ) -> None:
        """`connect` opens the endpoints' connections the gate allows; `recorded` is told
        after each race's records are made."""
        self._config = config
        self.pool = pool
        self.outcomes = outcomes
        self.gate = gate
        self.answerers = answerers
        self._connect_endpoints = connect
        self._save_now_and_then = recorded
        self._chooser = chooser
        self._answer_tokens_by_role: dict[Role, Ewma] = {}  # what winners of a role wrote
        self._measuring: set[asyncio.Task[None]] = set()  # lost explorations, to their first token

    @property
    def config(self) -> Config:
        return self._config()

    async def race(
        self,
        request: RaceRequest,
        *,
        uri: str | None = None,
        local_only: Reason | None = None,
        pinned: str | None = None,
        on_text: Callable[[str], None] | None = None,
        on_attempt: Callable[[str], None] | None = None,
    ) -> Routed:
        """Race the endpoints of `request.role`, ranked by live latency, under the keystroke
        deadline.

        `local_only` names why it must stay on this machine; `pinned` names the one endpoint a
        caller asked for by name (privacy still wins over it). With `on_text` the text streams
        out as it comes from the first endpoint to write (named to `on_attempt` first), which
        the race then commits to (see `InlineRace`).
        """
        started = time.monotonic()
        kind = request.kind
        self.outcomes.request_started(kind=kind)
        self._connect_endpoints()
        choice = self._race_choice(request, local_only, pinned)
        candidates, reason, parallel = choice.order, choice.reason, choice.parallel
        if not candidates:
            return self._record_empty(kind, reason, started, uri)
        race = InlineRace(
            request.call,
            candidates,
            permits=lambda e: self.gate.permit(e.name, remote=not e.is_local, held=local_only),
            enough=request.enough,
            hedge_after_s=hedge_delay_s(candidates[0].stats, self.config.routing.hedge_after_ms),
            deadline_s=self._inline_deadline_ms(candidates, request.role) / 1000,
            may_hedge=self._budget(request.role).hedge_left(self.config.routing.max_hedge_ratio),
            parallel=parallel,
            measure_riders=choice.rider_reason == "explore",
            on_text=on_text,
            on_attempt=on_attempt,
        )
        try:
            outcome = await race.run()
        except asyncio.CancelledError:
            # A superseded keystroke or a client gone: what was asked is settled all the same.
            self._settle_cancelled(race, candidates, kind)
            raise
        ended = time.monotonic()
        rider_reason = choice.rider_reason if parallel > 1 else None
        routed = _routed(
            outcome, candidates, (reason, rider_reason), started, ended, request.max_tokens
        )
        # The statistics, the decision and the rest of the records wait for the answer to be
        # written (`after_answer`): the caller needs only `routed`.
        after_the_answer(
            partial(self._record_race, outcome, candidates, choice, request, started, ended, uri)
        )
        if request.role == "edit" and outcome.timed_out:  # a partial rewrite is no edit
            routed = dataclasses.replace(routed, text="")
        return routed

    async def edit(
        self,
        call: TextCall,
        *,
        prompt_chars: int,
        answer_tokens: int,
        uri: str | None = None,
        local_only: Reason | None = None,
        pinned: str | None = None,
    ) -> Routed:
        """Route one next-edit prediction as a keystroke is routed (see `race`) among the
        `edit` endpoints, under `edit_deadline_ms`; `call` asks one endpoint in its own format.
        Each endpoint's edit latency is measured apart from its inline latency
        (`Endpoint.for_edits`), which it would otherwise distort."""
        request = RaceRequest(
            role="edit",
            kind=DecisionKind.EDIT,
            call=call,
            enough=lambda text: False,  # an edit is the whole rewritten region
            max_tokens=answer_tokens,
            prompt_chars=prompt_chars,
        )
        return await self.race(request, uri=uri, local_only=local_only, pinned=pinned)

    def _budget(self, role: Role) -> HedgeBudget:
        return self.outcomes.edit_budget if role == "edit" else self.outcomes.budget

    def _answer_tokens(self, role: Role) -> Ewma:
        """How many tokens an answer of `role` needs, as its winners have told."""
        known = self._answer_tokens_by_role.get(role)
        if known is None:
            known = Ewma(alpha=0.1, value=SUGGESTION_TOKENS_PRIOR)
            self._answer_tokens_by_role[role] = known
        return known

    def _inline_deadline_ms(self, candidates: list[Endpoint], role: Role = "inline") -> int:
        """The keystroke deadline (a next edit's own), or the local budget when only the local
        model can answer (rule 6): the local model is then no hedge but the answer, and a CPU
        needs longer."""
        keystroke = self._deadline_ms(role)
        if all(e.is_local for e in candidates):
            return max(keystroke, self.config.local.deadline_ms)
        return keystroke

    def _deadline_ms(self, role: Role) -> int:
        routing = self.config.routing
        return routing.edit_deadline_ms if role == "edit" else routing.inline_deadline_ms

    def _race_choice(
        self, request: RaceRequest, local_only: Reason | None, pinned: str | None
    ) -> Choice:
        answerers = self.answerers(request.role, local_only)
        pool_local, model = self.pool.local, self.pool.local_model
        view = Endpoint.for_edits if request.role == "edit" else _as_is
        local = view(pool_local) if pool_local is not None else None
        if answerers.local_declines is not None:
            local = None  # asked, it would hold the one local worker for nothing
        if answerers.stay_local is not None:
            # The local model is the only answer: one still loading is waited for, within
            # the local budget, rather than skipped.
            answering = local is not None and model is not None and _awaitable(model)
            if local is not None and answering:
                return Choice([local], 1, answerers.stay_local)
            declined = answerers.local_declines is not None
            return Choice([], 1, Reason.LOCAL_DECLINES if declined else answerers.stay_local)
        remotes = [view(e) for e in answerers.remotes]
        if model is None:
            local_ready = False
        elif remotes:
            local_ready = _usable(model)
        else:  # a local-only configuration: as above, a loading model is waited for
            local_ready = _awaitable(model)
        endpoints = remotes + ([local] if local is not None and local_ready else [])
        if not endpoints:
            if answerers.local_declines is not None:
                return Choice([], 1, Reason.LOCAL_DECLINES)
            loading = answerers.local_state is LocalState.LOADING
            return Choice([], 1, Reason.LOCAL_LOADING if loading else Reason.NO_ENDPOINT)
        if pinned is not None:
            return Choice(
                [e for e in endpoints if e.name == pinned and e.breaker.allow()], 1, Reason.PINNED
            )
        if not remotes:  # a local-only configuration: nothing to choose between
            return Choice(endpoints, 1, Reason.LOCAL_ONLY)
        healthy, tripped = healthy_first(endpoints)
        order = {e.name: i for i, e in enumerate(endpoints)}
        deadline = self._deadline_ms(request.role)

        def prior_ms(endpoint: Endpoint) -> float:
            """Before any data: the configured order, the local model last."""
            prior = deadline * (1 + order[endpoint.name] * 0.05)
            return prior * 2 if endpoint.is_local else prior

        answer_tokens = self._answer_tokens(request.role).value or 1.0
        tokens = min(answer_tokens, float(request.max_tokens))
        return self._chooser.choose(
            healthy,
            tripped,
            prior_ms=prior_ms,
            tokens=tokens,
            budget=self._budget(request.role).ride(self.config.routing.max_hedge_ratio),
        )

    def _record_race(
        self,
        outcome: RaceOutcome,
        candidates: list[Endpoint],
        choice: Choice,
        request: RaceRequest,
        started: float,
        ended: float,
        uri: str | None,
    ) -> None:
        """What a race taught: each attempt's statistics, the decision, the answer's length,
        the edit views' errors carried back; the estimates saved now and then."""
        parallel = choice.parallel
        explored = choice.rider_reason is Reason.EXPLORE and parallel > 1
        self.outcomes.request_ended(kind=request.kind, hedged=outcome.hedged, explored=explored)
        measuring = {id(a) for a in outcome.measuring}
        for attempt in outcome.attempts:
            if id(attempt) not in measuring:
                self.outcomes.settle(attempt, won=attempt is outcome.winner, ended=ended)
        if outcome.measuring:
            self._measure_later(outcome.measuring, started)
        self._not_asked(candidates, outcome.attempts)
        winner = outcome.winner
        rider_reason = choice.rider_reason if parallel > 1 else None
        routed = _routed(outcome, candidates, (choice.reason, rider_reason), started, ended)
        prompt_tokens = 0
        if winner is not None:
            self._answer_tokens(request.role).add(float(max(1, winner.usage.completion_tokens)))
            prompt_tokens = winner.usage.prompt_tokens or request.prompt_chars // 4
        self.outcomes.decision(
            kind=request.kind,
            served_by=winner.endpoint if winner is not None else None,
            reason=routed.reason,
            started=started,
            ended=ended,
            prompt_tokens=prompt_tokens,
            tokens=routed.tokens,
            uri=uri,
            hedged=outcome.hedged,
            detail=routed.detail,
        )
        if request.role == "edit":
            for view in candidates:
                self.pool.adopt_edit_view(view)
        self._save_now_and_then()

    def _measure_later(self, attempts: list[RaceAttempt], started: float) -> None:
        """Await explorations that lost before their first token until it comes (within the
        request's deadline), so exploring yields a whole time to first token, not a bound."""
        deadline_s = self.config.routing.inline_deadline_ms / 1000 - (time.monotonic() - started)

        async def measure() -> None:
            tasks = [a.task for a in attempts if a.task is not None]
            try:
                await asyncio.wait(tasks, timeout=max(0.0, deadline_s))
            finally:  # past the deadline, or the router closing: stop what still runs
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                for attempt in attempts:
                    self.outcomes.settle(attempt, ended=time.monotonic())

        task = asyncio.get_running_loop().create_task(measure())
        self._measuring.add(task)
        task.add_done_callback(self._measuring.discard)

    def _settle_cancelled(
        self, race: InlineRace, candidates: list[Endpoint], kind: DecisionKind
    ) -> None:
        attempts = race.attempts
        self.outcomes.request_ended(kind=kind, hedged=len(attempts) > 1)
        for attempt in attempts:
            self.outcomes.settle(attempt)
        self._not_asked(candidates, attempts)

    def _not_asked(self, candidates: list[Endpoint], attempts: list[RaceAttempt]) -> None:
        """Give back the probe slot of each candidate allowed through its breaker but not
        asked."""
        tried = {id(a.endpoint) for a in attempts}
        for endpoint in candidates:
            if id(endpoint) not in tried:
                self.outcomes.not_asked(endpoint=endpoint)

    def _record_empty(
        self,
        kind: DecisionKind,
        reason: Reason,
        started: float,
        uri: str | None,
        failures: tuple[EndpointFailure, ...] = (),
    ) -> Routed:
        detail = "; ".join(str(f) for f in failures) or "no endpoint available"
        decision = self.outcomes.decision(
            kind=kind, served_by=None, reason=reason, started=started, uri=uri, detail=detail
        )
        return Routed("", None, reason, decision.latency_ms, 0, failures=failures)

    async def aclose(self) -> None:
        """Stop the explorations still running to their first token."""
        for task in list(self._measuring):
            task.cancel()
        await asyncio.gather(*self._measuring, return_exceptions=True)


def _as_is(endpoint: Endpoint) -> Endpoint:
    return endpoint


def _usable(model: LocalModel) -> bool:
    """A local model that is loaded; one not yet loaded starts loading and sits this one out."""
    if model.state is LocalState.READY:
        return True
    if model.state is LocalState.UNLOADED:
        model.start_loading()
    return False


def _awaitable(model: LocalModel) -> bool:
    """A local model that is loaded or on its way (loading starts now if it had not)."""
    model.start_loading()
    return model.state in (LocalState.READY, LocalState.LOADING)


def _routed(
    outcome: RaceOutcome,
    candidates: list[Endpoint],
    reasons: tuple[Reason, Reason | None],
    started: float,
    ended: float,
    asked_tokens: int | None = None,
) -> Routed:
    """What the caller of a race is told: the text, who answered and why, what failed, and
    the most tokens the answering endpoint was asked for (`asked_tokens` within its cap)."""
    winner = outcome.winner
    reason, rider_reason = reasons
    if winner is not None and winner.endpoint is not candidates[0]:
        primary_failed = any(
            a.endpoint is candidates[0] and a.error is not None for a in outcome.attempts
        )
        if primary_failed or not winner.hedge:
            reason = Reason.FALLBACK  # it answered because the primary could not
        elif rider_reason is not None and winner.endpoint is candidates[1]:
            reason = rider_reason
        else:
            reason = Reason.HEDGE_WIN
    if outcome.timed_out:
        reason = Reason.DEADLINE
    return Routed(
        outcome.text,
        winner.endpoint.name if winner is not None else None,
        reason,
        (ended - started) * 1000,
        winner.usage.completion_tokens if winner is not None else 0,
        outcome.timed_out,
        winner.usage if winner is not None else None,
        max_tokens=_answer_cap(winner, asked_tokens),
        failures=_failures(outcome.attempts),
    )


def _answer_cap(winner: RaceAttempt | None, asked_tokens: int | None) -> int | None:
    if winner is None or asked_tokens is None:
        return None
    config = winner.endpoint.config
    return min(asked_tokens, config.max_tokens) if config is not None else asked_tokens


def _failures(attempts: list[RaceAttempt]) -> tuple[EndpointFailure, ...]:
    return tuple(a.error.failure for a in attempts if a.error)
