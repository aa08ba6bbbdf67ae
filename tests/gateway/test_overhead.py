"""End to end: every answer of a real gateway says how long the gateway itself took
(`X-Gateway-LS-Overhead-Ms`), without the upstream's time, and `/metrics` has the whole figure
as a histogram, for streams too."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.gateway_process import Gateway, running_gateway
from tests.support.lsp_session import endpoint_toml
from tests.support.metrics_scrape import scrape, value
from tests.support.team_ledger import TOKENS, auth

UPSTREAM_S = 1.5  # before the upstream's headers; its stream then takes as long again
HEADER = "x-gateway-ls-overhead-ms"
ROUTING = "[local]\nenabled = false\n"


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeLLMServer]:
    behaviour = Behaviour(text="Hello there, friend.", latency_s=UPSTREAM_S)
    with FakeLLMServer(behaviour, name="up") as server:
        yield server


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, upstream: FakeLLMServer) -> Iterator[Gateway]:
    config = (
        ROUTING
        + f"[gateway]\ntoken_env = {list(TOKENS)!r}\nmetrics_public = true\n".replace("'", '"')
        + endpoint_toml("up", upstream.base_url, roles='["inline", "agent"]')
        + "[gateway.clients.ALICE_TOKEN]\nrpm = 1\n"
    )
    with running_gateway(tmp_path_factory.mktemp("gateway"), config, env=TOKENS) as running:
        yield running


def chat(gateway: Gateway, client: str, **fields: object) -> httpx.Response:
    body = {"model": "up", "messages": [{"role": "user", "content": "Say hi."}], **fields}
    return httpx.post(
        f"{gateway.base_url}/chat/completions", json=body, headers=auth(client), timeout=30
    )


def overhead_ms(answer: httpx.Response) -> float:
    figure = float(answer.headers[HEADER])
    assert figure >= 0
    return figure


def test_an_answer_says_what_the_gateway_added_without_the_upstreams_time(
    gateway: Gateway,
) -> None:
    started = time.monotonic()
    answer = chat(gateway, "BOB_TOKEN")
    took_ms = (time.monotonic() - started) * 1000
    assert answer.status_code == 200
    assert took_ms > UPSTREAM_S * 1000
    assert overhead_ms(answer) < took_ms - UPSTREAM_S * 1000


def test_a_stream_says_the_time_before_the_upstream_and_metrics_the_whole_figure(
    gateway: Gateway, upstream: FakeLLMServer
) -> None:
    upstream.behaviour = Behaviour(
        text="Hello there, friend.", latency_s=UPSTREAM_S, chunk_delay_s=UPSTREAM_S / 5
    )
    try:
        before = scrape(gateway)
        with httpx.stream(
            "POST",
            f"{gateway.base_url}/chat/completions",
            json={
                "model": "up",
                "stream": True,
                "messages": [{"role": "user", "content": "Say hi."}],
            },
            headers=auth("BOB_TOKEN"),
            timeout=30,
        ) as streamed:
            assert streamed.status_code == 200
            header = overhead_ms(streamed)
            body = b"".join(streamed.iter_bytes())
        assert body.endswith(b"data: [DONE]\n\n")
        after = scrape(gateway)
    finally:
        upstream.behaviour = Behaviour(text="Hello there, friend.", latency_s=UPSTREAM_S)
    assert header < UPSTREAM_S * 1000
    chat_labels = {"gen_ai_operation_name": "chat"}
    count = "gateway_ls_overhead_seconds_count"
    total = "gateway_ls_overhead_seconds_sum"
    assert value(after, count, **chat_labels) - value(before, count, **chat_labels) == 1
    whole_s = value(after, total, **chat_labels) - value(before, total, **chat_labels)
    # The whole figure holds the part before the upstream and the end, not the stream's time.
    assert header / 1000 <= whole_s < 2 * UPSTREAM_S


def test_refusals_and_the_small_routes_carry_the_figure_too(gateway: Gateway) -> None:
    assert overhead_ms(httpx.get(f"{gateway.base_url}/models")) >= 0  # no token: 401
    assert overhead_ms(httpx.get(f"{gateway.base_url}/models", headers=auth("BOB_TOKEN"))) >= 0
    assert overhead_ms(httpx.get(f"{gateway.root_url}/healthz")) >= 0
    first, second = chat(gateway, "ALICE_TOKEN"), chat(gateway, "ALICE_TOKEN")
    assert (first.status_code, second.status_code) == (200, 429)
    # Refused before anything was asked: all of its time was the gateway's.
    assert overhead_ms(second) < UPSTREAM_S * 1000


def test_the_figure_is_a_histogram_in_metrics(gateway: Gateway) -> None:
    before = scrape(gateway)
    assert chat(gateway, "BOB_TOKEN").status_code == 200
    after = scrape(gateway)
    every = {"gen_ai_operation_name": "chat", "le": "+Inf"}
    moved = value(after, "gateway_ls_overhead_seconds_bucket", **every) - value(
        before, "gateway_ls_overhead_seconds_bucket", **every
    )
    assert moved == 1
