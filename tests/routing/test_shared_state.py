"""Shared routing state in-process: the update format and its checks, merging a peer's updates
into the router's endpoints, what the router reports, and the Redis link against a real
redis-server that is frozen, password-protected or fed garbage.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio

from bench.harness.redis_server import RedisServer
from lsp_server.failures import FailureKind
from lsp_server.routing.circuit_breaker import BreakerState
from lsp_server.routing.hedge_budget import HEDGE_BURST
from lsp_server.routing.redis_link import CHANNEL, TIMEOUT_S, RedisLink, display_url
from lsp_server.routing.router import Router
from lsp_server.routing.shared_state import SharedState
from lsp_server.routing.shared_wire import (
    MAX_ITEMS,
    Sample,
    SampleKind,
    Update,
    decode_update,
    encode_update,
)
from tests.support.real_tools import require_redis_server
from tests.support.stand_in import REQUEST, StandIn, stand_in_router

KNOWN = {"alpha", "beta"}


def known(name: str) -> bool:
    return name in KNOWN


# --- the update format ---------------------------------------------------------------------


def test_an_update_survives_the_round_trip() -> None:
    update = Update(
        7,
        [
            Sample("alpha", SampleKind.SUCCESS, 12.5, 40.0, 9),
            Sample("beta", SampleKind.CENSORED, None, 300.0),
            Sample("beta", SampleKind.CENSORED, 120.0, 300.0),
            Sample("beta", SampleKind.FAILURE),
        ],
        {"beta": 29.5},
        {"alpha"},
        inline=12,
        hedged=2,
    )
    assert decode_update(encode_update(update), known) == update


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'{"v": 2, "from": 1}',
        b'{"v": 1, "from": "me"}',
        b'{"v": 1, "from": true}',
        b"[" * 100_000,
        b'{"v": 1, "from": 1, "pad": "' + b"x" * 300_000 + b'"}',
    ],
)
def test_garbage_is_dropped(data: bytes) -> None:
    assert decode_update(data, known) is None


def test_bad_items_are_dropped_one_by_one() -> None:
    body = {
        "v": 1,
        "from": 1,
        "samples": [
            ["alpha", 0, 10.0, 20.0, 3],
            ["gamma", 0, 10.0, 20.0, 3],  # not configured here
            ["alpha", 0, -1.0, 20.0, 3],
            ["alpha", 0, 10.0, 1e300, 3],
            ["alpha", 9, 10.0, 20.0, 3],
            ["alpha", True, 10.0, 20.0, 3],
            ["alpha", 1, None, None, 0],
            ["alpha", 0, "10", 20.0, 3],
            ["alpha", 0, 10.0, 20.0, -3],
            ["alpha", 0, 10.0, 20.0, 2.5],
            ["alpha", 0, 10.0, 20.0],
            ["alpha" * 100, 0, 10.0, 20.0, 3],
            "alpha",
            ["beta", 2, None, None, 0],
        ],
        "opened": [["alpha", 30], ["beta", -5], ["beta", 1e9], ["gamma", 5], ["alpha"]],
        "closed": ["beta", "gamma", 3],
        "inline": -4,
        "hedged": "many",
    }
    update = decode_update(json.dumps(body).encode(), known)
    assert update is not None
    assert update.samples == [
        Sample("alpha", SampleKind.SUCCESS, 10.0, 20.0, 3),
        Sample("beta", SampleKind.FAILURE),
    ]
    assert update.opened == {"alpha": 30.0}
    assert update.closed == {"beta"}
    assert (update.inline, update.hedged) == (0, 0)


def test_an_update_reads_a_bounded_number_of_items() -> None:
    body = {"v": 1, "from": 1, "samples": [["alpha", 2, None, None, 0]] * (MAX_ITEMS + 500)}
    update = decode_update(json.dumps(body).encode(), known)
    assert update is not None and len(update.samples) == MAX_ITEMS


# --- merging into the router ---------------------------------------------------------------


def two_endpoint_router() -> tuple[Router, SharedState, list[str]]:
    calls: list[str] = []
    router = stand_in_router([StandIn("alpha", calls), StandIn("beta", calls)])
    return router, router.share_state(), calls


async def test_peer_samples_rank_endpoints_without_touching_local_counts() -> None:
    router, shared, calls = two_endpoint_router()
    slow = [Sample("alpha", SampleKind.SUCCESS, 200.0, 400.0, 4)] * 6
    fast = [Sample("beta", SampleKind.SUCCESS, 5.0, 10.0, 4)] * 6
    shared.merge(Update(sender=shared.process + 1, samples=slow + fast))
    alpha = next(e for e in router.status()["endpoints"] if e["name"] == "alpha")
    assert alpha["requests"] == 0 and alpha["p50_ms"] == 400.0
    assert alpha["first_token_estimate_ms"] == pytest.approx(200.0)
    routed = await router.inline(REQUEST)
    assert routed.endpoint == "beta" and calls[0] == "beta"  # (alpha may ride along to explore)


async def test_a_peer_opening_a_breaker_reroutes_and_its_close_brings_traffic_back() -> None:
    router, shared, calls = two_endpoint_router()
    peer = shared.process + 1
    shared.merge(Update(peer, opened={"alpha": 30.0}))
    assert router.pool.remotes["alpha"].breaker.state is BreakerState.OPEN
    assert (await router.inline(REQUEST)).endpoint == "beta"
    assert "alpha" not in calls
    shared.merge(Update(peer, closed={"alpha"}))
    # mypy keeps `state` narrowed by the assert before the call that changed it.
    assert router.pool.remotes["alpha"].breaker.state is BreakerState.CLOSED  # type: ignore[comparison-overlap]
    await router.inline(REQUEST)
    assert "alpha" in calls  # asked again at once (beside beta, to measure it)


def test_own_updates_and_the_local_model_are_not_merged() -> None:
    calls: list[str] = []
    local = StandIn("local", calls, is_local=True)
    router = stand_in_router([StandIn("alpha", calls)], local=local)
    shared = router.share_state()
    shared.merge(Update(shared.process, opened={"alpha": 30.0}))
    assert router.pool.remotes["alpha"].breaker.state is BreakerState.CLOSED
    assert not shared.knows("local")
    update = decode_update(
        encode_update(Update(shared.process + 1, opened={"local": 30.0})), shared.knows
    )
    assert update is not None and update.opened == {}


async def test_the_router_tells_what_it_observed() -> None:
    calls: list[str] = []
    flaky = StandIn("alpha", calls, failure=FailureKind.SERVER)
    router = stand_in_router([flaky, StandIn("beta", calls)])
    shared = router.share_state()
    for _ in range(3):  # three failures open alpha's breaker
        await router.inline(REQUEST, pinned="alpha")
    await router.inline(REQUEST, pinned="beta")
    update = shared.take_update()
    kinds = [(s.endpoint, s.kind) for s in update.samples]
    assert kinds == [("alpha", SampleKind.FAILURE)] * 3 + [("beta", SampleKind.SUCCESS)]
    assert 0 < update.opened["alpha"] <= 1.0
    assert (update.inline, update.hedged) == (4, 0)
    assert shared.take_update().samples == []  # taken once

    flaky.failure = None
    await asyncio.sleep(router.pool.remotes["alpha"].breaker.retry_in_s + 0.01)
    assert (await router.inline(REQUEST, pinned="alpha")).endpoint == "alpha"  # the probe
    assert shared.take_update().closed == {"alpha"}


async def test_the_hedge_budget_counts_the_peers_hedges() -> None:
    calls: list[str] = []
    slow = StandIn("alpha", calls, delay=lambda r: 0.2)
    router = stand_in_router([slow, StandIn("beta", calls)], hedge_after_ms=20, max_hedge_ratio=0.2)
    shared = router.share_state()
    shared.merge(Update(shared.process + 1, inline=100, hedged=21 + HEDGE_BURST))
    routed = await router.inline(REQUEST, pinned=None)
    assert routed.endpoint == "alpha" and calls == ["alpha"]  # no budget left to hedge
    shared.merge(Update(shared.process + 1, inline=1000))
    calls.clear()
    assert (await router.inline(REQUEST)).endpoint == "beta"  # budget again: hedged


# --- the Redis link against a real redis-server ---------------------------------------------


@pytest.fixture
async def linked(redis_server: RedisServer) -> AsyncIterator[tuple[Router, RedisLink]]:
    router, shared, _ = two_endpoint_router()
    link = RedisLink(redis_server.url, None, shared)
    link.start()
    try:
        yield router, link
    finally:
        await link.stop()


async def until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def test_a_frozen_redis_costs_the_router_nothing_and_warns_once(
    linked: tuple[Router, RedisLink],
    redis_server: RedisServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    router, link = linked
    assert await until(lambda: link.connected)
    assert redis_server.process is not None
    os.kill(redis_server.process.pid, signal.SIGSTOP)  # accepts connections, answers nothing
    try:
        with caplog.at_level(logging.WARNING, logger="lsp_server.routing.redis_link"):
            for _ in range(20):
                started = time.monotonic()
                assert (await router.inline(REQUEST)).endpoint is not None
                # far below one Redis timeout: the request never waited on Redis
                assert time.monotonic() - started < TIMEOUT_S / 2
                await asyncio.sleep(0.05)
            assert await until(lambda: not link.connected, 5)
            await asyncio.sleep(2 * TIMEOUT_S + 1)  # reconnection attempts time out too
        assert link.status()["connected"] is False and link.status()["error"]
        assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
        assert len(caplog.records) == 1 and "unavailable" in caplog.records[0].message
    finally:
        os.kill(redis_server.process.pid, signal.SIGCONT)
    assert await until(lambda: link.connected, 10)


async def test_garbage_on_the_channel_is_ignored(
    linked: tuple[Router, RedisLink], redis_server: RedisServer
) -> None:
    router, link = linked
    assert await until(lambda: link.connected)
    client = redis.asyncio.Redis.from_url(redis_server.url)
    try:
        for junk in (
            b"\xff\xfe",
            b"{}",
            b'{"v":1,"from":1,"opened":[["alpha",1e99]]}',
            b"[" * 9999,
        ):
            await client.publish(CHANNEL, junk)
        good = Update(1, opened={"beta": 5.0})
        await client.publish(CHANNEL, encode_update(good))
        beta = router.pool.remotes["beta"].breaker
        assert await until(lambda: beta.state is BreakerState.OPEN)
        assert router.pool.remotes["alpha"].breaker.state is BreakerState.CLOSED
        assert link.connected
    finally:
        await client.aclose()


async def test_a_password_comes_from_the_variable_and_a_wrong_one_is_reported() -> None:
    require_redis_server()
    with RedisServer(password="s3cret-redis") as server:
        router, shared, _ = two_endpoint_router()
        wrong = RedisLink(server.url, "not-it", shared)
        wrong.start()
        try:
            assert await until(lambda: wrong.last_error is not None)
            assert not wrong.connected
            assert "not-it" not in json.dumps(wrong.status())
        finally:
            await wrong.stop()
        right = RedisLink(server.url, "s3cret-redis", shared)
        right.start()
        try:
            assert await until(lambda: right.connected)
            assert "s3cret" not in json.dumps(router.status()["shared_state"])
        finally:
            await right.stop()


async def test_rediss_speaks_tls_with_the_ca_named_in_the_url() -> None:
    require_redis_server(tls=True)
    with RedisServer(tls=True) as server:
        assert server.url.startswith("rediss://")
        router, shared, _ = two_endpoint_router()
        link = RedisLink(server.url, None, shared)
        shared.breaker_opened("alpha", 5.0)
        link.start()
        try:
            assert await until(lambda: link.connected, 15), link.status()
            assert link.status()["url"] == f"rediss://127.0.0.1:{server.port}/0"
            assert await until(lambda: link.sent > 0)  # the opening went out over TLS
            assert router.pool.remotes["alpha"].breaker.state is BreakerState.CLOSED  # not ours
        finally:
            await link.stop()


def test_the_displayed_url_has_no_credentials() -> None:
    assert display_url("rediss://ops:pw@cache.internal:6380/2") == "rediss://cache.internal:6380/2"
    assert display_url("redis://[::1]:6379/0") == "redis://[::1]:6379/0"
