"""Streamed chats relayed: `gateway-ls gateway` (a subprocess on 127.0.0.1) in front of the
suite's FakeLLMServer of kind `openai`.

What is checked: a streamed chat reaches the client as the upstream's own bytes (its usage event
only when the client asked for usage, its `model` the endpoint's name); the client is charged,
and the endpoint's statistics count, the upstream's reported usage, not an estimate; a usage
event the upstream did not send is written at the end when asked; a failure before the first
token still fails over to the next endpoint; a client that leaves mid-relay stops the upstream
call and its attempt is settled once; a kind whose stream reports no usage takes the rewriting
path; `/metrics` counts each path. Tool calls relayed are checked in `test_agent_chat.py`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.config_text import LOCAL_OFF
from tests.support.gateway_process import Gateway, running_gateway
from tests.support.lsp_session import endpoint_toml
from tests.support.metrics_scrape import scrape, value

TEXT = "Hello there, friend."  # 20 characters, one a chunk: 20 events, 5 tokens as counted
ASK = [{"role": "user", "content": "Say hello."}]
WITH_USAGE = {"include_usage": True}


@pytest.fixture(scope="module")
def up() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(Behaviour(text=TEXT, chunk_chars=1), name="up") as server:
        yield server


@pytest.fixture(scope="module")
def broken() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(Behaviour(fault="status:500"), name="broken") as server:
        yield server


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory, up: FakeLLMServer, broken: FakeLLMServer
) -> Iterator[Gateway]:
    config = (
        LOCAL_OFF
        + endpoint_toml("broken", broken.base_url, fim=False, roles='["agent", "refactor"]')
        + endpoint_toml("up", up.base_url, fim=False, roles='["agent", "refactor"]')
        # The same server as a kind whose stream reports no usage: its answers are rewritten.
        + f'[[endpoints]]\nname = "ollama"\nkind = "ollama"\nbase_url = "{up.base_url}"\n'
        + 'model = "fake-model"\nroles = ["agent"]\n'
    )
    with running_gateway(tmp_path_factory.mktemp("relay"), config) as running:
        yield running


@pytest.fixture(autouse=True)
def fresh_upstream(up: FakeLLMServer) -> None:
    up.quiet()
    up.behaviour = Behaviour(text=TEXT, chunk_chars=1)


def stream(gateway: Gateway, body: dict[str, Any]) -> httpx.Response:
    with (
        httpx.Client(timeout=30) as client,
        client.stream("POST", f"{gateway.base_url}/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200, response.read()
        response.read()
        return response


def asked_directly(up: FakeLLMServer) -> bytes:
    """The upstream's answer to what the gateway last sent it, asked again without the gateway."""
    sent = up.requests[-1].payload
    with (
        httpx.Client(timeout=30) as client,
        client.stream("POST", f"{up.base_url}/chat/completions", json=sent) as response,
    ):
        return response.read()


def events(body: bytes) -> list[bytes]:
    return [event for event in body.split(b"\n\n") if event]


def as_relayed(relayed: bytes, direct: bytes, endpoint: str = "up") -> bytes:
    """`direct` as the gateway relays it: with the id and creation time of `relayed` (each
    answer has its own), and the endpoint's name as its `model`."""
    first, again = (json.loads(events(b)[0].removeprefix(b"data: ")) for b in (relayed, direct))
    return (
        direct.replace(again["id"].encode(), first["id"].encode())
        .replace(b'"created": %d' % again["created"], b'"created": %d' % first["created"])
        .replace(b'"model": "%s"' % again["model"].encode(), b'"model":"%s"' % endpoint.encode())
    )


def endpoint_status(gateway: Gateway, name: str) -> dict[str, Any]:
    status = httpx.get(f"{gateway.base_url}/gateway-ls/status", timeout=10).json()
    return next(e for e in status["endpoints"] if e["name"] == name)


def streamed_answers(gateway: Gateway, path: str) -> float:
    return value(scrape(gateway), "gateway_ls_streamed_answers_total", path=path)


def test_a_relayed_stream_is_the_upstreams_bytes_usage_included_when_asked(
    gateway: Gateway, up: FakeLLMServer
) -> None:
    before = streamed_answers(gateway, "relay")
    body = {
        "model": "up",
        "messages": ASK,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    relayed = stream(gateway, body)
    direct = asked_directly(up)
    assert relayed.content == as_relayed(relayed.content, direct)
    assert relayed.headers["x-gateway-ls-endpoint"] == "up"
    assert b'"choices": []' in events(relayed.content)[-2]  # the usage event, then [DONE]
    assert streamed_answers(gateway, "relay") == before + 1


def test_without_asking_for_usage_the_client_gets_every_event_but_the_usage_one(
    gateway: Gateway, up: FakeLLMServer
) -> None:
    relayed = stream(gateway, {"model": "up", "messages": ASK, "stream": True})
    assert up.requests[-1].payload["stream_options"] == {"include_usage": True}  # for metering
    direct = asked_directly(up)
    expected = [e for e in events(as_relayed(relayed.content, direct)) if b'"usage"' not in e]
    assert events(relayed.content) == expected
    assert all(b'"usage"' not in event for event in events(relayed.content))


def test_the_upstreams_reported_usage_is_what_counts(gateway: Gateway) -> None:
    before = endpoint_status(gateway, "up")["tokens"]
    stream(gateway, {"model": "up", "messages": ASK, "stream": True})
    # 5 tokens as the upstream counted them; an estimate would be one a streamed event, 22.
    assert endpoint_status(gateway, "up")["tokens"] == before + 5


def test_usage_the_upstream_did_not_send_is_written_at_the_end_when_asked(
    gateway: Gateway, up: FakeLLMServer
) -> None:
    up.behaviour = Behaviour(text=TEXT, chunk_chars=1, report_usage=False)
    body = {
        "model": "up",
        "messages": ASK,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    relayed = events(stream(gateway, body).content)
    first, usage = (json.loads(e.removeprefix(b"data: ")) for e in (relayed[0], relayed[-2]))
    assert relayed[-1] == b"data: [DONE]"
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] >= 20
    assert (usage["id"], usage["model"]) == (first["id"], first["model"])


def test_an_endpoint_failing_before_its_first_token_is_replaced(
    gateway: Gateway, up: FakeLLMServer, broken: FakeLLMServer
) -> None:
    broken.quiet()
    # `reasoning`: the configured order, `broken` first.
    relayed = stream(gateway, {"model": "reasoning", "messages": ASK, "stream": True})
    assert broken.requests, "the first endpoint was asked"
    assert relayed.headers["x-gateway-ls-endpoint"] == "up"
    text = "".join(
        json.loads(e.removeprefix(b"data: "))["choices"][0]["delta"].get("content") or ""
        for e in events(relayed.content)[:-1]
    )
    assert text == TEXT


def test_a_client_leaving_mid_relay_stops_the_upstream_and_settles_its_attempt_once(
    gateway: Gateway, up: FakeLLMServer
) -> None:
    up.behaviour = Behaviour(text="x = 1\n" * 200, chunk_delay_s=0.05, chunk_chars=6)
    before = endpoint_status(gateway, "up")
    body = {"model": "up", "messages": ASK, "stream": True}
    with (
        httpx.Client(timeout=30) as client,
        client.stream("POST", f"{gateway.base_url}/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200
        next(response.iter_lines())  # the first event arrived; now hang up
    assert up.wait_for(lambda s: s.disconnects >= 1, timeout_s=10)
    assert up.completed_streams == 0
    deadline = time.monotonic() + 10
    while endpoint_status(gateway, "up")["requests"] == before["requests"]:
        assert time.monotonic() < deadline, "the attempt was never settled"
        time.sleep(0.05)
    time.sleep(0.3)  # a second settling would show by now
    after = endpoint_status(gateway, "up")
    assert after["requests"] == before["requests"] + 1
    assert after["errors"] == before["errors"]  # the client's leaving is no fault of the endpoint


def test_a_kind_without_usage_in_its_stream_is_rewritten_under_the_endpoints_name(
    gateway: Gateway, up: FakeLLMServer
) -> None:
    before = streamed_answers(gateway, "rewrite")
    rewritten = events(
        stream(gateway, {"model": "ollama", "messages": ASK, "stream": True}).content
    )
    assert "stream_options" not in up.requests[-1].payload
    assert json.loads(rewritten[0].removeprefix(b"data: "))["model"] == "ollama"
    assert streamed_answers(gateway, "rewrite") == before + 1


def test_every_event_names_the_endpoint_those_the_relay_writes_too(
    gateway: Gateway, up: FakeLLMServer
) -> None:
    # A call that writes no arguments: the relay adds its `"{}"` in an event of its own.
    up.behaviour = Behaviour(text="", tool_calls=({"name": "noop", "arguments": ""},))
    tool = {"type": "function", "function": {"name": "noop", "parameters": {"type": "object"}}}
    body = {"model": "up", "messages": ASK, "tools": [tool], "stream": True}
    payloads = [
        json.loads(e.removeprefix(b"data: ")) for e in events(stream(gateway, body).content)[:-1]
    ]
    calls = [c for p in payloads for c in p["choices"][0]["delta"].get("tool_calls", [])]
    assert calls[0]["function"]["name"] == "noop" and calls[-1]["function"]["arguments"] == "{}"
    assert {p["model"] for p in payloads} == {"up"}
    assert len({p["id"] for p in payloads}) == 1
