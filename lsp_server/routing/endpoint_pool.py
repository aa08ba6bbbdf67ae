"""The live set of endpoints: a backend, its statistics and its breaker, per configured name.

A hot-reloaded configuration keeps the statistics of endpoints that stay; a changed endpoint
gets a new backend, and keeps its history unless it is another endpoint now (a new URL or
model). `snapshot()` and `absorb()` carry the latency estimates out of and into the pool, keyed
by that identity (`stats_snapshot`), for the state file and for sharing between processes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from lsp_server.backends.base import Backend
from lsp_server.backends.local_model import LocalModel
from lsp_server.config.model import Config, EndpointConfig, LocalConfig, Price
from lsp_server.config.model_names import LOCAL
from lsp_server.routing.circuit_breaker import BreakerState, CircuitBreaker
from lsp_server.routing.latency_stats import EndpointStats
from lsp_server.routing.stats_snapshot import StatsSnapshot, endpoint_key

# A persisted estimate counts half as much for every day it has not been refreshed.
RESTORE_HALF_LIFE_S = 86_400.0

log = logging.getLogger(__name__)


RemoteFactory = Callable[[EndpointConfig], Backend]
LocalFactory = Callable[[LocalConfig], LocalModel]


@dataclass(slots=True)
class Endpoint:
    name: str
    backend: Backend
    config: EndpointConfig | None  # None for the local model
    stats: EndpointStats = field(default_factory=EndpointStats)
    breaker: CircuitBreaker = field(default_factory=CircuitBreaker)
    last_error: str | None = None
    # Next-edit traffic is measured apart: an edit answer is a whole region, a keystroke's a
    # few tokens, and one estimate for both would rank neither well.
    edit_stats: EndpointStats = field(default_factory=EndpointStats)
    edit_view: bool = False  # this is `for_edits()` of a pool endpoint

    def for_edits(self) -> Endpoint:
        """This endpoint as next-edit routing sees it: its edit statistics, the same backend
        and breaker."""
        return dataclasses.replace(self, stats=self.edit_stats, edit_view=True)

    @property
    def is_local(self) -> bool:
        return self.config is None

    @property
    def roles(self) -> tuple[str, ...]:
        """The configured roles; the local model serves every role."""
        return self.config.roles if self.config is not None else ("inline", "edit", "refactor")

    @property
    def key(self) -> str | None:
        """The identity under which its estimates are kept; the local model has none."""
        if self.config is None:
            return None
        return endpoint_key(self.config.name, self.config.base_url, self.config.model)

    @property
    def price(self) -> Price:
        return self.config.price_per_mtok if self.config else Price()


def healthy_first(endpoints: list[Endpoint]) -> tuple[list[Endpoint], list[Endpoint]]:
    """The endpoints whose breaker is closed, and those whose breaker is open or probing (a
    last resort), each in the order given: the one split every route ranks within."""
    healthy = [e for e in endpoints if e.breaker.state is BreakerState.CLOSED]
    return healthy, [e for e in endpoints if e.breaker.state is not BreakerState.CLOSED]


class EndpointPool:
    def __init__(self, remote_factory: RemoteFactory, local_factory: LocalFactory) -> None:
        self._remote_factory = remote_factory
        self._local_factory = local_factory
        self.remotes: dict[str, Endpoint] = {}
        self.local: Endpoint | None = None
        self.local_model: LocalModel | None = None  # the local endpoint's backend, typed
        self._local_config: LocalConfig | None = None
        self._closing: set[asyncio.Task[None]] = set()

    def apply(self, config: Config) -> None:
        fresh: dict[str, Endpoint] = {}
        for endpoint_config in config.endpoints:
            old = self.remotes.get(endpoint_config.name)
            if old is not None and old.config == endpoint_config:
                fresh[old.name] = old
                continue
            backend = self._remote_factory(endpoint_config)
            if old is None:
                fresh[endpoint_config.name] = Endpoint(
                    endpoint_config.name, backend, endpoint_config
                )
            else:
                self._close_later(old.backend)
                if _identity(old.config) != _identity(endpoint_config):
                    old.stats = EndpointStats()  # another server or model: measure it afresh
                old.backend, old.config = backend, endpoint_config
                fresh[old.name] = old
        for name, gone in self.remotes.items():
            if name not in fresh:
                self._close_later(gone.backend)
        self.remotes = fresh
        self._apply_local(config.local)

    def _apply_local(self, local: LocalConfig) -> None:
        if self._local_config == local and self.local is not None:
            return
        previous = self.local
        self._local_config = local
        if not local.enabled:
            self.local = self.local_model = None
        else:
            self.local_model = self._local_factory(local)
            self.local = Endpoint(LOCAL, self.local_model, None)
            if previous is not None:
                self.local.stats = previous.stats
        if previous is not None:
            self._close_later(previous.backend)

    def snapshot(self) -> StatsSnapshot:
        """The latency estimates of the remote endpoints measured so far."""
        estimates = {}
        for endpoint in self.remotes.values():
            estimate = endpoint.stats.estimate()
            if estimate is not None and endpoint.key is not None:
                estimates[endpoint.key] = estimate
        return StatsSnapshot(estimates)

    def absorb(self, snapshot: StatsSnapshot) -> None:
        """Start endpoints with little data of their own from estimates made elsewhere."""
        now = time.time()
        for endpoint in self.remotes.values():
            estimate = snapshot.endpoints.get(endpoint.key or "")
            if estimate is not None:
                endpoint.stats.restore(estimate.aged(now, RESTORE_HALF_LIFE_S))

    def all(self) -> list[Endpoint]:
        endpoints = list(self.remotes.values())
        if self.local is not None:
            endpoints.append(self.local)
        return endpoints

    def adopt_edit_view(self, view: Endpoint) -> None:
        """Carry what an edit race learnt on a view (`for_edits`) back to the endpoint."""
        endpoint = self.get(view.name)
        if endpoint is not None and endpoint.backend is view.backend:
            endpoint.last_error = view.last_error

    def get(self, name: str) -> Endpoint | None:
        if name == LOCAL:
            return self.local
        return self.remotes.get(name)

    async def aclose(self) -> None:
        for endpoint in self.all():
            await endpoint.backend.aclose()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    def _close_later(self, backend: Backend) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop yet: nothing was opened
        task = loop.create_task(backend.aclose())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)


def _identity(config: EndpointConfig | None) -> tuple[str, str, str] | None:
    return None if config is None else (config.name, config.base_url, config.model)
