"""End to end over stdio: the real server routes between loopback endpoints and reports it."""

from __future__ import annotations

from pathlib import Path

from pytest_lsp import LanguageClient

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.config_text import LOCAL_OFF
from tests.support.lsp_session import (
    endpoint_toml,
    inline_completion,
    lsp_session,
    open_document,
    server_status,
)

HEDGING = "[routing]\ninline_deadline_ms = 5000\nhedge_after_ms = 150\n"
PRICE = "price_per_mtok = { input = 1000.0, output = 2000.0 }"


def routing_config(*servers: tuple[str, FakeLLMServer]) -> str:
    endpoints = "".join(endpoint_toml(name, s.base_url, extra=PRICE) for name, s in servers)
    return HEDGING + LOCAL_OFF + endpoints


async def suggest_in_new_document(client: LanguageClient, tmp_path: Path, index: int) -> str:
    """One inline suggestion in a document of its own, so no answer comes from the cache."""
    uri = (tmp_path / f"f{index}.py").as_uri()
    open_document(client, uri, f"def f{index}(a, b):\n    \n")
    result = await inline_completion(client, uri, 1, 4)
    assert result is not None and result.items
    text = result.items[0].insert_text
    assert isinstance(text, str)
    return text


async def test_status_shows_traffic_moving_to_the_fast_endpoint(tmp_path: Path) -> None:
    with (
        FakeLLMServer(Behaviour(text="return 'slow'\n", latency_s=0.6), name="slow") as slow,
        FakeLLMServer(Behaviour(text="return 'fast'\n"), name="fast") as fast,
    ):
        config = routing_config(("slow", slow), ("fast", fast))  # cold start asks slow first
        async with lsp_session(tmp_path, config_text=config) as client:
            answers = [await suggest_in_new_document(client, tmp_path, i) for i in range(5)]
            assert answers == ["return 'fast'"] * 5

            report = await server_status(client)
            decisions = [d for d in report["decisions"] if d["kind"] == "inline"]
            assert [d["endpoint"] for d in decisions] == ["fast"] * 5
            # Nothing measured yet: the unmeasured second endpoint rides beside the first.
            assert decisions[0]["reason"] == "explore" and decisions[0]["hedged"]
            assert {d["reason"] for d in decisions[1:]} == {"fastest"}
            assert all(d["tokens"] > 0 and d["cost_usd"] > 0 for d in decisions)
            assert all(d["uri"].endswith(f"f{i}.py") for i, d in enumerate(decisions))

            endpoints = {e["name"]: e for e in report["endpoints"]}
            assert endpoints["fast"]["wins"] == 5 and endpoints["fast"]["hedges"] == 1
            assert endpoints["slow"]["wins"] == 0
            assert endpoints["fast"]["health"] == endpoints["slow"]["health"] == "healthy"
            assert report["inline_requests"] == 5
            # Tried first, then ranked below the fast one: asked again only beside it (as an
            # exploration, or a hedge on a hiccup of this machine), never as the primary.
            assert (
                len([r for r in slow.requests if r.method == "POST"]) == report["hedged_requests"]
            )


async def test_a_hung_endpoint_is_hedged_and_its_request_cancelled(tmp_path: Path) -> None:
    with (
        FakeLLMServer(Behaviour(text="never", fault="hang_before_headers"), name="hung") as hung,
        FakeLLMServer(Behaviour(text="return a + b\n"), name="spare") as spare,
    ):
        config = routing_config(("hung", hung), ("spare", spare))
        async with lsp_session(tmp_path, config_text=config) as client:
            assert await suggest_in_new_document(client, tmp_path, 0) == "return a + b"
            assert await hung.wait_for_async(lambda s: s.disconnects >= 1, timeout_s=10)
            assert hung.open_streams == 0

            report = await server_status(client)
            decision = report["decisions"][-1]
            assert decision["endpoint"] == "spare"
            assert decision["reason"] in ("hedge-win", "explore")
            assert decision["hedged"] and decision["latency_ms"] < 5000
            assert report["hedged_requests"] == 1
            assert len(spare.requests) == 1
