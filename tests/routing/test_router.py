"""The router: ranking, exploration, hedging, breakers, deadlines and the decision log.

Policy edge cases run against small in-process backends; everything about the wire (hedging a
hung endpoint, 500s, 429 with Retry-After, deadlines, cancellation) runs against real
`FakeLLMServer`s on 127.0.0.1 through the real OpenAI-compatible backend.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from typing import Any

import pytest

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from lsp_server.backends.base import (
    CompletionRequest,
)
from lsp_server.backends.factory import remote_backend
from lsp_server.config.model import Config, Price
from lsp_server.failures import FailureKind
from lsp_server.routing.circuit_breaker import BreakerState
from lsp_server.routing.decision_log import estimate_cost
from lsp_server.routing.hedge_budget import HEDGE_BURST
from lsp_server.routing.inline_choice import InlineChooser
from lsp_server.routing.router import Router
from tests.support.stand_in import (
    REQUEST,
    StandIn,
    endpoint,
    make_config,
    no_local_model,
    stand_in_router,
)

TEXT = "return a + b\n"


# --- building routers ------------------------------------------------------------------------


def loopback_router(config: Config) -> Router:
    """A router on real HTTP endpoints; its exploration draws are seeded, so a run repeats."""
    return Router(
        config, remote_factory=remote_backend, local_factory=no_local_model, rng=random.Random(7)
    )


def served_by(router: Router, name: str) -> dict[str, Any]:
    return next(e for e in router.status()["endpoints"] if e["name"] == name)


# --- in-process stand-ins ----------------------------------------------------------------------


# --- policy ---------------------------------------------------------------------------------


async def test_a_pinned_request_does_not_hold_another_endpoints_probe() -> None:
    calls: list[str] = []
    flaky = StandIn("flaky", calls, failure=FailureKind.SERVER)
    steady = StandIn("steady", calls)
    router = stand_in_router([flaky, steady])
    for _ in range(3):  # three failures open the flaky endpoint's breaker
        await router.inline(REQUEST, pinned="flaky")
    breaker = router.pool.remotes["flaky"].breaker
    breaker._open_until = 0.0  # its back-off is over: it may be probed once
    await router.inline(REQUEST, pinned="steady")
    flaky.failure = None
    calls.clear()
    await router.inline(REQUEST)
    assert "flaky" in calls  # the probe slot was still free: it rode beside the request
    assert breaker.state is BreakerState.CLOSED
    await router.aclose()


async def test_cold_start_follows_the_configured_order_with_the_local_model_last() -> None:
    calls: list[str] = []
    remotes = [StandIn(n, calls, failure=FailureKind.SERVER) for n in ("first", "second", "third")]
    local = StandIn("local", calls, is_local=True)
    router = stand_in_router(remotes, local)
    routed = await router.inline(REQUEST)
    assert calls == ["first", "second", "third", "local"]
    assert routed.endpoint == "local" and routed.reason == "fallback"
    await router.aclose()


async def test_ranking_follows_expected_latency_inflated_by_error_rate() -> None:
    calls: list[str] = []
    router = stand_in_router([StandIn(n, calls) for n in ("flaky", "steady", "slow")])
    stats = {name: router.pool.remotes[name].stats for name in ("flaky", "steady", "slow")}
    for _ in range(20):
        stats["steady"].record_success(first_token_ms=None, total_ms=200.0, tokens=1, won=True)
        stats["slow"].record_success(first_token_ms=None, total_ms=900.0, tokens=1, won=True)
    for index in range(20):
        if index % 4:
            stats["flaky"].record_failure()
        else:
            stats["flaky"].record_success(first_token_ms=None, total_ms=100.0, tokens=1, won=True)
    routed = await router.inline(REQUEST)
    assert calls == ["steady"] and routed.reason == "fastest"

    for _ in range(30):  # the flaky one recovers: its lower latency wins again
        stats["flaky"].record_success(first_token_ms=None, total_ms=100.0, tokens=1, won=True)
        # (the stand-in answered the request above at once; keep "steady" at its 200 ms)
        stats["steady"].record_success(first_token_ms=None, total_ms=200.0, tokens=1, won=True)
    calls.clear()
    await router.inline(REQUEST)
    assert calls == ["flaky"]
    await router.aclose()


async def test_the_hedge_budget_bounds_hedges_to_the_configured_ratio() -> None:
    calls: list[str] = []
    asked: list[CompletionRequest] = []  # kept alive, so their ids stay unique

    def slow_if_first(request: CompletionRequest) -> float:
        """Whichever endpoint a request asks first is slow, the hedge is instant."""
        if any(r is request for r in asked):
            return 0.0
        asked.append(request)
        return 0.04

    backends = [StandIn(n, calls, delay=slow_if_first) for n in ("a", "b")]
    ratio, total = 0.3, 60
    router = stand_in_router(backends, hedge_after_ms=5, max_hedge_ratio=ratio)
    for _ in range(total):
        request = CompletionRequest(prefix=REQUEST.prefix, suffix=REQUEST.suffix)
        await router.inline(request)
    allowance = ratio * total + HEDGE_BURST
    assert router.budget.hedged_requests <= allowance + 1
    assert router.budget.hedged_requests >= ratio * total * 0.8
    assert router.status()["hedged_requests"] == router.budget.hedged_requests
    await router.aclose()


class ScriptedDraws(random.Random):
    """Thompson draws that come out as scripted latencies (ms), in the order they are drawn."""

    def __init__(self, latencies_ms: list[float]) -> None:
        super().__init__(0)
        self._latencies = list(latencies_ms)

    def gauss(self, mu: float = 0.0, sigma: float = 1.0) -> float:
        return math.log(self._latencies.pop(0))


async def test_a_straggler_is_hedged_to_the_best_ranked_backup_not_to_a_draw() -> None:
    calls: list[str] = []
    backends = [
        StandIn("fast", calls, delay=lambda request: 0.5),  # this request straggles
        StandIn("mid", calls),
        StandIn("slow", calls, delay=lambda request: 0.3),
    ]
    router = stand_in_router(backends, hedge_after_ms=20)
    for name, ms in (("fast", 20.0), ("mid", 40.0), ("slow", 400.0)):
        for _ in range(20):
            router.pool.remotes[name].stats.record_success(
                first_token_ms=None, total_ms=ms, tokens=1, won=True
            )
    # The draws favour "slow" over "mid", but not over the primary: no exploration.
    router.races._chooser = InlineChooser(rng=ScriptedDraws([900.0, 50.0, 10.0]))
    routed = await router.inline(REQUEST)
    assert calls == ["fast", "mid"]
    assert (routed.endpoint, routed.reason) == ("mid", "hedge-win")
    await router.aclose()


async def test_a_rider_does_not_stand_in_for_the_hedge_against_a_straggling_primary() -> None:
    calls: list[str] = []
    backends = [
        StandIn("first", calls, delay=lambda request: 0.5),
        StandIn("second", calls, delay=lambda request: 0.5),  # rides along: not measured yet
        StandIn("third", calls),
    ]
    router = stand_in_router(backends, hedge_after_ms=20)
    routed = await router.inline(REQUEST)
    assert calls == ["first", "second", "third"]
    assert routed.endpoint == "third"
    await router.aclose()


async def test_a_lost_exploration_runs_on_to_its_first_token_and_is_measured() -> None:
    calls: list[str] = []
    slow = StandIn("slow", calls, delay=lambda request: 0.1)
    router = stand_in_router([StandIn("fast", calls), slow])
    routed = await router.inline(REQUEST)  # "slow" is not measured yet: it rides along
    assert (routed.endpoint, calls) == ("fast", ["fast", "slow"])
    stats = router.pool.remotes["slow"].stats
    for _ in range(100):
        if stats.measured:
            break
        await asyncio.sleep(0.02)
    # A whole time to first token, not a lower bound at the winner's time.
    assert stats.measured and math.exp(stats.ttft.mean) >= 90.0
    assert stats.requests == 1 and stats.wins == 0
    await router.aclose()


async def test_closing_the_router_stops_explorations_still_running() -> None:
    calls: list[str] = []
    hung = StandIn("hung", calls, delay=lambda request: 60.0)
    router = stand_in_router([StandIn("fast", calls), hung])
    assert (await router.inline(REQUEST)).endpoint == "fast"
    await asyncio.wait_for(router.aclose(), 5)
    assert router.pool.remotes["hung"].stats.requests == 1  # recorded as abandoned


# --- real endpoints on loopback ----------------------------------------------------------------


async def served_names(router: Router, count: int) -> list[str | None]:
    return [(await router.inline(REQUEST)).endpoint for _ in range(count)]


async def converge(router: Router, name: str, *, within: int, run: int = 8) -> bool:
    """Does traffic settle on `name`: `run` answers in a row from it within `within` requests?"""
    streak = 0
    for _ in range(within):
        routed = await router.inline(REQUEST)
        streak = streak + 1 if routed.endpoint == name else 0
        if streak >= run:
            return True
    return False


async def test_traffic_moves_to_the_fastest_endpoint_and_follows_changes() -> None:
    with (
        FakeLLMServer(Behaviour(text=TEXT, latency_s=0.30), name="a") as a,
        FakeLLMServer(Behaviour(text=TEXT, latency_s=0.15), name="b") as b,
        FakeLLMServer(Behaviour(text=TEXT, latency_s=0.01), name="c") as c,
    ):
        router = loopback_router(
            make_config(
                endpoint("a", a.base_url),
                endpoint("b", b.base_url),
                endpoint("c", c.base_url),
                hedge_after_ms=100,
            )
        )
        assert await converge(router, "c", within=40)
        fastest = [d for d in router.decisions.recent() if d.endpoint == "c"]
        assert fastest[-1].reason == "fastest"

        # A change is followed within a bounded number of requests; the bound leaves room for
        # a loaded machine, whose stalls make some explorations lose.
        c.behaviour.latency_s, a.behaviour.latency_s = 0.30, 0.01
        assert await converge(router, "a", within=150)

        a.behaviour.latency_s, c.behaviour.latency_s = 0.30, 0.01
        assert await converge(router, "c", within=150)
        await router.aclose()


async def test_a_hung_endpoint_is_hedged_and_the_hung_request_cancelled() -> None:
    hung_behaviour = Behaviour(text=TEXT, fault="hang_before_headers")
    with (
        FakeLLMServer(hung_behaviour, name="hung") as hung,
        FakeLLMServer(Behaviour(text=TEXT), name="spare") as spare,
    ):
        router = loopback_router(
            make_config(
                endpoint("hung", hung.base_url),
                endpoint("spare", spare.base_url),
                hedge_after_ms=100,
                deadline_ms=5000,
            )
        )
        started = time.monotonic()
        routed = await router.inline(REQUEST)
        elapsed = time.monotonic() - started
        assert routed.text == TEXT and routed.endpoint == "spare"
        assert routed.reason in ("hedge-win", "explore")  # explore: it rode along from the start
        assert elapsed < 4.0  # the hedge answered, not the deadline
        assert router.budget.hedged_requests == 1
        assert len(spare.requests) == 1
        assert await hung.wait_for_async(lambda s: s.disconnects >= 1)
        decision = router.decisions.recent()[-1]
        assert decision.hedged and decision.endpoint == "spare"
        assert served_by(router, "spare")["hedges"] == 1
        assert served_by(router, "hung")["requests"] == 1  # a censored sample
        await router.aclose()


async def test_server_errors_open_the_breaker_and_traffic_goes_elsewhere() -> None:
    with (
        FakeLLMServer(Behaviour(text=TEXT), name="bad") as bad,
        FakeLLMServer(Behaviour(text=TEXT, latency_s=0.03), name="good") as good,
    ):
        router = loopback_router(
            make_config(endpoint("bad", bad.base_url), endpoint("good", good.base_url))
        )
        await served_names(router, 4)  # both measured: bad is the faster one
        assert (await router.inline(REQUEST)).endpoint == "bad"

        bad.behaviour.fault = "status:500"
        failing = [await router.inline(REQUEST) for _ in range(3)]
        assert [r.endpoint for r in failing] == ["good"] * 3
        assert all(r.reason in ("fallback", "explore") and r.text == TEXT for r in failing)
        assert "bad: server" in (router.decisions.recent()[-1].detail or "")
        status = served_by(router, "bad")
        assert status["health"] == "open" and status["errors"] == 3
        assert dict(router.endpoint_health()) == {"bad": "open", "good": "healthy"}
        assert "HTTP 500" in (status["last_error"] or "")

        asked = len(bad.requests)
        after = [await router.inline(REQUEST) for _ in range(6)]
        assert [r.endpoint for r in after] == ["good"] * 6
        assert {r.reason for r in after} == {"breaker-open"}
        # No keystroke waits on the open circuit; a probe rides beside one now and then.
        assert len(bad.requests) - asked <= 2
        assert served_by(router, "bad")["health"] == "open"
        await router.aclose()


async def test_retry_after_keeps_an_endpoint_out_until_it_passes_then_probes_it() -> None:
    with (
        FakeLLMServer(Behaviour(text=TEXT), name="limited") as limited,
        FakeLLMServer(Behaviour(text=TEXT, latency_s=0.03), name="other") as other,
    ):
        router = loopback_router(
            make_config(endpoint("limited", limited.base_url), endpoint("other", other.base_url))
        )
        await served_names(router, 4)
        assert (await router.inline(REQUEST)).endpoint == "limited"

        limited.behaviour.fault, limited.behaviour.retry_after = "status:429", "2"
        limited_at = time.monotonic()
        routed = await router.inline(REQUEST)
        assert routed.endpoint == "other"
        limited.behaviour.fault = None  # it would answer now, but it asked for two seconds
        asked = len(limited.requests)
        status = served_by(router, "limited")
        assert status["health"] == "open" and 0 < status["retry_in_s"] <= 2.0

        while time.monotonic() - limited_at < 1.5:
            assert (await router.inline(REQUEST)).endpoint == "other"
        assert len(limited.requests) == asked

        await asyncio.sleep(max(0.0, limited_at + 2.2 - time.monotonic()))
        assert served_by(router, "limited")["health"] == "half_open"
        assert (await router.inline(REQUEST)).endpoint == "limited"  # the probe
        assert served_by(router, "limited")["health"] in ("healthy", "degraded")
        assert len(limited.requests) == asked + 1
        await router.aclose()


async def test_past_the_deadline_nothing_late_is_returned() -> None:
    with (
        FakeLLMServer(Behaviour(text=TEXT, latency_s=5), name="slow1") as slow1,
        FakeLLMServer(Behaviour(text=TEXT, latency_s=5), name="slow2") as slow2,
    ):
        router = loopback_router(
            make_config(
                endpoint("slow1", slow1.base_url),
                endpoint("slow2", slow2.base_url),
                hedge_after_ms=100,
                deadline_ms=400,
            )
        )
        started = time.monotonic()
        routed = await router.inline(REQUEST)
        elapsed = time.monotonic() - started
        assert elapsed < 0.4 + 1.5
        assert routed.text == "" and routed.endpoint is None
        assert routed.timed_out and routed.reason == "deadline"
        assert await slow1.wait_for_async(lambda s: s.disconnects >= 1)
        assert await slow2.wait_for_async(lambda s: s.disconnects >= 1)
        decision = router.decisions.recent()[-1]
        assert decision.reason == "deadline" and decision.endpoint is None and decision.hedged
        await router.aclose()


async def test_a_lone_endpoint_past_the_deadline_is_cut_off() -> None:
    """With nothing to hedge with, the one attempt runs without a race loop: the deadline
    still ends it, and its stream is closed."""
    with FakeLLMServer(Behaviour(text=TEXT, latency_s=5), name="slow") as slow:
        router = loopback_router(
            make_config(endpoint("slow", slow.base_url), hedge_after_ms=100, deadline_ms=400)
        )
        started = time.monotonic()
        routed = await router.inline(REQUEST)
        assert time.monotonic() - started < 0.4 + 1.5
        assert (routed.text, routed.endpoint, routed.timed_out) == ("", None, True)
        assert routed.reason == "deadline"
        assert await slow.wait_for_async(lambda s: s.disconnects >= 1)
        assert router.decisions.recent()[-1].reason == "deadline"
        await router.aclose()


async def test_a_partial_answer_at_the_deadline_is_cut_to_whole_words() -> None:
    drip = Behaviour(text="alpha beta gamma delta epsilon\n", chunk_chars=3, chunk_delay_s=0.1)
    with FakeLLMServer(drip, name="drip") as dripping:
        router = loopback_router(
            make_config(endpoint("drip", dripping.base_url), hedge_after_ms=100, deadline_ms=700)
        )
        routed = await router.inline(REQUEST)
        assert routed.timed_out and routed.reason == "deadline"
        full = "alpha beta gamma delta epsilon\n"
        assert routed.text != full and full.startswith(routed.text)
        assert routed.text == "" or full[len(routed.text)] == " "
        await router.aclose()


async def test_decisions_record_tokens_and_cost_from_the_price() -> None:
    price = Price(input=3000.0, output=15000.0)
    with FakeLLMServer(Behaviour(text=TEXT), name="priced") as priced:
        router = loopback_router(
            make_config(endpoint("priced", priced.base_url, price_per_mtok=price))
        )
        routed = await router.inline(REQUEST)
        decision = router.decisions.recent()[-1]
        assert decision.reason == "config-order" and decision.endpoint == "priced"  # unmeasured
        assert decision.kind == "inline" and not decision.hedged
        assert decision.tokens == routed.tokens > 0
        # The upstream's own count (the test server rounds up), preferred to an estimate.
        prompt_tokens = -(-(len(REQUEST.prefix) + len(REQUEST.suffix)) // 4)
        expected = estimate_cost(price, prompt_tokens, decision.tokens)
        assert expected > 0 and decision.cost_usd == pytest.approx(expected)
        status = served_by(router, "priced")
        assert status["tokens"] == decision.tokens
        assert status["cost_usd"] == pytest.approx(expected, abs=1e-6)
        assert router.status()["decisions"][-1]["cost_usd"] == pytest.approx(expected)
        await router.aclose()


async def test_reconfigure_keeps_stats_of_endpoints_that_stay_and_drops_removed_ones() -> None:
    with (
        FakeLLMServer(Behaviour(text=TEXT), name="keep") as keep,
        FakeLLMServer(Behaviour(text=TEXT), name="drop") as drop,
    ):
        both = make_config(endpoint("keep", keep.base_url), endpoint("drop", drop.base_url))
        router = loopback_router(both)
        await served_names(router, 3)
        kept = served_by(router, "keep")
        assert kept["requests"] > 0

        router.reconfigure(make_config(endpoint("keep", keep.base_url, max_tokens=32)))
        names = [e["name"] for e in router.status()["endpoints"]]
        assert names == ["keep"]
        assert served_by(router, "keep")["requests"] == kept["requests"]
        assert served_by(router, "keep")["p50_ms"] == kept["p50_ms"]
        assert (await router.inline(REQUEST)).endpoint == "keep"  # the new backend works

        router.reconfigure(both)
        assert served_by(router, "drop")["requests"] == 0
        await router.aclose()
