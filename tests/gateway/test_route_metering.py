"""End to end: the next-edit routes and the Responses pass-through are metered as completions
and chat are, across two real gateways sharing a real redis-server.

Decided behaviour checked here: Mercury's `POST /v1/edit/completions` and a Zeta prompt on
`POST /v1/completions` count against one request rate together, exactly across both gateways,
with OpenAI's 429 and the `x-ratelimit-*` headers on every answer; their tokens are reserved up
front (the prompt and the most the rewritten region may take) and settled to what the endpoint
used, so concurrent edits never spend past a budget; a client's requests in flight are limited
on them too. A request passed through to an endpoint that speaks the Responses API is charged
with the usage that endpoint reported. Every generation route charges the client the bearer
check named.
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from bench.harness.redis_server import RedisServer
from bench.harness.scripted_agent import ScriptedAgentServer, ToolScript, call_tool
from tests.support.edit_prompts import (
    KEY_ENV,
    RENAMED,
    continue_user_message,
    zed_clean,
    zeta_prompt,
)
from tests.support.gateway_process import Gateway, running_gateway
from tests.support.lsp_session import endpoint_toml
from tests.support.mercury_upstream import finish_the_rename
from tests.support.team_ledger import PRICE, TOKENS, auth, settled

ENV = {**TOKENS, **KEY_ENV}
ROUTING = "[routing]\nedit_deadline_ms = 5000\n[local]\nenabled = false\n"


def edit_config(redis_url: str, mercury: FakeLLMServer, limits: str) -> str:
    tokens = ", ".join(f'"{name}"' for name in TOKENS)
    return (
        ROUTING
        + f'[gateway]\nstate_url = "{redis_url}"\ntoken_env = [{tokens}]\n'
        + '[[endpoints]]\nname = "mercury"\nkind = "inception"\n'
        + f'base_url = "{mercury.provider_base_url("inception")}"\n'
        + 'model = "mercury-edit-2"\nroles = ["edit"]\ntimeout_ms = 10000\n'
        + PRICE
        + limits
    )


def mercury_edit(gateway: Gateway, client: str) -> httpx.Response:
    body = {
        "model": "mercury-coder",
        "messages": [{"role": "user", "content": continue_user_message()}],
        "max_tokens": 256,
    }
    return httpx.post(
        f"{gateway.base_url}/edit/completions", json=body, headers=auth(client), timeout=20
    )


def zeta_edit(gateway: Gateway, client: str) -> httpx.Response:
    body = {"model": "zeta", "prompt": zeta_prompt(), "max_tokens": 256}
    return httpx.post(
        f"{gateway.base_url}/completions", json=body, headers=auth(client), timeout=20
    )


def either_edit(gateways: tuple[Gateway, Gateway], client: str, i: int) -> httpx.Response:
    """The i-th edit: Mercury's and Zeta's shapes in turn, on each gateway in turn."""
    shape = mercury_edit if i % 4 < 2 else zeta_edit
    return shape(gateways[i % 2], client)


@pytest.fixture
def mercury() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(Behaviour(text=finish_the_rename("value", "amount")), name="m") as server:
        yield server


@pytest.fixture
def two_gateways(
    tmp_path: Path,
    redis_server: RedisServer,
    mercury: FakeLLMServer,
    request: pytest.FixtureRequest,
) -> Iterator[tuple[Gateway, Gateway]]:
    config = edit_config(redis_server.url, mercury, getattr(request, "param", ""))
    with (
        running_gateway(tmp_path / "a", config, env=ENV) as first,
        running_gateway(tmp_path / "b", config, env=ENV) as second,
    ):
        yield first, second


@pytest.mark.parametrize(
    "two_gateways", ["[gateway.clients.ALICE_TOKEN]\nrpm = 4\n"], indirect=True
)
def test_edits_in_both_shapes_count_against_one_rate_across_both_gateways(
    two_gateways: tuple[Gateway, Gateway], redis_server: RedisServer
) -> None:
    with concurrent.futures.ThreadPoolExecutor(max_workers=10) as pool:
        answers = list(pool.map(lambda i: either_edit(two_gateways, "ALICE_TOKEN", i), range(12)))
        untouched = list(pool.map(lambda i: either_edit(two_gateways, "BOB_TOKEN", i), range(8)))
    assert sorted(a.status_code for a in answers) == [200] * 4 + [429] * 8
    for answer in answers:
        assert answer.headers["x-ratelimit-limit-requests"] == "4"
        assert int(answer.headers["x-ratelimit-remaining-requests"]) in range(4)
        if answer.status_code == 429:
            error = answer.json()["error"]
            assert (error["code"], error["type"]) == ("rate_limit_exceeded", "requests")
            assert 1 <= int(answer.headers["retry-after"]) <= 15
    assert [a.status_code for a in untouched] == [200] * 8
    assert all("x-ratelimit-limit-requests" not in a.headers for a in untouched)
    first = untouched[0].json()["choices"][0]["message"]["content"]
    assert first == f"```\n{RENAMED}\n```"
    assert zed_clean(untouched[2].json()["choices"][0]["text"]) == RENAMED
    for client, count in (("ALICE_TOKEN", 4), ("BOB_TOKEN", 8)):
        for entry in settled(redis_server.url, client, count):
            assert (entry["endpoint"], entry["class"]) == ("mercury", "edit")
            assert int(entry["in"]) > 0 and int(entry["out"]) > 0, entry
            assert int(entry["micros"]) == 10 * (int(entry["in"]) + int(entry["out"]))


@pytest.mark.parametrize(
    "two_gateways", ["[gateway.clients.BOB_TOKEN]\nbudget_usd = 0.01\n"], indirect=True
)
def test_concurrent_edits_never_spend_past_a_budget(
    two_gateways: tuple[Gateway, Gateway], redis_server: RedisServer, mercury: FakeLLMServer
) -> None:
    mercury.behaviour = Behaviour(text=finish_the_rename("value", "amount"), latency_s=0.2)
    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(lambda i: either_edit(two_gateways, "BOB_TOKEN", i), range(40)))
    admitted = [a for a in answers if a.status_code == 200]
    refused = [a for a in answers if a.status_code == 429]
    assert admitted and refused and len(admitted) + len(refused) == 40
    assert refused[0].json()["error"]["code"] == "insufficient_quota"
    entries = settled(redis_server.url, "BOB_TOKEN", len(admitted))
    spent = sum(int(e["micros"]) for e in entries)
    assert 0 < spent <= 10_000
    today = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    store = redis.Redis.from_url(redis_server.url)
    held = int(store.get(f"gateway-ls:v1:limits:budget:BOB_TOKEN:{today}") or 0)
    store.close()
    assert held == spent  # every reservation settled to what the ledger charged


def test_an_edit_in_flight_holds_the_clients_concurrency(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    slow = Behaviour(text=finish_the_rename("value", "amount"), latency_s=1.5)
    limits = "[gateway.clients.CI_TOKEN]\nmax_concurrent = 1\n"
    with FakeLLMServer(slow, name="slow") as server:
        config = edit_config(redis_server.url, server, limits)
        with (
            running_gateway(tmp_path, config, env=ENV) as gateway,
            concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool,
        ):
            held = pool.submit(mercury_edit, gateway, "CI_TOKEN")
            deadline = time.monotonic() + 10
            while not any(r.path.endswith("/edit/completions") for r in server.requests):
                assert not held.done(), held.result().text
                # until the first edit is with the upstream
                assert time.monotonic() < deadline, "the first edit never reached the upstream"
                time.sleep(0.01)
            refused = zeta_edit(gateway, "CI_TOKEN")
            assert held.result().status_code == 200, held.result().text
            after = zeta_edit(gateway, "CI_TOKEN")
    assert refused.status_code == 429
    assert refused.json()["error"]["type"] == "concurrency"
    assert after.status_code == 200


def test_a_passed_through_responses_request_is_charged_with_the_upstreams_usage(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with ScriptedAgentServer(ToolScript(call_tool("get_weather")), name="native") as native:
        config = (
            ROUTING
            + f'[gateway]\nstate_url = "{redis_server.url}"\ntoken_env = ["CI_TOKEN"]\n'
            + endpoint_toml(
                "native",
                native.base_url,
                fim=False,
                roles='["agent"]',
                extra='responses_path = "/responses"\n' + PRICE,
            )
        )
        with running_gateway(tmp_path, config, env=TOKENS) as gateway:
            for stream in (False, True):
                answer = httpx.post(
                    f"{gateway.base_url}/responses",
                    json={"model": "native", "input": "Say hi.", "stream": stream},
                    headers=auth("CI_TOKEN"),
                    timeout=20,
                )
                assert answer.status_code == 200, answer.text
                assert answer.headers["x-gateway-ls-endpoint"] == "native"
            entries = settled(redis_server.url, "CI_TOKEN", 2)
    assert [r.path for r in native.requests] == ["/v1/responses"] * 2
    # The scripted endpoint reports len(json input) // 4 tokens in, and its answer's out.
    expected_in, expected_out = len('"Say hi."') // 4, len("The tool said: ") // 4
    for entry in entries:
        assert (entry["endpoint"], entry["class"]) == ("native", "endpoint")
        assert (int(entry["in"]), int(entry["out"])) == (expected_in, expected_out)
        assert int(entry["micros"]) == 10 * (expected_in + expected_out)


def test_every_generation_route_charges_the_client_the_bearer_check_named(
    tmp_path: Path, mercury: FakeLLMServer
) -> None:
    with FakeLLMServer(Behaviour(text="return a + b\n"), name="up") as up:
        config = edit_config("", mercury, "").replace('state_url = ""\n', "") + endpoint_toml(
            "up", up.base_url, roles='["inline", "agent"]', extra=PRICE
        )
        with running_gateway(tmp_path, config, env=ENV) as gateway:
            url, alice = gateway.base_url, auth("ALICE_TOKEN")
            answers = [
                httpx.post(f"{url}/completions", json={"prompt": "def f():\n"}, headers=alice),
                httpx.post(
                    f"{url}/chat/completions",
                    json={"messages": [{"role": "user", "content": "Say hi."}]},
                    headers=alice,
                ),
                httpx.post(f"{url}/responses", json={"input": "Say hi."}, headers=alice),
                mercury_edit(gateway, "ALICE_TOKEN"),
                zeta_edit(gateway, "ALICE_TOKEN"),
            ]
            assert [a.status_code for a in answers] == [200] * 5, [a.text for a in answers]
            deadline = time.monotonic() + 10
            while True:  # the last answer's charge may still be on its way
                usage = httpx.get(f"{url}/gateway-ls/usage", headers=auth("BOB_TOKEN")).json()
                rows = {(r["client"], r["endpoint"]): r["requests"] for r in usage["rows"]}
                if sum(rows.values()) >= 5 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
    assert usage["source"] == "local"
    assert rows == {("ALICE_TOKEN", "up"): 3, ("ALICE_TOKEN", "mercury"): 2}
