"""Settlement across an outage of the shared state, against a real redis-server that is paused
(unreachable, its data kept) or killed and started again empty, in the middle of a request.

Decided behaviour checked here: a request admitted before the outage and settled during it or
after it is charged exactly once, to what it used: its budget reservation becomes its cost, its
lease ends, its ledger entry arrives. When Redis comes back empty, each gateway puts back what it
settled this budget period and the reservations it still holds, so a budget and a concurrency
limit go on from where they were. What a budget failing open let through is charged when Redis
answers again.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from bench.harness.redis_server import RedisServer
from lsp_server.limits import shared_store
from lsp_server.limits.limiter import Limiter
from lsp_server.limits.quota import LimitKind, Spent
from lsp_server.limits.shared_store import LEDGER_KEY, WARM_CONNECTIONS
from tests.support.limiter import demand, limiter_for

LIMITS = "[gateway.clients.CI]\nbudget_usd = 1\nmax_concurrent = 1\ntpm = 100000\n"
RESERVED = 116 * 10 + 100 * 20  # demand(chars=200): 116 prompt tokens at 10, 100 at 20
USED = Spent("paid", 100, 10, True)
COST = 100 * 10 + 10 * 20


def budget_key(client: str = "CI") -> str:
    return f"gateway-ls:v1:limits:budget:{client}:{dt.datetime.now(dt.UTC):%Y-%m-%d}"


@pytest.fixture
def store(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.close()


def held(store: redis.Redis) -> tuple[int, int, int]:
    """(micro-dollars in the budget, leases in flight, ledger entries) as Redis has them."""
    return (
        int(store.get(budget_key()) or 0),
        store.zcard("gateway-ls:v1:limits:inflight:CI"),
        store.xlen(LEDGER_KEY),
    )


async def until(condition: Callable[[], bool], what: str, timeout_s: float = 10) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        assert loop.time() < deadline, what
        await asyncio.sleep(0.05)


def shared(limiter: Limiter, url: str) -> Limiter:
    limiter.share(url, None, lambda _call, _s: None)
    return limiter


def is_up(limiter: Limiter) -> bool:
    return limiter.status()["shared"] is True


@pytest.mark.parametrize("outage", ["paused", "restarted empty"])
async def test_a_request_settled_during_an_outage_is_charged_once_when_redis_answers(
    redis_server: RedisServer, store: redis.Redis, outage: str
) -> None:
    limiter = shared(limiter_for(LIMITS), redis_server.url)
    try:
        admission = await limiter.admit(demand(chars=200))
        assert admission.lease is not None and admission.lease.shared
        assert held(store) == (RESERVED, 1, 0)
        assert redis_server.process is not None
        if outage == "paused":
            os.kill(redis_server.process.pid, signal.SIGSTOP)
        else:
            redis_server.kill()
        assert limiter.settle(admission.lease, USED, 0.2) == COST
        await until(lambda: not is_up(limiter), "the outage was never noticed")
        if outage == "paused":
            os.kill(redis_server.process.pid, signal.SIGCONT)
        else:
            redis_server.start()
        await until(lambda: held(store)[2] == 1, "the ledger entry never arrived")
        assert held(store) == (COST, 0, 1)  # the reservation became the cost, the lease ended
    finally:
        if outage == "paused" and redis_server.process is not None:
            os.kill(redis_server.process.pid, signal.SIGCONT)
        await limiter.aclose()


async def test_redis_restarted_empty_gets_back_each_gateways_spend_and_held_reservations(
    redis_server: RedisServer, store: redis.Redis
) -> None:
    first = shared(limiter_for(LIMITS), redis_server.url)
    second = shared(limiter_for(LIMITS), redis_server.url)
    try:
        done = await first.admit(demand(chars=200))
        assert done.lease is not None
        first.settle(done.lease, USED, 0.1)
        await until(lambda: held(store)[2] == 1, "the first settlement never arrived")
        running = await second.admit(demand(chars=200))  # its answer is still streaming
        assert running.lease is not None and running.lease.shared
        assert held(store) == (COST + RESERVED, 1, 1)
        redis_server.kill()
        redis_server.start()
        assert held(store) == (0, 0, 0)
        # Each gateway finds the new epoch (a heartbeat, or its next call) and puts its part
        # back: what it settled this period, and the reservation and lease it still holds.
        await until(lambda: held(store)[:2] == (COST + RESERVED, 1), "nothing was put back")
        refused = await first.admit(demand(chars=200))
        assert refused.refused is LimitKind.CONCURRENCY  # the lease held across the restart
        second.settle(running.lease, USED, 0.3)
        await until(lambda: held(store)[2] == 1, "the second settlement never arrived")
        assert held(store) == (2 * COST, 0, 1)  # the ledger before the restart is gone
    finally:
        await first.aclose()
        await second.aclose()


async def test_what_a_budget_failing_open_let_through_is_charged_when_redis_is_back(
    redis_server: RedisServer, store: redis.Redis
) -> None:
    limiter = shared(
        limiter_for(LIMITS, gateway='budget_when_state_down = "open"'), redis_server.url
    )
    try:
        redis_server.kill()
        admissions = [await limiter.admit(demand(chars=200)) for _ in range(3)]
        assert [a.refused for a in admissions] == [None, *[LimitKind.CONCURRENCY] * 2]
        lease = admissions[0].lease
        assert lease is not None and not lease.shared
        limiter.settle(lease, USED, 0.1)
        again = await limiter.admit(demand(chars=200))
        assert again.lease is not None
        limiter.settle(again.lease, USED, 0.1)
        redis_server.start()
        await until(lambda: held(store)[2] == 2, "the ledger entries never arrived")
        assert held(store) == (2 * COST, 0, 2)
        usage = await limiter.usage("month")
        assert usage["source"] == "shared"
        rows = usage["rows"]
        assert isinstance(rows, list) and rows[0]["requests"] == 2
    finally:
        await limiter.aclose()


async def test_a_settlement_whose_reply_was_lost_is_charged_once(
    redis_server: RedisServer, store: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    limiter = shared(limiter_for(LIMITS), redis_server.url)
    try:
        shared_store = limiter._shared
        assert shared_store is not None
        call = shared_store._call
        lost: list[str] = []

        async def reply_lost_once(name: str, redis_call: Any, **kwargs: Any) -> Any:
            reply = await call(name, redis_call, **kwargs)
            if name == "settle" and not lost:
                lost.append(name)  # Redis ran it; the gateway never hears back
                shared_store._down(TimeoutError("the reply was lost"))
                return None
            return reply

        monkeypatch.setattr(shared_store, "_call", reply_lost_once)
        admission = await limiter.admit(demand(chars=200))
        assert admission.lease is not None and admission.lease.shared
        limiter.settle(admission.lease, USED, 0.2)
        await until(lambda: bool(lost), "the settlement was never sent")
        assert held(store) == (COST, 0, 1)  # Redis ran it once
        await until(lambda: is_up(limiter) and shared_store.owed() == 0, "never sent again")
        assert held(store) == (COST, 0, 1)  # sent again, charged once
        assert shared_store._seen[budget_key()].micros == COST
    finally:
        await limiter.aclose()


async def test_a_gateway_ready_for_traffic_has_loaded_its_scripts_and_opened_connections(
    redis_server: RedisServer, store: redis.Redis
) -> None:
    """A gateway waits for this before it listens, so its first requests load no script and
    open no connection to Redis."""
    limiter = shared(limiter_for(LIMITS), redis_server.url)
    try:
        await limiter.ready(5)
        shared_store = limiter._shared
        assert shared_store is not None
        scripts = (shared_store._admit, shared_store._settle, shared_store._renew)
        assert all(store.script_exists(*(script.sha for script in scripts)))
        names = [client.get("name") for client in store.client_list()]
        assert names.count("gateway-ls-limits") >= WARM_CONNECTIONS
    finally:
        await limiter.aclose()


async def test_ledger_entries_alone_wait_for_others_and_a_reservations_end_goes_at_once(
    redis_server: RedisServer, store: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    limiter = limiter_for(LIMITS)
    limiter.share(redis_server.url, None, lambda call, _s: calls.append(call))
    try:
        await limiter.ready(5)
        # A client without limits leaves only its ledger entry to send: it goes once the
        # coalescing time is up.
        alone = await limiter.admit(demand("free", chars=200))
        assert alone.lease is not None and not alone.lease.shared
        limiter.settle(alone.lease, USED, 0.1)
        # (Redis may hold it before the reply is read: the call is counted then.)
        await until(lambda: calls.count("settle") == 1, "a ledger entry alone never went")
        assert held(store)[2] == 1
        monkeypatch.setattr(shared_store, "COALESCE_S", 60.0)
        before = calls.count("settle")
        for _ in range(5):
            admission = await limiter.admit(demand("free", chars=200))
            assert admission.lease is not None
            limiter.settle(admission.lease, USED, 0.1)
            await asyncio.sleep(0.02)  # time enough for a call, were it made at once
        assert held(store)[2] == 1 and calls.count("settle") == before  # they wait
        # A reservation's end is what the next admission reads: it goes at once, and takes
        # the waiting entries with it, in one call.
        admission = await limiter.admit(demand(chars=200))
        assert admission.lease is not None and admission.lease.shared
        limiter.settle(admission.lease, USED, 0.1)
        await until(lambda: calls.count("settle") > before, "the lease's end never went")
        assert held(store)[1:] == (0, 7) and calls.count("settle") == before + 1
    finally:
        await limiter.aclose()


async def test_a_budgets_refund_waits_for_company_and_a_charge_beyond_it_goes_at_once(
    redis_server: RedisServer, store: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    limiter = limiter_for("[gateway.clients.CI]\nbudget_usd = 1\n")
    limiter.share(redis_server.url, None, lambda call, _s: calls.append(call))
    monkeypatch.setattr(shared_store, "COALESCE_S", 60.0)
    try:
        await limiter.ready(5)
        refunded = await limiter.admit(demand(chars=200))
        assert refunded.lease is not None and refunded.lease.shared
        limiter.settle(refunded.lease, USED, 0.1)  # less than reserved: money goes back
        await asyncio.sleep(0.05)  # time enough for a call, were it made at once
        # Until it is sent, admissions see the reservation whole: less room, never more.
        assert calls.count("settle") == 0 and held(store) == (RESERVED, 0, 0)
        charged = await limiter.admit(demand(chars=200))
        assert charged.lease is not None
        beyond = Spent("paid", 1000, 100, True)  # 12,000 micro-dollars: more than reserved
        limiter.settle(charged.lease, beyond, 0.1)
        await until(lambda: calls.count("settle") == 1, "the charge never went")
        assert held(store) == (COST + 1000 * 10 + 100 * 20, 0, 2)  # both, in one call
    finally:
        await limiter.aclose()
