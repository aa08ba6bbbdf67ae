"""The core's `Limiter` in one process (no Redis, or Redis unreachable): the same rules the
shared script applies, reservations settled to what was used, and the share each gateway
enforces while the shared state is down."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from lsp_server.config.loader import parse_config_text
from lsp_server.config.model import EndpointConfig
from lsp_server.limits import limiter as limiter_module
from lsp_server.limits.limiter import Demand, Limiter
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


TWO_PRICES = """
[[endpoints]]
name = "cheap"
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "m"
roles = ["agent"]
chat_max_tokens = 100
price_per_mtok = { input = 1.0, output = 2.0 }

[[endpoints]]
name = "dear"
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "m"
roles = ["refactor"]
chat_max_tokens = 4000
price_per_mtok = { input = 10.0, output = 20.0 }
"""


def two_priced(limits: str) -> Limiter:
    config = parse_config_text(f"[gateway]\n{TWO_PRICES}\n{limits}", file="c.toml")
    by_class = {"auto": ["cheap"], "reasoning": ["dear"]}

    def answerers(task_class: str, model: str) -> list[EndpointConfig]:
        return [e for e in config.endpoints if e.name in by_class.get(task_class, [model])]

    return Limiter(lambda: config, answerers)


@pytest.mark.unit
async def test_a_budget_is_reserved_at_the_price_and_cap_of_the_endpoints_that_may_answer() -> None:
    limiter = two_priced("[gateway.clients.CI]\nbudget_usd = 1\n")
    cheap = await limiter.admit(Demand("CI", 200, None, "auto"))
    dear = await limiter.admit(Demand("CI", 200, None, "reasoning"))
    assert cheap.lease is not None and dear.lease is not None
    # 116 prompt tokens (two characters a token and a template's markers) and the cap.
    assert cheap.lease.ask.reserve_micros == 116 * 1 + 100 * 2
    assert dear.lease.ask.reserve_micros == 116 * 10 + 4000 * 20


@pytest.mark.unit
async def test_the_prompt_is_estimated_from_what_the_endpoint_counted_before() -> None:
    limiter = two_priced("[gateway.clients.CI]\nbudget_usd = 1\n")
    first = await limiter.admit(Demand("CI", 400, 10, "auto"))
    assert first.lease is not None and first.lease.ask.tokens == 200 + 16 + 10
    limiter.settle(first.lease, Spent("cheap", 100, 10, True), 0.1)  # 4 characters a token
    second = await limiter.admit(Demand("CI", 800, 10, "auto"))
    assert second.lease is not None
    assert second.lease.ask.tokens == 220 + 10  # 200 as it counts, 10 % over
    limiter.settle(second.lease, Spent("cheap", 200, 10, False), 0.1)  # an estimate teaches not
    unknown = await limiter.admit(Demand("CI", 400, 10, "reasoning"))
    assert unknown.lease is not None and unknown.lease.ask.tokens == 200 + 16 + 10


@pytest.mark.unit
async def test_an_admission_that_does_not_fit_waits_for_the_reservations_in_flight() -> None:
    limiter = two_priced("[gateway.clients.CI]\nbudget_usd = 0.000500\n")  # 500 micro-dollars
    first = await limiter.admit(Demand("CI", 0, 100, "auto"))  # 16 + 200 reserved
    second = await limiter.admit(Demand("CI", 0, 100, "auto"))
    assert first.lease is not None and second.lease is not None
    waiting = asyncio.ensure_future(limiter.admit(Demand("CI", 0, 100, "auto")))
    await asyncio.sleep(0.05)
    assert not waiting.done()  # 648 would be held: it waits for the two in flight
    limiter.settle(first.lease, Spent("cheap", 10, 5, True), 0.1)  # 20 spent, 196 back
    admitted = await asyncio.wait_for(waiting, 5)
    assert admitted.refused is None


@pytest.mark.unit
async def test_an_admission_waits_no_longer_than_its_bound_and_not_at_all_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(limiter_module, "BUDGET_WAIT_S", 0.2)
    limiter = two_priced("[gateway.clients.CI]\nbudget_usd = 0.000300\n")
    held = await limiter.admit(Demand("CI", 0, 100, "auto"))
    assert held.lease is not None
    started = time.monotonic()
    refused = await limiter.admit(Demand("CI", 0, 100, "auto"))
    assert refused.refused is LimitKind.BUDGET and time.monotonic() - started >= 0.2
    limiter.settle(held.lease, Spent("cheap", 100, 100, True), 0.1)  # all of it spent: 300
    alone = await asyncio.wait_for(limiter.admit(Demand("CI", 0, 100, "auto")), 0.15)
    assert alone.refused is LimitKind.BUDGET  # nothing in flight to wait for
