"""The core's `Limiter` in one process (no Redis, or Redis unreachable): the same rules the
shared script applies, reservations settled to what was used, and the share each gateway
enforces while the shared state is down."""

from __future__ import annotations

import socket

import pytest

from lsp_server.limits.quota import LimitKind, Spent
from tests.support.limiter import demand, limiter_for


async def test_requests_per_minute_admit_exactly_the_limit_then_say_when() -> None:
    limiter = limiter_for("[gateway.clients.CI]\nrpm = 3\n")
    verdicts = [(await limiter.admit(demand())).verdict for _ in range(4)]
    assert [v.refused for v in verdicts] == [None, None, None, LimitKind.REQUESTS]
    assert [v.requests.remaining for v in verdicts if v.requests] == [2, 1, 0, 0]
    assert 19 < verdicts[-1].retry_after_s <= 20  # one request every 20 s after the burst
    assert (await limiter.admit(demand("OTHER"))).refused is None


async def test_unused_tokens_go_back_when_the_answer_is_settled() -> None:
    limiter = limiter_for("[gateway.clients.CI]\ntpm = 1000\n")
    first = await limiter.admit(demand(max_tokens=500))
    assert first.lease is not None and first.lease.ask.tokens == 16 + 500
    assert (await limiter.admit(demand(max_tokens=500))).refused is LimitKind.TOKENS
    limiter.settle(first.lease, Spent("paid", 10, 10, True), 0.1)
    assert (await limiter.admit(demand(max_tokens=500))).refused is None


async def test_a_budget_is_reserved_at_the_highest_price_and_settled_at_the_real_one() -> None:
    # 0.01 $ = 10,000 micro-dollars; a reservation: 116 prompt tokens at 10 and 100 at 20.
    limiter = limiter_for("[gateway.clients.CI]\nbudget_usd = 0.01\n")
    reserved = 116 * 10 + 100 * 20
    leases = []
    while (admission := await limiter.admit(demand(chars=200))).lease is not None:
        leases.append(admission.lease)
    assert len(leases) == 10_000 // reserved
    assert admission.refused is LimitKind.BUDGET and admission.period_end is not None
    costs = [limiter.settle(lease, Spent("paid", 100, 10, True), 0.2) for lease in leases[:2]]
    assert costs == [100 * 10 + 10 * 20] * 2
    assert (await limiter.admit(demand(chars=200))).lease is not None  # the refunds made room


async def test_requests_in_flight_are_bounded_until_one_ends() -> None:
    limiter = limiter_for("[gateway.clients.CI]\nmax_concurrent = 2\n")
    first = await limiter.admit(demand())
    assert (await limiter.admit(demand())).refused is None
    refused = await limiter.admit(demand())
    assert refused.refused is LimitKind.CONCURRENCY and refused.verdict.retry_after_s > 0
    assert first.lease is not None
    limiter.settle(first.lease, Spent("paid", 1, 1, True), 0.1)
    assert (await limiter.admit(demand())).refused is None


async def test_a_client_without_limits_is_admitted_and_still_charged() -> None:
    limiter = limiter_for("")
    admission = await limiter.admit(demand("ANYONE"))
    assert admission.refused is None and admission.verdict.requests is None
    assert admission.lease is not None
    assert limiter.settle(admission.lease, Spent("paid", 1000, 1000, True), 0.1) == 30_000
    usage = await limiter.usage("month")
    assert usage["rows"] == [
        {
            "client": "ANYONE",
            "endpoint": "paid",
            "requests": 1,
            "input_tokens": 1000,
            "output_tokens": 1000,
            "cost_usd": 0.03,
        }
    ]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.mark.parametrize(("mode", "refused"), [("closed", LimitKind.BUDGET), ("open", None)])
async def test_budgets_fail_closed_or_open_while_the_shared_state_is_down(
    mode: str, refused: LimitKind | None
) -> None:
    limiter = limiter_for(
        "[gateway.clients.CI]\nbudget_usd = 1\nrpm = 4\n",
        gateway=f'budget_when_state_down = "{mode}"',
    )
    limiter.share(f"redis://127.0.0.1:{closed_port()}/0", None, lambda _c, _s: None)
    try:
        admissions = [await limiter.admit(demand()) for _ in range(3)]
        assert limiter.status()["shared"] is False
        assert all(a.refused is refused for a in admissions)
        assert all(a.budget_unchecked for a in admissions) == (mode == "closed")
        others = [await limiter.admit(demand("OTHER")) for _ in range(20)]
        assert all(a.refused is None for a in others)  # requests still flow
    finally:
        await limiter.aclose()
