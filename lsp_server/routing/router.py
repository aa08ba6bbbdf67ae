"""The routing policy every front door shares (`docs/architecture.md`, routing rules): the
router's life cycle and its routes' entry points. The race of keystroke-level requests
(`race_route.py`) and the sequential route of refactors and chats (`sequential_route.py`,
planned by `refactor_plan.py` and `chat_route.py`) are peers over one outcome recorder and one
gate. Statistics start warm: endpoints the gate lets out are connected when the configuration
is applied, and a `StatsFile` carries estimates between runs (`stats_saver.py`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from lsp_server.backends.base import ChatEvent, ChatRequest, CompletionRequest
from lsp_server.config.model import Config, EndpointConfig, OfflineMode, Role
from lsp_server.reasons import Reason
from lsp_server.routing import status_view
from lsp_server.routing.answerers import Answerers, who_answers
from lsp_server.routing.chat_route import ChatRoute
from lsp_server.routing.decision_log import DecisionLog
from lsp_server.routing.endpoint_pool import EndpointPool, LocalFactory, RemoteFactory
from lsp_server.routing.gate import Gate
from lsp_server.routing.hedge_budget import HedgeBudget
from lsp_server.routing.inline_choice import InlineChooser
from lsp_server.routing.inline_race import TextCall, completion_race
from lsp_server.routing.offline_monitor import OfflineMonitor
from lsp_server.routing.outcomes import Outcomes
from lsp_server.routing.race_route import RaceRoute, Routed
from lsp_server.routing.refactor_plan import refactor_plan
from lsp_server.routing.sequential_route import Answered, SequentialRoute
from lsp_server.routing.shared_state import SharedState
from lsp_server.routing.stats_file import StatsFile
from lsp_server.routing.stats_saver import StatsSaver
from lsp_server.routing.warm_connections import WarmConnections


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
        self.pool = EndpointPool(remote_factory, local_factory)
        self.pool.apply(config)
        self._stats = StatsSaver(self.pool, stats_file)
        self.pool.absorb(self._stats.restored)
        # The one door out (routing rule 1): it reads the offline mode at every call.
        self.gate = Gate(lambda: self.offline.mode)
        self.offline = OfflineMonitor(
            config.routing.offline, self._inline_remote_configs(), gate=self.gate
        )
        self.decisions = DecisionLog()
        self.budget = HedgeBudget()
        self.shared: SharedState | None = None
        self.outcomes = Outcomes(offline=self.offline, decisions=self.decisions, budget=self.budget)
        self._connections = WarmConnections()
        self._config_view = status_view.ConfigView()
        # Keystroke-level requests: `inline`, `edit`, `race`.
        self.races = RaceRoute(
            config=lambda: self.config,
            pool=self.pool,
            outcomes=self.outcomes,
            gate=self.gate,
            answerers=self.answerers,
            connect=self._connect_endpoints,
            recorded=self._stats.now_and_then,
            chooser=InlineChooser(rng),
        )
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
        self.pool.absorb(self._stats.restored)
        self.offline.set_mode(config.routing.offline)
        self.offline.set_remotes(self._inline_remote_configs())
        self._warm_up()

    def share_state(self) -> SharedState:
        """Start telling a `SharedState` what this router observes, and hearing its peers'."""
        if self.shared is None:
            self.shared = SharedState(self.pool, self.outcomes)
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
        """Start loading the local model now if it is enabled (the load takes seconds)."""
        if self.pool.local_model is not None:
            self.pool.local_model.start_loading()

    def _connect_endpoints(self) -> None:
        """Connect what the gate lets out: under offline "always", nothing."""
        self._connections.ensure(self.pool.remotes.values(), self.gate)

    async def connected(self, wait_s: float) -> None:
        """Wait, at most `wait_s`, for the endpoints' first connections."""
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

    def _inline_remote_configs(self) -> tuple[EndpointConfig, ...]:
        return self.config.endpoints_with_role("inline")

    # -- the routes' entry points -----------------------------------------------------------

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
        """Route one keystroke-level request (see `RaceRoute.race`)."""
        return await self.races.race(
            completion_race(request),
            uri=uri,
            local_only=local_only,
            pinned=pinned,
            on_text=on_text,
            on_attempt=on_attempt,
        )

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
        """Route one next-edit prediction (see `RaceRoute.edit`)."""
        return await self.races.edit(
            call,
            prompt_chars=prompt_chars,
            answer_tokens=answer_tokens,
            uri=uri,
            local_only=local_only,
            pinned=pinned,
        )

    def record_cache_hit(self, endpoint: str | None, uri: str | None) -> None:
        self.outcomes.cache_hit(endpoint=endpoint, uri=uri)

    async def refactor(
        self,
        request: ChatRequest,
        *,
        uri: str | None = None,
        local_only: Reason | None = None,
        on_text: Callable[[str], None] | None = None,
        local_max_tokens: int | None = None,
    ) -> Answered:
        """Ask the reasoning endpoints in turn (then the local model) under the long deadline
        (`refactor_plan`).

        `on_text` hears each streamed chunk (a failed attempt's text is dropped and the next
        endpoint starts from scratch). Raises `Refused` or `RouteFailed`."""
        plan = refactor_plan(
            self.answerers("refactor", local_only),
            held=local_only,
            deadline_s=self.config.routing.refactor_deadline_ms / 1000,
            local_max_tokens=local_max_tokens,
        )

        def text_only(event: ChatEvent) -> None:
            if on_text is not None and isinstance(event, str):
                on_text(event)

        return await self.sequential.run(plan, request, uri=uri, on_event=text_only)

    # -- status and life cycle ----------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        outcomes = self.outcomes
        return {
            "offline": self.offline.mode,
            "offline_active": self.offline.active,
            "local": status_view.local_status(self.pool.local_model),
            "config": self._config_view.of(self.config),
            **status_view.request_counts(self.budget, outcomes.edit_budget, outcomes.chat_budget),
            "shared_state": self.shared.status() if self.shared is not None else None,
            "endpoints": [status_view.endpoint_status(e, outcomes) for e in self.pool.all()],
            "decisions": [d.to_json() for d in self.decisions.recent()],
        }

    def endpoint_health(self) -> list[tuple[str, str]]:
        """Each endpoint's name and health, for a metrics scrape."""
        return [(e.name, status_view.health(e)) for e in self.pool.all()]

    def suggestion_counts(self) -> list[tuple[str, str, int, int, int, int]]:
        """Per endpoint and kind, for a metrics scrape: `status_view.suggestion_counts`."""
        return status_view.suggestion_counts(
            self.pool.all(), self.outcomes.inline, self.outcomes.edits
        )

    async def aclose(self) -> None:
        await self.races.aclose()
        await self._connections.aclose()
        await self._stats.aclose()
        await self.offline.aclose()
        await self.pool.aclose()
