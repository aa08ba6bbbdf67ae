"""One attempt record, settled once, on every route (`routing/attempt.py`, `Outcomes.settle`).

A request cancelled while its endpoint is asked (a superseded keystroke, a chat whose client
went away, a pass-through whose reader stopped) still settles that attempt: one sample in the
endpoint's statistics, and a probe slot it held given back. And the same upstream, with the
same connection set-up and the same latency, gives the same time-to-first-token sample through
the race, the sequential route and the pass-through: set-up is the network's, not the model's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import pytest

from lsp_server.backends.base import Backend, ChatMessage, ChatRequest, CompletionRequest, Usage
from lsp_server.chat.pass_through import PassThrough
from lsp_server.chat.service import ChatService
from lsp_server.config.model import EndpointConfig
from lsp_server.permit import Permit
from lsp_server.privacy.guard import PrivacyGuard
from lsp_server.routing.circuit_breaker import BreakerState, CircuitBreaker
from lsp_server.routing.router import Router
from tests.support.stand_in import REQUEST, endpoint, make_config, no_local_model

pytestmark = pytest.mark.unit

CHAT = ChatRequest(messages=(ChatMessage("user", "hello"),), max_tokens=8)
SETUP_S = 0.3  # opening the connection
LATENCY_S = 0.05  # the model, to its first token


class Upstream(Backend):
    """An endpoint that opens a connection (`SETUP_S`, reported as set-up, as the HTTP
    backends report TCP and TLS), then answers after `LATENCY_S`; or, `hung`, never."""

    def __init__(self, name: str, *, hung: bool = False) -> None:
        self.name = name
        self.hung = hung

    async def _answer(self, usage: Usage | None) -> AsyncIterator[str]:
        await asyncio.sleep(SETUP_S)
        if usage is not None:
            usage.setup_ms += SETUP_S * 1000
        if self.hung:
            await asyncio.Event().wait()
        await asyncio.sleep(LATENCY_S)
        yield "answer\n"

    def complete(
        self, request: CompletionRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        return self._answer(usage)

    def chat(
        self, request: ChatRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        return self._answer(usage)


class ResponsesStandIn:
    """An endpoint's Responses API, with the same set-up and latency."""

    def __init__(self, *, hung: bool = False) -> None:
        self.hung = hung

    async def events(
        self, payload: dict[str, Any], *, permit: Permit, usage: Usage | None = None
    ) -> AsyncGenerator[dict[str, Any], None]:
        await asyncio.sleep(SETUP_S)
        if usage is not None:
            usage.setup_ms += SETUP_S * 1000
        await asyncio.sleep(LATENCY_S)
        yield {"type": "response.created"}
        if self.hung:
            await asyncio.Event().wait()
        yield {"type": "response.completed", "response": {"usage": {"output_tokens": 1}}}

    async def aclose(self) -> None:
        pass


def router_on(backend: Backend, **options: Any) -> Router:
    config = make_config(
        endpoint(backend.name, roles=("inline", "agent"), **options), hedge_after_ms=4000
    )
    return Router(config, remote_factory=lambda c: backend, local_factory=no_local_model)


def pass_through_on(router: Router, upstream: ResponsesStandIn) -> PassThrough:
    passing = PassThrough(ChatService(router, PrivacyGuard(lambda: router.config.routing)))
    config = router.pool.remotes["up"].config
    assert isinstance(config, EndpointConfig) and config.responses_path
    passing._upstreams["up"] = (config, upstream)  # type: ignore[assignment]
    return passing


def half_open(router: Router, name: str) -> CircuitBreaker:
    """The endpoint's breaker, opened by failures and past its back-off: one probe may go."""
    now = [0.0]
    breaker = CircuitBreaker(clock=lambda: now[0])
    for _ in range(3):
        breaker.record_failure()
    now[0] = 60.0
    assert breaker.state is BreakerState.HALF_OPEN
    router.pool.remotes[name].breaker = breaker
    return breaker


async def cancelled_after(task: asyncio.Task[Any], seconds: float) -> None:
    await asyncio.sleep(seconds)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancelled_inline_race_settles_one_outcome_and_gives_back_its_probe() -> None:
    router = router_on(Upstream("up", hung=True))
    breaker = half_open(router, "up")
    try:
        await cancelled_after(asyncio.create_task(router.inline(REQUEST)), SETUP_S + 0.1)
        assert router.pool.remotes["up"].stats.requests == 1
        assert breaker.allow()  # the probe slot is free again
    finally:
        await router.aclose()


async def test_a_cancelled_chat_settles_one_outcome() -> None:
    router = router_on(Upstream("up", hung=True))
    try:
        plan = router.chats.plan("auto", CHAT, local_only=None)
        chat = asyncio.create_task(router.sequential.run(plan, CHAT))
        await cancelled_after(chat, SETUP_S + 0.1)
        assert router.pool.remotes["up"].stats.requests == 1
        assert router.outcomes.chat_budget.inline_requests == 1
    finally:
        await router.aclose()


async def test_a_pass_through_cut_short_settles_one_outcome() -> None:
    router = router_on(Upstream("up"), responses_path="/responses")
    passing = pass_through_on(router, ResponsesStandIn(hung=True))
    try:
        started = passing.start({"input": "hi"}, CHAT, model="auto", uri="x", sensitive=False)
        assert started is not None
        assert (await anext(started.events))["type"] == "response.created"
        await started.events.aclose()  # the client went away
        assert router.pool.remotes["up"].stats.requests == 1
    finally:
        await router.aclose()


async def test_the_same_latency_gives_the_same_first_token_sample_on_every_route() -> None:
    samples: dict[str, float] = {}
    for route in ("race", "sequential", "pass-through"):
        router = router_on(Upstream("up"), responses_path="/responses")
        try:
            if route == "race":
                assert (await router.inline(REQUEST)).text
            elif route == "sequential":
                plan = router.chats.plan("auto", CHAT, local_only=None)
                assert (await router.sequential.run(plan, CHAT)).text
            else:
                passing = pass_through_on(router, ResponsesStandIn())
                started = passing.start(
                    {"input": "hi"}, CHAT, model="auto", uri="x", sensitive=False
                )
                assert started is not None
                assert [e["type"] async for e in started.events][-1] == "response.completed"
            await asyncio.sleep(0)  # the race settles once its answer is out
            (samples[route],) = router.pool.remotes["up"].stats.recent_first_token_ms
        finally:
            await router.aclose()
    for route, sample_ms in samples.items():
        assert LATENCY_S * 1000 * 0.8 <= sample_ms < SETUP_S * 1000, (route, samples)
