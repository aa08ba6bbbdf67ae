"""The application core, built once per process from the configuration.

It owns the router, the privacy guard, the completion cache, the context store (what the
server has seen of the workspace, for prompts) and the services that use them (inline
suggestions, next edits, refactors, chat). The
front doors (the LSP server, the gateway app, `gateway-ls complete`) hold one `Engine` and only
translate their wire format into its calls and back, so a capability added here reaches every
door at once (`docs/architecture.md`, "Layers").
"""

from __future__ import annotations

import asyncio
import random

from lsp_server.backends.factory import ProgressCallback, local_backend_factory, remote_backend
from lsp_server.chat.pass_through import PassThrough
from lsp_server.chat.service import ChatService
from lsp_server.config.model import Config, EndpointConfig
from lsp_server.context.store import ContextStore
from lsp_server.limits.limiter import Limiter
from lsp_server.nextedit.kept_rate import KEPT_WINDOW_S, KeptRate
from lsp_server.nextedit.service import NextEditService
from lsp_server.privacy.guard import PrivacyGuard
from lsp_server.refactor.service import RefactorService
from lsp_server.routing.endpoint_pool import LocalFactory, RemoteFactory
from lsp_server.routing.router import Router
from lsp_server.routing.stats_file import StatsFile
from lsp_server.suggest.cache import CompletionCache
from lsp_server.suggest.service import SuggestionService


class Engine:
    def __init__(
        self,
        config: Config,
        *,
        on_model_progress: ProgressCallback | None = None,
        stats_file: StatsFile | None = None,
        remote_factory: RemoteFactory = remote_backend,
        local_factory: LocalFactory | None = None,
        rng: random.Random | None = None,
        kept_window_s: float = KEPT_WINDOW_S,
    ) -> None:
        """`stats_file`: where latency estimates persist between runs (None: nowhere);
        the factories make the backends and `rng` draws the router's explorations (tests and
        benchmarks pass their own); `kept_window_s`: how long after an acceptance (a next
        edit's, an inline suggestion's) the kept rate is measured."""
        self.router = Router(
            config,
            remote_factory=remote_factory,
            local_factory=local_factory or local_backend_factory(on_model_progress),
            stats_file=stats_file,
            rng=rng,
        )
        self.privacy = PrivacyGuard(lambda: self.router.config.routing)
        self.cache = CompletionCache()
        self.context = ContextStore(
            self.privacy, enabled=lambda: self.router.config.routing.context
        )
        # The user's edits are followed once, by the next edits' history: the kept rate of
        # inline suggestions reads it too.
        self.next_edits = NextEditService(
            self.router, self.privacy, self.context, kept_window_s=kept_window_s
        )
        self.inline_kept = KeptRate(
            self.next_edits.history, self.router.outcomes.inline_kept, window_s=kept_window_s
        )
        self.suggestions = SuggestionService(
            self.router,
            self.privacy,
            self.cache,
            self.context,
            on_accepted=self.inline_kept.accepted,
        )
        self.refactors = RefactorService(self.router, self.privacy)
        self.chats = ChatService(self.router, self.privacy)
        self.pass_through = PassThrough(self.chats)
        # Gateway clients' limits; counted in this process until the gateway shares them.
        self.limits = Limiter(lambda: self.router.config, self._may_answer)

    @classmethod
    def for_process(
        cls, config: Config, *, on_model_progress: ProgressCallback | None = None
    ) -> Engine:
        """The engine of a running command: real backends, statistics kept in the user's
        state dir between runs."""
        return cls(config, on_model_progress=on_model_progress, stats_file=StatsFile())

    def _may_answer(self, task_class: str, model: str) -> list[EndpointConfig]:
        """The remote endpoints a gateway request of `task_class` naming `model` may be asked
        of: a keystroke's or a next edit's, those of that role (or the endpoint of that role it
        names); a chat's, those its route plans for the model."""
        pool = self.router.pool
        if task_class in ("inline", "edit"):
            named = pool.get(model)
            if named is not None and not named.is_local and task_class in named.roles:
                chosen = [named]
            else:
                chosen = [e for e in pool.all() if not e.is_local and task_class in e.roles]
        else:
            chosen = self.router.chats.may_answer(model)
        return [e.config for e in chosen if e.config is not None]

    @property
    def config(self) -> Config:
        return self.router.config

    def reconfigure(self, config: Config) -> None:
        """Apply a new configuration (a reloaded file, editor settings): the endpoints that
        stay keep their statistics; the cache is kept, as its entries name their endpoint."""
        self.router.reconfigure(config)
        self.context.reconfigure()

    def start_local_model(self) -> None:
        """Start loading the local model if it is enabled (an editor connected: offline and
        sensitive work may come with the first keystroke)."""
        self.router.start_local_model()

    def prepare_keystrokes(self) -> None:
        """Do now, on any thread, what the first keystroke would otherwise do once on the
        event loop (rules compiled, caches filled): a server does it before its first."""
        self.suggestions.prepare()

    async def warm_up(self, wait_s: float) -> None:
        """Before a server takes traffic: the endpoints' first connections open, the shared
        limits' state answers once (its scripts loaded, its connections open) and what a first
        suggestion does once is done, so the first requests pay for none of it. Bounded by
        `wait_s`: what is unreachable then is left for the requests to meet."""
        await asyncio.gather(
            self.router.connected(wait_s),
            self.limits.ready(wait_s),
            asyncio.to_thread(self.prepare_keystrokes),
        )

    async def aclose(self) -> None:
        self.next_edits.close()
        await self.limits.aclose()
        await self.pass_through.aclose()
        await self.context.aclose()
        await self.router.aclose()
