"""In-process stand-in backends and a router built on them, for routing policy tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any, NoReturn

from lsp_server.backends.base import (
    BackendError,
    ChatRequest,
    CompletionRequest,
    Usage,
)
from lsp_server.backends.local_model import LocalModel
from lsp_server.config.model import Config, EndpointConfig, LocalConfig, RoutingConfig
from lsp_server.failures import FailureKind
from lsp_server.permit import Permit
from lsp_server.routing.router import Router

REQUEST = CompletionRequest(prefix="def add(a, b):\n    ", suffix="\n\nprint(add(1, 2))\n")


def endpoint(name: str, base_url: str = "http://127.0.0.1:9/v1", **options: Any) -> EndpointConfig:
    return EndpointConfig(
        name=name, kind="openai", base_url=base_url, model="fake-model", **options
    )


def make_config(
    *endpoints: EndpointConfig,
    hedge_after_ms: int = 4000,
    deadline_ms: int = 5000,
    max_hedge_ratio: float = 0.2,
    local: bool = False,
) -> Config:
    routing = RoutingConfig(
        inline_deadline_ms=deadline_ms,
        hedge_after_ms=hedge_after_ms,
        max_hedge_ratio=max_hedge_ratio,
        offline="never",
    )
    return Config(routing=routing, local=LocalConfig(enabled=local), endpoints=endpoints)


class StandIn(LocalModel):
    """A backend that answers after `delay(request)` seconds, or fails with `failure`; with
    `is_local` it stands in for a local model that is always ready."""

    def __init__(
        self,
        name: str,
        calls: list[str],
        *,
        delay: Callable[[CompletionRequest], float] = lambda request: 0.0,
        failure: FailureKind | None = None,
        is_local: bool = False,
    ) -> None:
        self.name = name
        self.is_local = is_local
        self.calls = calls
        self.delay = delay
        self.failure = failure

    async def complete(
        self, request: CompletionRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        self.calls.append(self.name)
        await asyncio.sleep(self.delay(request))
        if self.failure is not None:
            raise BackendError(self.name, self.failure, "scripted failure")
        if usage is not None:
            usage.completion_tokens += 1
        yield f"{self.name}\n"

    async def chat(
        self, request: ChatRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        raise BackendError(self.name, FailureKind.UNAVAILABLE, "chat is not scripted")
        yield ""


def no_local_model(config: LocalConfig) -> NoReturn:
    """A `local_factory` for routers whose configuration disables the local model."""
    raise AssertionError("the local model is disabled here")


def stand_in_router(
    backends: list[StandIn], local: StandIn | None = None, **routing: Any
) -> Router:
    by_name = {b.name: b for b in backends}
    config = make_config(*(endpoint(b.name) for b in backends), local=local is not None, **routing)

    def local_factory(config: LocalConfig) -> LocalModel:
        assert local is not None
        return local

    return Router(config, remote_factory=lambda c: by_name[c.name], local_factory=local_factory)
