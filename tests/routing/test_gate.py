"""The one door out (`routing/gate.py`): its permits, and a request under way when offline
"always" is set, which is then neither hedged nor retried remotely."""

from __future__ import annotations

import asyncio
import contextlib
import random

import pytest

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from lsp_server.backends.base import ChatMessage, ChatRequest
from lsp_server.backends.factory import remote_backend
from lsp_server.failures import Refused, RouteFailed
from lsp_server.permit import GATE_ONLY, Permit, PermitError
from lsp_server.reasons import Reason
from lsp_server.routing.gate import Gate, StaysHome
from lsp_server.routing.router import Router
from tests.support.stand_in import REQUEST, endpoint, make_config, no_local_model

CHAT = ChatRequest(messages=(ChatMessage("user", "hello"),), max_tokens=8)


def test_the_gate_decides_from_the_facts_and_the_mode_at_the_call() -> None:
    mode = ["never"]
    gate = Gate(lambda: mode[0])  # type: ignore[arg-type, return-value]
    assert gate.verdict(None) is None
    assert gate.verdict(Reason.SENSITIVE) is Reason.SENSITIVE
    assert gate.permit("remote", remote=True, held=None).remote
    with pytest.raises(StaysHome) as held:
        gate.permit("remote", remote=True, held=Reason.SENSITIVE)
    assert held.value.reason is Reason.SENSITIVE
    assert not gate.permit("local", remote=False, held=Reason.SENSITIVE).remote
    mode[0] = "always"
    assert gate.verdict(None) is Reason.OFFLINE
    with pytest.raises(StaysHome):
        gate.contentless("remote")
    assert not gate.permit("local", remote=False, held=None).remote


def test_a_permit_is_the_gates_alone_and_names_its_endpoint() -> None:
    with pytest.raises(PermitError):
        Permit("remote", remote=True, issuer=object())
    permit = Permit("remote", remote=True, issuer=GATE_ONLY)
    permit.check_remote("remote")
    with pytest.raises(PermitError):
        permit.check_remote("other")
    with pytest.raises(PermitError):
        Permit("local", remote=False, issuer=GATE_ONLY).check_remote("remote")


def router_on(*servers: FakeLLMServer, roles: tuple[str, ...], hedge_after_ms: int) -> Router:
    config = make_config(
        *(endpoint(s.name, s.base_url, roles=roles, fim=False) for s in servers),
        hedge_after_ms=hedge_after_ms,
        deadline_ms=5000,
        max_hedge_ratio=1.0,
    )
    return Router(
        config, remote_factory=remote_backend, local_factory=no_local_model, rng=random.Random(7)
    )


async def test_a_keystroke_under_way_is_not_hedged_remotely_once_offline_is_always() -> None:
    """The exploration budget spent, nothing rides beside the hung primary: the hedge, due
    after the switch, is the only other request the spare could get."""
    with (
        FakeLLMServer(Behaviour(fault="hang_before_headers"), name="hung") as hung,
        FakeLLMServer(Behaviour(text="x = 1\n"), name="spare") as spare,
    ):
        router = router_on(hung, spare, roles=("inline",), hedge_after_ms=300)
        router.budget.explored_requests = 1_000  # no exploration rides along
        try:
            keystroke = asyncio.create_task(router.inline(REQUEST))
            assert await hung.wait_for_async(lambda s: s.open_streams + len(s.requests) >= 1)
            router.set_offline("always")
            routed = await keystroke
            assert routed.endpoint is None
            assert spare.requests == []
        finally:
            await router.aclose()


async def test_a_chat_under_way_is_not_retried_remotely_once_offline_is_always() -> None:
    with (
        FakeLLMServer(Behaviour(latency_s=0.5, fault="status:500"), name="failing") as failing,
        FakeLLMServer(Behaviour(text="hello"), name="spare") as spare,
    ):
        router = router_on(failing, spare, roles=("agent",), hedge_after_ms=4000)
        try:
            plan = router.chats.plan("auto", CHAT, local_only=None)
            assert [e.name for e in plan.candidates] == ["failing", "spare"]
            chat = asyncio.create_task(router.sequential.run(plan, CHAT))
            assert await failing.wait_for_async(lambda s: len(s.requests) >= 1)
            router.set_offline("always")
            with contextlib.suppress(RouteFailed, Refused):
                await chat
            assert spare.requests == []
        finally:
            await router.aclose()
