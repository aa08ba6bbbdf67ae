"""The chat route's choices: task classes, the fallback without `agent` endpoints, and hedging
that never doubles a tool call unless the configuration allows it. A real `Router` over real
HTTP endpoints on loopback (the tests' own scripted server)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from lsp_server.backends.base import ChatMessage, ChatRequest
from lsp_server.backends.factory import remote_backend
from lsp_server.config.model import Config, EndpointConfig, LocalConfig, Role, RoutingConfig
from lsp_server.failures import RefusalCode, Refused
from lsp_server.reasons import Reason
from lsp_server.routing.router import Router
from tests.support.stand_in import no_local_model

TOOL = {"type": "function", "function": {"name": "run_tests", "parameters": {"type": "object"}}}
HELLO = (ChatMessage("user", "hello"),)
WARM_UP_REQUESTS = 12  # enough first-token samples for the route to know its usual time


def endpoint(
    name: str, server: FakeLLMServer, roles: tuple[Role, ...], *, fim: bool = False
) -> EndpointConfig:
    return EndpointConfig(
        name=name,
        kind="openai",
        base_url=server.base_url,
        model="fake-model",
        roles=roles,
        fim=fim,
        timeout_ms=10_000,
    )


def config(*endpoints: EndpointConfig, hedge_tool_calls: bool = False) -> Config:
    return Config(
        routing=RoutingConfig(hedge_tool_calls=hedge_tool_calls),
        local=LocalConfig(enabled=False),
        endpoints=endpoints,
    )


@contextlib.asynccontextmanager
async def router_for(cfg: Config) -> AsyncIterator[Router]:
    router = Router(cfg, remote_factory=remote_backend, local_factory=no_local_model)
    try:
        yield router
    finally:
        await router.aclose()


@pytest.fixture
def servers() -> Iterator[tuple[FakeLLMServer, FakeLLMServer, FakeLLMServer]]:
    with (
        FakeLLMServer(Behaviour(text="from a"), name="a") as a,
        FakeLLMServer(Behaviour(text="from b"), name="b") as b,
        FakeLLMServer(Behaviour(text="from c"), name="c") as c,
    ):
        yield a, b, c


def names(router: Router, model: str, request: ChatRequest | None = None) -> list[str]:
    plan = router.chats.plan(model, request or ChatRequest(HELLO), local_only=None)
    return [e.name for e in plan.candidates]


async def test_classes_choose_their_endpoints(servers: tuple[FakeLLMServer, ...]) -> None:
    a, b, c = servers
    cfg = config(
        endpoint("agent", a, ("agent",)),
        endpoint("thinker", b, ("refactor",)),
        endpoint("typist", c, ("inline",), fim=True),
    )
    async with router_for(cfg) as router:
        assert names(router, "auto") == ["agent"]
        assert names(router, "gateway-ls") == ["agent"]
        assert names(router, "reasoning") == ["thinker"]
        assert sorted(names(router, "fast")) == ["agent", "thinker"]  # a FIM model does not chat
        assert names(router, "thinker") == ["thinker"]
        for model, code in (
            ("typist", RefusalCode.MODEL_NOT_SUPPORTED),
            ("gpt-4o", RefusalCode.MODEL_NOT_FOUND),
            ("local", RefusalCode.NO_ENDPOINT_AVAILABLE),
        ):
            with pytest.raises(Refused) as refused:
                names(router, model)
            assert refused.value.code is code


async def test_without_agent_endpoints_auto_falls_back_to_refactor_then_inline(
    servers: tuple[FakeLLMServer, ...],
) -> None:
    a, b, _ = servers
    async with router_for(
        config(endpoint("thinker", a, ("refactor",)), endpoint("typist", b, ("inline",)))
    ) as router:
        plan = router.chats.plan("auto", ChatRequest(HELLO), local_only=None)
        assert [e.name for e in plan.candidates] == ["thinker"]
        assert plan.reason is Reason.CONFIGURED  # the refactor endpoints stand in
    async with router_for(config(endpoint("typist", b, ("inline",), fim=True))) as router:
        plan = router.chats.plan("auto", ChatRequest(HELLO), local_only=None)
        assert [e.name for e in plan.candidates] == ["typist"]
        assert plan.reason is Reason.INLINE_FALLBACK


async def test_a_sensitive_chat_has_only_the_local_model_or_nothing(
    servers: tuple[FakeLLMServer, ...],
) -> None:
    a, _, _ = servers
    async with router_for(config(endpoint("agent", a, ("agent",)))) as router:
        for model in ("auto", "agent", "fast", "reasoning"):
            with pytest.raises(Refused) as refused:
                router.chats.plan(model, ChatRequest(HELLO), local_only=Reason.SENSITIVE)
            assert "must stay on this machine" in str(refused.value)


async def _warm_and_slow_down(
    router: Router, primary: FakeLLMServer, backup: FakeLLMServer
) -> None:
    """Give the primary a record of fast first tokens, then make it slow to start. The backup
    is slow meanwhile, so that on a loaded machine no warm-up request ranks it first."""
    backup.behaviour = Behaviour(text="from b", latency_s=0.5)
    for _ in range(WARM_UP_REQUESTS):
        request = ChatRequest(HELLO)
        routed = await router.sequential.run(
            router.chats.plan("auto", request, local_only=None), request
        )
        assert routed.endpoint == "a"
    primary.behaviour = Behaviour(text="from a", latency_s=1.5)
    backup.behaviour = Behaviour(text="from b")


@pytest.mark.parametrize(
    ("tools", "hedge_tool_calls", "hedged"),
    [((TOOL,), False, False), ((TOOL,), True, True), ((), False, True)],
    ids=["tools-never-hedged", "tools-hedged-when-configured", "plain-chat-hedged"],
)
async def test_a_chat_that_may_call_a_tool_is_not_hedged_unless_configured(
    servers: tuple[FakeLLMServer, ...],
    tools: tuple[dict[str, Any], ...],
    hedge_tool_calls: bool,
    hedged: bool,
) -> None:
    a, b, _ = servers
    cfg = config(
        endpoint("a", a, ("agent",)),
        endpoint("b", b, ("agent",)),
        hedge_tool_calls=hedge_tool_calls,
    )
    async with router_for(cfg) as router:
        await _warm_and_slow_down(router, a, b)
        # A warm-up hedge the backup lost may still reach it: count only this request's arrivals.
        request = ChatRequest((ChatMessage("user", "the measured one"),), tools=tools)
        plan = router.chats.plan("auto", request, local_only=None)
        routed = await router.sequential.run(plan, request)
        measured = [r for r in b.requests if b"the measured one" in r.body]
        assert routed.hedged is hedged
        if hedged:
            assert len(measured) == 1
            assert routed.endpoint == "b" and routed.reason is Reason.HEDGE_WIN
        else:
            assert measured == []
            assert routed.endpoint == "a" and routed.text == "from a"
