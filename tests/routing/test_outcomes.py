"""Every route tells the same outcome recorder the same things.

Each route (the inline race, the refactor's and the chat's sequential route, the Responses
pass-through) is driven through a success after an outage, a failure and, where it races, a lost
race; each must leave the same marks: statistics, the breaker (this process's and the shared
one), the offline monitor and the decision log.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from lsp_server.backends.base import (
    Backend,
    BackendError,
    ChatMessage,
    ChatRequest,
    CompletionRequest,
    Usage,
)
from lsp_server.chat.pass_through import _Tally
from lsp_server.config.model import Config, EndpointConfig, LocalConfig, RoutingConfig
from lsp_server.failures import FailureKind, RouteFailed
from lsp_server.permit import Permit
from lsp_server.reasons import Reason
from lsp_server.routing.circuit_breaker import BreakerState
from lsp_server.routing.decision_log import DecisionKind
from lsp_server.routing.router import Router
from tests.support.stand_in import no_local_model

pytestmark = pytest.mark.unit

COMPLETION = CompletionRequest(prefix="def add(a, b):\n    ", suffix="\n")
CHAT = ChatRequest(messages=(ChatMessage(role="user", content="hello"),), max_tokens=16)


class Scripted(Backend):
    """Answers both calls after `delay` seconds, or fails with `failure`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.delay = 0.0
        self.failure: FailureKind | None = None

    async def _answer(self, usage: Usage | None) -> AsyncIterator[str]:
        await asyncio.sleep(self.delay)
        if self.failure is not None:
            raise BackendError(self.name, self.failure, "scripted failure")
        if usage is not None:
            usage.completion_tokens += 1
        yield f"{self.name}\n"

    def complete(
        self, request: CompletionRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        return self._answer(usage)

    def chat(
        self, request: ChatRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        return self._answer(usage)


class SharedSpy:
    """Stands in for the state shared with peer gateways: what it was told, in order."""

    def __init__(self) -> None:
        self.told: list[tuple[str, str]] = []

    def __getattr__(self, name: str) -> Callable[..., None]:
        def tell(endpoint: str = "", *args: Any, **kwargs: Any) -> None:
            self.told.append((name, endpoint))

        return tell


def make_router(*names: str) -> tuple[Router, dict[str, Scripted], SharedSpy]:
    backends = {name: Scripted(name) for name in names}
    endpoints = tuple(
        EndpointConfig(
            name=name,
            kind="openai",
            base_url="http://127.0.0.1:9/v1",
            model="fake-model",
            roles=("inline", "refactor", "agent"),
            fim=False,
        )
        for name in names
    )
    routing = RoutingConfig(offline="auto", hedge_after_ms=30, inline_deadline_ms=5000)
    config = Config(routing=routing, local=LocalConfig(enabled=False), endpoints=endpoints)

    router = Router(config, remote_factory=lambda c: backends[c.name], local_factory=no_local_model)
    spy = SharedSpy()
    # A spy in the shared state's place: it has the calls the recorder makes, not its type.
    router.outcomes.shared = spy  # type: ignore[assignment]
    return router, backends, spy


async def inline(router: Router) -> None:
    await router.inline(COMPLETION)


async def refactor(router: Router) -> None:
    with contextlib.suppress(RouteFailed):
        await router.refactor(CHAT)


async def chat(router: Router) -> None:
    with contextlib.suppress(RouteFailed):
        await router.sequential.run(router.chats.plan("auto", CHAT, local_only=None), CHAT)


async def pass_through(router: Router) -> None:
    """The Responses pass-through's tally, fed as the gateway feeds it from the upstream."""
    endpoint = router.pool.remotes["solo"]
    tally = _Tally(router.outcomes, endpoint, Reason.PINNED, "")
    backend = endpoint.backend
    assert isinstance(backend, Scripted)
    if backend.failure is not None:
        tally.failed(BackendError("solo", backend.failure, "scripted failure"))
    else:
        tally.event()
        tally.answered({"usage": {"output_tokens": 1}})


ROUTES: dict[str, tuple[Callable[[Router], Awaitable[None]], DecisionKind]] = {
    "inline": (inline, DecisionKind.INLINE),
    "refactor": (refactor, DecisionKind.REFACTOR),
    "chat": (chat, DecisionKind.CHAT),
    "pass-through": (pass_through, DecisionKind.CHAT),
}


@pytest.mark.parametrize("route", ROUTES)
async def test_a_failure_then_a_success_leave_the_same_marks_on_every_route(route: str) -> None:
    drive, kind = ROUTES[route]
    router, backends, shared = make_router("solo")
    endpoint = router.pool.remotes["solo"]
    for failure in (FailureKind.SERVER, FailureKind.SERVER, FailureKind.NETWORK):
        backends["solo"].failure = failure  # three failures open the breaker
        await drive(router)
    assert endpoint.stats.errors == 3
    assert endpoint.breaker.state is BreakerState.OPEN
    assert endpoint.last_error == "scripted failure"
    assert router.offline.active  # the only remote looks unreachable
    assert ("observed_failure", "solo") in shared.told
    assert ("breaker_opened", "solo") in shared.told
    failed = router.decisions.recent()[-1]
    assert (failed.kind, failed.endpoint, failed.reason) == (kind, None, failed.reason)
    assert failed.detail and "scripted failure" in failed.detail

    router.offline.set_mode("never")  # let the route ask the endpoint again
    endpoint.breaker._open_until = 0.0  # its back-off is over: the next request probes it
    backends["solo"].failure = None
    shared.told.clear()
    await drive(router)
    # mypy keeps `state` narrowed by the assert before the call that changed it.
    assert endpoint.breaker.state is BreakerState.CLOSED  # type: ignore[comparison-overlap]
    assert endpoint.stats.error_rate.value == 0.0  # the outage is forgiven
    told = [said for said in shared.told if said[1] == "solo"]
    assert told == [("observed_success", "solo"), ("breaker_closed", "solo")]
    answered = router.decisions.recent()[-1]
    assert (answered.kind, answered.endpoint) == (kind, "solo")
    await router.aclose()


async def warm_first_tokens(router: Router, name: str, ms: float) -> None:
    stats = router.pool.remotes[name].stats
    for _ in range(12):
        stats.record_success(first_token_ms=ms, total_ms=ms, tokens=1, won=True)


@pytest.mark.parametrize("route", ["inline", "chat"])
async def test_a_lost_race_leaves_the_same_marks_on_every_racing_route(route: str) -> None:
    drive, kind = ROUTES[route]
    router, backends, shared = make_router("slow", "quick")
    await warm_first_tokens(router, "slow", 5.0)  # expected first, and a hedge after its p95
    await warm_first_tokens(router, "quick", 50.0)
    backends["slow"].delay = 2.0
    slow = router.pool.remotes["slow"]
    before = slow.stats.requests
    await drive(router)
    answered = router.decisions.recent()[-1]
    assert (answered.kind, answered.endpoint, answered.reason) == (kind, "quick", Reason.HEDGE_WIN)
    assert answered.hedged
    assert slow.stats.requests == before + 1 and slow.stats.errors == 0  # a bound, no error
    assert ("observed_censored", "slow") in shared.told
    assert slow.breaker.state is BreakerState.CLOSED
    await router.aclose()
