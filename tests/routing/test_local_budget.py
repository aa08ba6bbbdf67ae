"""Rule 6: a request only the local model can serve has the local budget, not the keystroke's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from lsp_server.backends.base import ChatRequest, CompletionRequest, Usage
from lsp_server.backends.local_model import LocalModel, LocalState
from lsp_server.config.model import Config, LocalConfig, RoutingConfig
from lsp_server.permit import Permit
from lsp_server.reasons import Reason
from lsp_server.routing.router import Router
from tests.support.stand_in import REQUEST, StandIn, endpoint

pytestmark = pytest.mark.unit

KEYSTROKE = RoutingConfig(inline_deadline_ms=300, hedge_after_ms=100, offline="never")
SLOW_LOCAL_S = 0.7  # slower than the keystroke deadline, well within the local budget


def router_with(local: LocalModel, *remotes: StandIn, routing: RoutingConfig = KEYSTROKE) -> Router:
    by_name = {r.name: r for r in remotes}
    config = Config(
        routing=routing,
        local=LocalConfig(deadline_ms=3000),
        endpoints=tuple(endpoint(r.name) for r in remotes),
    )
    return Router(config, remote_factory=lambda c: by_name[c.name], local_factory=lambda c: local)


def slow_local(calls: list[str]) -> StandIn:
    return StandIn("local", calls, delay=lambda request: SLOW_LOCAL_S, is_local=True)


async def test_a_sensitive_request_waits_for_the_local_model_past_the_keystroke_deadline() -> None:
    calls: list[str] = []
    router = router_with(slow_local(calls), StandIn("remote", calls))
    routed = await router.inline(REQUEST, local_only=Reason.SENSITIVE)
    assert (routed.text, routed.endpoint, routed.timed_out) == ("local\n", "local", False)
    assert calls == ["local"]


async def test_a_local_only_configuration_has_the_local_budget() -> None:
    routed = await router_with(slow_local([])).inline(REQUEST)
    assert (routed.text, routed.endpoint) == ("local\n", "local")


async def test_offline_always_has_the_local_budget() -> None:
    routing = RoutingConfig(inline_deadline_ms=300, hedge_after_ms=100, offline="always")
    router = router_with(slow_local([]), StandIn("remote", []), routing=routing)
    routed = await router.inline(REQUEST)
    assert (routed.endpoint, routed.reason) == ("local", "offline")


async def test_with_a_remote_the_keystroke_deadline_stays() -> None:
    """The local model is only a hedge here: past 300 ms the keystroke gets nothing."""
    calls: list[str] = []
    hung = StandIn("remote", calls, delay=lambda request: 5.0)
    router = router_with(slow_local(calls), hung)
    started = asyncio.get_running_loop().time()
    routed = await router.inline(REQUEST)
    elapsed = asyncio.get_running_loop().time() - started
    assert (routed.text, routed.timed_out) == ("", True)
    assert elapsed < SLOW_LOCAL_S
    assert calls == ["remote", "local"]  # hedged to the local model, which had no time


async def test_the_local_budget_is_never_shorter_than_the_keystroke_deadline() -> None:
    routing = RoutingConfig(inline_deadline_ms=5000, hedge_after_ms=100, offline="never")
    config = Config(routing=routing, local=LocalConfig(deadline_ms=200))
    router = Router(
        config, remote_factory=lambda c: slow_local([]), local_factory=lambda c: slow_local([])
    )
    routed = await router.inline(REQUEST, local_only=Reason.SENSITIVE)
    assert routed.endpoint == "local"


class LoadingModel(LocalModel):
    """A local model that finishes loading after `load_s`, then answers at once."""

    def __init__(self, load_s: float) -> None:
        self._state = LocalState.UNLOADED
        self.load_s = load_s

    @property
    def state(self) -> LocalState:
        return self._state

    def start_loading(self) -> None:
        if self._state is LocalState.UNLOADED:
            self._state = LocalState.LOADING

    async def complete(
        self, request: CompletionRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        self.start_loading()
        await asyncio.sleep(self.load_s)
        self._state = LocalState.READY
        yield "return a + b\n"

    async def chat(
        self, request: ChatRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        raise NotImplementedError
        yield ""


async def test_a_model_still_loading_is_waited_for_within_the_local_budget() -> None:
    model = LoadingModel(load_s=0.5)
    routed = await router_with(model).inline(REQUEST, local_only=Reason.SENSITIVE)
    assert (routed.text, routed.endpoint) == ("return a + b\n", "local")


def test_generation_stops_once_the_text_leaves_the_cursor_block() -> None:
    """A blank line, then code indented less than the cursor: post-processing cuts there, so
    the model stops there instead of spending the deadline."""
    from lsp_server.routing.inline_race import _left_the_block

    assert _left_the_block(" side ** 2\n\ndef area_of_rectangle(", indent=4)
    assert not _left_the_block(" a\n\n    b = 1\n", indent=4)  # still inside the body
    assert not _left_the_block("x\nelse:\n  y\n", indent=4)  # no blank line: the block goes on
    assert not _left_the_block("x\n\ny = 1\n", indent=0)  # at top level nothing is left
