"""The routing policy shared by every front door (`docs/architecture.md`, routing rules).

Inline: sensitive or offline → local only, under the local budget (`local.deadline_ms`), a model
still loading waited for within it; otherwise the `inline` endpoints ranked by expected time to
a usable suggestion (`inline_choice`: time to first token plus streaming, inflated by the error
rate), endpoints with an open breaker skipped, the local model last unless it has proved
faster; exploration and probes ride beside the primary under the hedge budget. Refactor:
`refactor` endpoints in order of health (none configured: the `inline` endpoints' chat), then
the local model, under a longer deadline.

Statistics start warm: every remote endpoint is connected when the configuration is applied
(`warm_connections`), and with a `StatsFile` the estimates of earlier runs are read at start and
written back now and then and at close.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from lsp_server.after_answer import later as after_the_answer
from lsp_server.backends.base import (
    ChatEvent,
    ChatRequest,
    CompletionRequest,
    Usage,
)
from lsp_server.backends.local_model import LocalModel, LocalState
from lsp_server.config.loader import config_to_dict
from lsp_server.config.model import Config, OfflineMode, Role
from lsp_server.failures import EndpointFailure, RefusalCode, Refused
from lsp_server.reasons import Reason
from lsp_server.routing.answerers import Answerers, who_answers
from lsp_server.routing.chat_route import ChatRoute
from lsp_server.routing.circuit_breaker import BreakerState
from lsp_server.routing.decision_log import DecisionKind, DecisionLog
from lsp_server.routing.edit_outcomes import EditOutcomes
from lsp_server.routing.endpoint_pool import Endpoint, EndpointPool, LocalFactory, RemoteFactory
from lsp_server.routing.gate import Gate
from lsp_server.routing.hedge_budget import HedgeBudget
from lsp_server.routing.inline_choice import Choice, InlineChooser
from lsp_server.routing.inline_race import (
    Attempt,
    InlineRace,
    RaceOutcome,
    RaceRequest,
    TextCall,
    completion_race,
)
from lsp_server.routing.latency_stats import Ewma
from lsp_server.routing.offline_monitor import OfflineMonitor
from lsp_server.routing.outcomes import Outcomes
from lsp_server.routing.sequential_route import Answered, SequentialPlan, SequentialRoute, capped
from lsp_server.routing.shared_state import SharedState
from lsp_server.routing.stats_file import StatsFile
from lsp_server.routing.stats_snapshot import StatsSnapshot
from lsp_server.routing.warm_connections import WarmConnections

log = logging.getLogger(__name__)

SUGGESTION_TOKENS_PRIOR = 8.0  # tokens a suggestion needs, until winners have told us
SAVE_EVERY_S = 30.0  # how often measured estimates are written back to the stats file
ADAPTIVE_HEDGE_MIN_SAMPLES = 10  # first-token samples before the hedge delay adapts
ADAPTIVE_HEDGE_FLOOR_MS = 15.0  # never hedge sooner than this


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


class Router:
    def __init__(
        self,
        config: Config,
        *,
        remote_factory: RemoteFactory,
        local_factory: LocalFactory,
        stats_file: StatsFile | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """`rng` draws the exploration samples (tests seed it, so a run can be repeated)."""
        self.config = config
        self._config_seen = (config, config_to_dict(config))
        self.pool = EndpointPool(remote_factory, local_factory)
        self.pool.apply(config)
        self._stats_file = stats_file
        self._restored = stats_file.load() if stats_file is not None else StatsSnapshot({})
        self.pool.absorb(self._restored)
        self._saved_at = time.monotonic()
        self._saving: asyncio.Task[None] | None = None
        # The one door out (routing rule 1): it reads the offline mode at every call.
        self.gate = Gate(lambda: self.offline.mode)
        self.offline = OfflineMonitor(
            config.routing.offline, self._inline_remote_configs(), gate=self.gate
        )
        self.decisions = DecisionLog()
        self.budget = HedgeBudget()
        self.shared: SharedState | None = None
        self.outcomes = Outcomes(offline=self.offline, decisions=self.decisions, budget=self.budget)
        self.edit_outcomes = EditOutcomes()
        self._chooser = InlineChooser(rng)
        self._answer_tokens_by_role: dict[Role, Ewma] = {}  # what winners of a role wrote
        self._connections = WarmConnections()
        self._measuring: set[asyncio.Task[None]] = set()  # lost explorations, to their first token
        # Gateway chat and Responses traffic by task class: `chats.plan(...)`.
        self.chats = ChatRoute(self.pool, config=lambda: self.config, gate=self.gate)
        # Refactors and chats: endpoints asked in turn (`refactor`, `chats.plan(...)`).
        self.sequential = SequentialRoute(
            self.outcomes, self.gate, max_hedge_ratio=lambda: self.config.routing.max_hedge_ratio
        )
        self._warm_up()

    # -- configuration -----------------------------------------------------------------

    def reconfigure(self, config: Config) -> None:
        self.config = config
        self.pool.apply(config)
        self.pool.absorb(self._restored)
        self.offline.set_mode(config.routing.offline)
        self.offline.set_remotes(self._inline_remote_configs())
        self._warm_up()

    def share_state(self) -> SharedState:
        """Start telling a `SharedState` what this router observes, and hearing its peers'."""
        if self.shared is None:
            self.shared = SharedState(self.pool)
            self.budget.peers = self.shared
            self.outcomes.shared = self.shared
        return self.shared

    def set_offline(self, mode: OfflineMode) -> None:
        self.offline.set_mode(mode)
        self._warm_up()

    def _warm_up(self) -> None:
        """Connect the remote endpoints, and start loading the local model now when it will
        serve every keystroke (offline "always", or no remote inline endpoint), so the first
        keystroke finds it ready."""
        self._connect_endpoints()
        if self.answerers("inline").local_must_answer:
            self.start_local_model()

    def start_local_model(self) -> None:
        """Start loading the local model now if it is enabled: an editor that connects will
        need it for offline and sensitive work, and the load takes seconds."""
        if self.pool.local_model is not None:
            self.pool.local_model.start_loading()

    def _connect_endpoints(self) -> None:
        """Connect what the gate lets out: under offline "always", nothing."""
        self._connections.ensure(self.pool.remotes.values(), self.gate)

    async def connected(self, wait_s: float) -> None:
        """Wait, at most `wait_s`, for the endpoints' first connections (a server about to
        take traffic: its first requests then neither open them nor import what they use)."""
        await self._connections.opened(wait_s)

    def answerers(self, role: Role, stay_local: Reason | None = None) -> Answerers:
        """Who may serve a request of `role` now (`stay_local`: why what the request is about
        must stay here, as its route found; the gate adds the offline mode)."""
        return who_answers(
            self.pool, role, stay_local=self.gate.verdict(stay_local), offline=self.offline.active
        )

    def prefill_local(self, request: CompletionRequest, *, local_only: Reason | None) -> bool:
        """Have the local model evaluate `request`'s prompt ahead of time, when it is the
        model that will answer this document's keystrokes and is idle."""
        model = self.pool.local_model
        if model is None or not self.answerers("inline", local_only).local_must_answer:
            return False
        return model.prefill(request)

    def _inline_remote_configs(self) -> tuple[Any, ...]:
        return self.config.endpoints_with_role("inline")

    # -- inline ---------------------------------------------------------------------------

    async def inline(
        self,
        request: CompletionRequest,
        *,
        uri: str | None = None,
        local_only: Reason | None = None,
        pinned: str | None = None,
        on_text: Callable[[str], None] | None = None,
        on_attempt: Callable[[str], None] | None = None,
    ) -> Routed:
        """Route one keystroke-level request (see `race`)."""
        return await self.race(
            completion_race(request),
            uri=uri,
            local_only=local_only,
            pinned=pinned,
            on_text=on_text,
            on_attempt=on_attempt,
        )

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
            hedge_after_s=self._hedge_delay_ms(candidates[0]) / 1000,
            deadline_s=self._inline_deadline_ms(candidates, request.role) / 1000,
            may_hedge=self._budget(request.role).hedge_left(self.config.routing.max_hedge_ratio),
            parallel=parallel,
            measure_riders=choice.rider_reason == "explore",
            on_text=on_text,
            on_attempt=on_attempt,
        )
        outcome = await race.run()
        ended = time.monotonic()
        rider_reason = choice.rider_reason if parallel > 1 else None
        routed = _routed(outcome, candidates, (reason, rider_reason), started, ended)
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
        return self.outcomes.edit_budget if role == "edit" else self.budget

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
        healthy = [e for e in endpoints if e.breaker.state is BreakerState.CLOSED]
        tripped = [e for e in endpoints if e.breaker.state is not BreakerState.CLOSED]
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

    def _hedge_delay_ms(self, primary: Endpoint) -> float:
        """`hedge_after_ms`, or sooner when the primary's first token is usually much faster.

        Waiting out the full delay on a straggler is what makes the tail; hedging once the
        primary is slower than nineteen times in twenty bounds it, and leaves most of the hedge
        budget for the stragglers themselves (hedging at the p90 spent it on the ordinary tail).
        """
        configured = float(self.config.routing.hedge_after_ms)
        stats = primary.stats
        if len(stats.recent_first_token_ms) < ADAPTIVE_HEDGE_MIN_SAMPLES:
            return configured
        p95 = stats.first_token_percentile(0.95) or configured
        return min(configured, max(ADAPTIVE_HEDGE_FLOOR_MS, p95))

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
                self._record_attempt(attempt, won=attempt is outcome.winner, ended=ended)
        if outcome.measuring:
            self._measure_later(outcome.measuring, started)
        tried = {id(a.endpoint) for a in outcome.attempts}
        for endpoint in candidates:
            if id(endpoint) not in tried:
                self.outcomes.not_asked(endpoint=endpoint)
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

    def _measure_later(self, attempts: list[Attempt], started: float) -> None:
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
                    self._record_attempt(attempt, won=False, ended=time.monotonic())

        task = asyncio.get_running_loop().create_task(measure())
        self._measuring.add(task)
        task.add_done_callback(self._measuring.discard)

    def _record_attempt(self, attempt: Attempt, *, won: bool, ended: float) -> None:
        endpoint = attempt.endpoint
        elapsed_ms = ((attempt.finished_at or ended) - attempt.started_at) * 1000
        if attempt.error is not None:
            self.outcomes.failure(endpoint=endpoint, error=attempt.error, hedge=attempt.hedge)
        elif attempt.succeeded:
            self.outcomes.success(
                endpoint=endpoint,
                first_token_ms=_first_token_ms(attempt),
                total_ms=max(0.0, elapsed_ms - attempt.usage.setup_ms),
                tokens=attempt.usage.completion_tokens,
                won=won,
                hedge=attempt.hedge,
            )
        else:
            self.outcomes.lost_race(
                endpoint=endpoint,
                at_least_ms=max(0.0, elapsed_ms - attempt.usage.setup_ms),
                first_token_ms=_first_token_ms(attempt),
                hedge=attempt.hedge,
            )

    def record_cache_hit(self, endpoint: str | None, uri: str | None) -> None:
        self.outcomes.cache_hit(endpoint=endpoint, uri=uri)

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

    # -- refactor ---------------------------------------------------------------------------

    async def refactor(
        self,
        request: ChatRequest,
        *,
        uri: str | None = None,
        local_only: Reason | None = None,
        on_text: Callable[[str], None] | None = None,
        local_max_tokens: int | None = None,
    ) -> Answered:
        """Ask the reasoning endpoints in turn (then the local model) under the long deadline.

        `on_text` hears each streamed chunk (a failed attempt's text is dropped and the next
        endpoint starts from scratch). Each endpoint is asked for at most its own
        `max_tokens`, the local model for at most `local_max_tokens` (a cap the caller sizes
        to fit the deadline on a CPU). Raises `Refused` when nothing may be asked,
        `RouteFailed` when none answers.
        """
        candidates, reason = self._refactor_candidates(local_only)
        if not candidates:
            stays = self.gate.verdict(local_only)
            if stays is not None:
                message = (
                    f"this document must stay on this machine ({stays}) and the local "
                    "model is disabled ([local] enabled = false)"
                )
            else:
                message = "no refactor endpoint is configured and the local model is off"
            raise Refused(RefusalCode.NO_ENDPOINT_AVAILABLE, message)
        fim_fallback = reason is Reason.INLINE_FALLBACK

        def bounded(request: ChatRequest, endpoint: Endpoint) -> ChatRequest:
            config = endpoint.config
            return capped(request, config.max_tokens if config is not None else local_max_tokens)

        def requests_fault(endpoint: Endpoint, failure: EndpointFailure) -> bool:
            # A fill-in-the-middle model asked to chat may not: not its health.
            return failure.requests_fault or (fim_fallback and not endpoint.is_local)

        plan = SequentialPlan(
            kind=DecisionKind.REFACTOR,
            candidates=candidates,
            reason=reason,
            held=local_only,
            deadline_s=self.config.routing.refactor_deadline_ms / 1000,
            bounded=bounded,
            requests_fault=requests_fault,
            restart_after_passed_on=True,
        )

        def text_only(event: ChatEvent) -> None:
            if on_text is not None and isinstance(event, str):
                on_text(event)

        return await self.sequential.run(plan, request, uri=uri, on_event=text_only)

    def _refactor_candidates(self, local_only: Reason | None) -> tuple[list[Endpoint], Reason]:
        answerers = self.answerers("refactor", local_only)
        local = answerers.local
        if answerers.stay_local is not None:
            return ([local] if local is not None else []), answerers.stay_local
        remotes = list(answerers.remotes)
        if answerers.inline_fallback:
            # No reasoning endpoint: the inline endpoints' chat, then the local model.
            reason = Reason.INLINE_FALLBACK
        else:
            reason = Reason.CONFIGURED if remotes else Reason.FALLBACK
        healthy = [e for e in remotes if e.breaker.state is not BreakerState.OPEN]
        ordered = healthy + [e for e in remotes if e not in healthy]
        if local is not None:
            ordered.append(local)
        return ordered, reason

    # -- status -----------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        model = self.pool.local_model
        return {
            "offline": self.offline.mode,
            "offline_active": self.offline.active,
            "local": {
                "enabled": model is not None,
                "state": model.state.value if model is not None else LocalState.DISABLED.value,
                "model": str(model.model_path or "") if model is not None else "",
                "error": model.load_error if model is not None else None,
                "fim": model.fim_supported if model is not None else None,
                "next_edit": model.next_edit_supported if model is not None else None,
                **(model.details() if model is not None else {}),
            },
            "config": self._config_view(),
            "inline_requests": self.budget.inline_requests,
            "edit_requests": self.outcomes.edit_budget.inline_requests,
            "hedged_edit_requests": self.outcomes.edit_budget.hedged_requests,
            "hedged_requests": self.budget.hedged_requests,
            "chat_requests": self.outcomes.chat_requests,
            "hedged_chat_requests": self.outcomes.hedged_chat_requests,
            "shared_state": self.shared.status() if self.shared is not None else None,
            "endpoints": [
                {**_endpoint_status(e), "edit": self._edit_status(e)} for e in self.pool.all()
            ],
            "decisions": [d.to_json() for d in self.decisions.recent()],
        }

    def endpoint_health(self) -> list[tuple[str, str]]:
        """Each endpoint's name and health, as `status` gives them, without the rest of it (a
        metrics scrape reads only this)."""
        return [(e.name, _health(e)) for e in self.pool.all()]

    def _config_view(self) -> dict[str, Any]:
        """The configuration as the status shows it, made again only when the configuration
        is replaced (it is a frozen value); read, never changed, by whoever reads the status."""
        config, view = self._config_seen
        if config is not self.config:
            view = config_to_dict(self.config)
            self._config_seen = (self.config, view)
        return view

    def _edit_status(self, endpoint: Endpoint) -> dict[str, Any] | None:
        """Next-edit traffic of one endpoint: latency, and how often what it proposed was
        accepted or dismissed once shown."""
        if "edit" not in endpoint.roles:
            return None
        stats = endpoint.edit_stats
        return {
            "requests": stats.requests,
            "wins": stats.wins,
            "errors": stats.errors,
            "p50_ms": _round(stats.percentile(0.5)),
            "p95_ms": _round(stats.percentile(0.95)),
            "cost_usd": round(stats.cost_usd, 6),
            **self.edit_outcomes.status(endpoint.name),
        }

    def _save_now_and_then(self) -> None:
        """Write the estimates back every `SAVE_EVERY_S`, off the event loop."""
        if self._stats_file is None or time.monotonic() - self._saved_at < SAVE_EVERY_S:
            return
        if self._saving is not None and not self._saving.done():
            return
        self._saved_at = time.monotonic()
        snapshot = self.pool.snapshot()
        task = asyncio.get_running_loop().create_task(
            asyncio.to_thread(self._stats_file.save, snapshot)
        )
        self._saving = task

    async def aclose(self) -> None:
        for task in list(self._measuring):
            task.cancel()
        await asyncio.gather(*self._measuring, return_exceptions=True)
        await self._connections.aclose()
        if self._saving is not None:
            await asyncio.gather(self._saving, return_exceptions=True)
        if self._stats_file is not None:
            self._stats_file.save(self.pool.snapshot())
        await self.offline.aclose()
        await self.pool.aclose()


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


def _first_token_ms(attempt: Attempt) -> float | None:
    """Time to first token from when the request could be sent: connection set-up (TCP, TLS)
    is the network's cost, paid once per connection, not the model's latency."""
    if attempt.first_token_at is None:
        return None
    return max(0.0, (attempt.first_token_at - attempt.started_at) * 1000 - attempt.usage.setup_ms)


def _routed(
    outcome: RaceOutcome,
    candidates: list[Endpoint],
    reasons: tuple[Reason, Reason | None],
    started: float,
    ended: float,
) -> Routed:
    """What the caller of a race is told: the text, who answered and why, what failed."""
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
        failures=_failures(outcome.attempts),
    )


def _failures(attempts: list[Attempt]) -> tuple[EndpointFailure, ...]:
    return tuple(a.error.failure for a in attempts if a.error)


def _health(endpoint: Endpoint) -> str:
    """The breaker's state, or, while it is closed, whether errors are frequent."""
    state = endpoint.breaker.state
    if state is BreakerState.CLOSED:
        return "degraded" if (endpoint.stats.error_rate.value or 0.0) > 0.2 else "healthy"
    return state.value


def _endpoint_status(endpoint: Endpoint) -> dict[str, Any]:
    stats = endpoint.stats
    health = _health(endpoint)
    config = endpoint.config
    return {
        "name": endpoint.name,
        "kind": config.kind if config else "local",
        "model": config.model if config else "local",
        "roles": list(endpoint.roles),
        "health": health,
        "requests": stats.requests,
        "wins": stats.wins,
        "errors": stats.errors,
        "hedges": stats.hedges,
        "tokens": stats.tokens,
        "cost_usd": round(stats.cost_usd, 6),
        "p50_ms": _round(stats.percentile(0.5)),
        "p95_ms": _round(stats.percentile(0.95)),
        "ewma_ms": _round(stats.total_ms.value),
        "first_token_ewma_ms": _round(stats.first_token_ms.value),
        "first_token_estimate_ms": _round(math.exp(stats.ttft.mean) if stats.ttft.known else None),
        "error_rate": round(stats.error_rate.value or 0.0, 3),
        "retry_in_s": round(endpoint.breaker.retry_in_s, 1),
        "last_error": endpoint.last_error,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
