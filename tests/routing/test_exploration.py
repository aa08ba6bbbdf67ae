"""Routing quality from the first keystroke, against real HTTP endpoints on 127.0.0.1: warm
connections, cold-start exploration, recovery after an outage, ranking by time to a usable
suggestion. Assertions count requests, not milliseconds."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from lsp_server.backends.base import CompletionRequest
from lsp_server.backends.factory import remote_backend
from lsp_server.config.model import Config, EndpointConfig, LocalConfig, RoutingConfig
from lsp_server.routing.circuit_breaker import BreakerState
from lsp_server.routing.router import Router
from tests.support.stand_in import no_local_model

TEXT = "return a + b\n"


def request(index: int) -> CompletionRequest:
    return CompletionRequest(prefix=f"# {index}\ndef add(a, b):\n    ", suffix="\n")


def make_router(*servers: tuple[str, FakeLLMServer], **routing: Any) -> Router:
    endpoints = tuple(
        EndpointConfig(name=name, kind="openai", base_url=server.base_url, model="fake-model")
        for name, server in servers
    )
    options: dict[str, Any] = {
        "inline_deadline_ms": 5000,
        "hedge_after_ms": 300,
        "offline": "never",
    } | routing
    config = Config(
        routing=RoutingConfig(**options), local=LocalConfig(enabled=False), endpoints=endpoints
    )

    # Seeded: which endpoint an exploration tries is a draw, and a test must repeat.
    return Router(
        config, remote_factory=remote_backend, local_factory=no_local_model, rng=random.Random(7)
    )


async def test_endpoints_are_connected_when_the_configuration_is_applied() -> None:
    with FakeLLMServer(Behaviour(text=TEXT), name="one") as one:
        router = make_router(("one", one))
        assert await one.wait_for_async(lambda s: s.model_list_requests == 1)
        assert one.requests == []  # nothing else: no user content
        await router.aclose()


async def test_offline_always_opens_no_connection() -> None:
    with FakeLLMServer(Behaviour(text=TEXT), name="one") as one:
        router = make_router(("one", one), offline="always")
        await asyncio.sleep(0.3)
        assert one.requests == [] and one.model_list_requests == 0
        await router.aclose()


async def test_cold_start_finds_the_fastest_endpoint_within_a_few_requests() -> None:
    with (
        FakeLLMServer(Behaviour(text=TEXT, latency_s=0.30), name="slow") as slow,
        FakeLLMServer(Behaviour(text=TEXT, latency_s=0.15), name="middle") as middle,
        FakeLLMServer(Behaviour(text=TEXT, latency_s=0.0), name="fast") as fast,
    ):
        # The fastest is configured last, and the hedge waits longer than the slow one needs.
        # The latencies are far apart, so a loaded machine's stalls do not reorder them.
        router = make_router(("slow", slow), ("middle", middle), ("fast", fast), hedge_after_ms=450)
        served = [(await router.inline(request(i))).endpoint for i in range(12)]
        assert "fast" in served[:4]
        assert served[4:] == ["fast"] * 8
        assert router.decisions.recent()[-1].reason == "fastest"
        await router.aclose()


async def test_traffic_returns_within_a_few_requests_after_an_outage() -> None:
    with (
        FakeLLMServer(Behaviour(text=TEXT, latency_s=0.0), name="best") as best,
        FakeLLMServer(Behaviour(text=TEXT, latency_s=0.06), name="spare") as spare,
    ):
        router = make_router(("best", best), ("spare", spare))
        for i in range(8):
            await router.inline(request(i))
        assert (await router.inline(request(8))).endpoint == "best"

        best.behaviour.fault = "status:503"
        during = [await router.inline(request(100 + i)) for i in range(25)]
        assert all(r.endpoint == "spare" and r.text == TEXT for r in during)  # nothing lost
        assert router.pool.remotes["best"].breaker.state is not BreakerState.CLOSED

        best.behaviour.fault = None
        after = [(await router.inline(request(200 + i))).endpoint for i in range(20)]
        back_at = after.index("best")
        assert back_at < 10, after
        assert after[back_at + 1 :] == ["best"] * (len(after) - back_at - 1)
        # mypy keeps `state` narrowed by the assert before the call that changed it.
        assert router.pool.remotes["best"].breaker.state is BreakerState.CLOSED  # type: ignore[comparison-overlap]
        await router.aclose()


async def test_ranking_counts_the_tokens_a_suggestion_needs_not_only_the_first() -> None:
    long_text = "x = 1\n" * 8
    with (
        # First token at once, then a slow stream; against a later first token, streamed fast.
        FakeLLMServer(
            Behaviour(text=long_text, chunk_chars=2, chunk_delay_s=0.03), name="dribbler"
        ) as dribbler,
        FakeLLMServer(
            Behaviour(text=long_text, chunk_chars=2, latency_s=0.08), name="steady"
        ) as steady,
    ):
        router = make_router(("dribbler", dribbler), ("steady", steady), hedge_after_ms=2000)
        served = [(await router.inline(request(i))).endpoint for i in range(10)]
        assert served[-4:] == ["steady"] * 4
        stats = router.pool.remotes["dribbler"].stats
        assert stats.first_token_ms.value is not None and stats.ms_per_token.value is not None
        assert stats.ms_per_token.value > 10
        await router.aclose()
