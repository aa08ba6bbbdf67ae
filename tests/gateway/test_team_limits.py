"""End to end: per-client limits and budgets across two real gateways sharing a real redis-server.

Decided behaviour checked here: a client limited to N requests a minute gets exactly N through
both gateways together, however the requests are spread and raced, and the rest get OpenAI's
429 with `Retry-After` and the `x-ratelimit-*` headers; a client without limits is untouched.
Concurrent requests against a small budget never spend past it, and what Redis holds for the
budget is exactly what the ledger charged. Every answer is charged, streamed or not, with the
upstream's usage and without it, and a client that leaves mid-stream pays for what streamed.
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import redis

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from bench.harness.redis_server import RedisServer
from lsp_server.limits.shared_store import LEASE_S
from tests.support.gateway_process import Gateway, running_gateway
from tests.support.lsp_session import endpoint_toml, server_env
from tests.support.metrics_scrape import scrape, value
from tests.support.team_ledger import PRICE, TOKENS, auth, settled

ROUTING = "[routing]\ninline_deadline_ms = 5000\nhedge_after_ms = 4000\n[local]\nenabled = false\n"
PREFIX = "def add(a, b):\n    "
SUFFIX = "\n\nprint(add(1, 2))\n"


def team_config(redis_url: str, *servers: FakeLLMServer, limits: str, gateway: str = "") -> str:
    endpoints = "".join(
        endpoint_toml(s.name, s.base_url, fim=True, roles='["inline", "agent"]', extra=PRICE)
        for s in servers
    )
    head = (
        f'[gateway]\nstate_url = "{redis_url}"\ntoken_env = {list(TOKENS)!r}\n'.replace("'", '"')
        + gateway
    )
    return ROUTING + head + endpoints + limits


def complete(gateway: Gateway, client: str) -> httpx.Response:
    return httpx.post(
        f"{gateway.base_url}/completions",
        json={"model": "auto", "prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 16},
        headers=auth(client),
        timeout=20,
    )


def chat(gateway: Gateway, client: str, *, model: str = "auto", **fields: object) -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "Say hi."}], **fields}
    return httpx.post(
        f"{gateway.base_url}/chat/completions", json=body, headers=auth(client), timeout=20
    )


@pytest.fixture
def upstream() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(Behaviour(text="return a + b\n", latency_s=0.05), name="up") as server:
        yield server


@pytest.fixture
def two_gateways(
    tmp_path: Path,
    redis_server: RedisServer,
    upstream: FakeLLMServer,
    request: pytest.FixtureRequest,
) -> Iterator[tuple[Gateway, Gateway]]:
    limits = getattr(request, "param", "")
    config = team_config(redis_server.url, upstream, limits=limits)
    with (
        running_gateway(tmp_path / "a", config, env=TOKENS) as first,
        running_gateway(tmp_path / "b", config, env=TOKENS) as second,
    ):
        yield first, second


RPM_5 = "[gateway.clients.ALICE_TOKEN]\nrpm = 5\n"


@pytest.mark.parametrize("two_gateways", [RPM_5], indirect=True)
def test_a_client_limited_to_n_a_minute_gets_exactly_n_across_both_gateways(
    two_gateways: tuple[Gateway, Gateway],
) -> None:
    gateways = two_gateways
    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(lambda i: complete(gateways[i % 2], "ALICE_TOKEN"), range(16)))
        untouched = list(pool.map(lambda i: complete(gateways[i % 2], "BOB_TOKEN"), range(16)))
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] * 5 + [429] * 11
    for answer in answers:
        assert answer.headers["x-ratelimit-limit-requests"] == "5"
        assert int(answer.headers["x-ratelimit-remaining-requests"]) in range(5)
        assert answer.headers["x-ratelimit-reset-requests"].endswith("s")
        if answer.status_code == 429:
            error = answer.json()["error"]
            assert (error["code"], error["type"]) == ("rate_limit_exceeded", "requests")
            # The next request is allowed 12 s after the earliest (60 s / 5).
            assert 1 <= int(answer.headers["retry-after"]) <= 12
    assert all(a.status_code == 200 for a in untouched)
    assert all("x-ratelimit-limit-requests" not in a.headers for a in untouched)


@pytest.mark.parametrize(
    "two_gateways", ["[gateway.clients.BOB_TOKEN]\nbudget_usd = 0.002\n"], indirect=True
)
def test_concurrent_requests_never_spend_past_a_budget(
    two_gateways: tuple[Gateway, Gateway], redis_server: RedisServer, upstream: FakeLLMServer
) -> None:
    upstream.behaviour = Behaviour(text="Hello there, friend.", latency_s=0.3)
    gateways = two_gateways
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(
            pool.map(lambda i: chat(gateways[i % 2], "BOB_TOKEN", max_tokens=20), range(40))
        )
    admitted = [a for a in answers if a.status_code == 200]
    refused = [a for a in answers if a.status_code == 429]
    assert admitted and refused and len(admitted) + len(refused) == 40
    error = refused[0].json()["error"]
    assert (error["code"], error["type"]) == ("insufficient_quota", "insufficient_quota")
    assert "UTC" in error["message"] and "day" in error["message"]
    entries = settled(redis_server.url, "BOB_TOKEN", len(admitted))
    spent = sum(int(e["micros"]) for e in entries)
    assert 0 < spent <= 2000
    today = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    store = redis.Redis.from_url(redis_server.url)
    held = int(store.get(f"gateway-ls:v1:limits:budget:BOB_TOKEN:{today}") or 0)
    store.close()
    assert held == spent  # every reservation settled to what the ledger charged


# 200 characters: the upstream counts 50 tokens; the answer is 5 tokens, all of `max_tokens`.
BURST_PROMPT = "Summarize: " + "the quick brown fox jumps over the lazy dog. " * 4 + "x" * 9
ANSWER_MICROS = (50 + 5) * 10


@pytest.mark.parametrize(
    "two_gateways",
    [f"[gateway.clients.BOB_TOKEN]\nbudget_usd = {10 * ANSWER_MICROS / 1e6}\n"],
    indirect=True,
)
def test_a_burst_against_a_budget_that_fits_ten_answers_admits_eight_to_ten(
    two_gateways: tuple[Gateway, Gateway], redis_server: RedisServer, upstream: FakeLLMServer
) -> None:
    """Reservations at the answering endpoint's price and the prompt as the upstream counts it
    (each gateway has seen one answer of that endpoint before): most of the budget is used,
    none beyond it. (An admission that waits for others to settle: `tests/limits`.)"""
    assert len(BURST_PROMPT) == 200
    gateways = two_gateways

    def ask(i: int, client: str = "BOB_TOKEN") -> httpx.Response:
        body = {"model": "auto", "messages": [{"role": "user", "content": BURST_PROMPT}]}
        return httpx.post(
            f"{gateways[i % 2].base_url}/chat/completions",
            json={**body, "max_tokens": 5},
            headers=auth(client),
            timeout=30,
        )

    assert [ask(i, "ALICE_TOKEN").status_code for i in range(2)] == [200, 200]
    # Slow enough that the whole burst arrives while the first answers are in flight.
    upstream.behaviour = Behaviour(text="Hello there, friend.", latency_s=1.0)
    with concurrent.futures.ThreadPoolExecutor(max_workers=40) as pool:
        answers = list(pool.map(ask, range(40)))
    admitted = [a for a in answers if a.status_code == 200]
    refused = [a for a in answers if a.status_code == 429]
    assert len(admitted) + len(refused) == 40, [a.text for a in answers if a not in refused]
    assert all(a.json()["error"]["code"] == "insufficient_quota" for a in refused)
    assert 8 <= len(admitted) <= 10
    entries = settled(redis_server.url, "BOB_TOKEN", len(admitted))
    spent = sum(int(e["micros"]) for e in entries)
    assert spent == len(admitted) * ANSWER_MICROS <= 10 * ANSWER_MICROS


def test_streamed_and_whole_answers_are_charged_with_and_without_upstream_usage(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    text = "Here is a longer answer, streamed in pieces. " * 4
    with (
        FakeLLMServer(Behaviour(text=text), name="counted") as counted,
        FakeLLMServer(Behaviour(text=text, report_usage=False), name="silent") as silent,
    ):
        config = team_config(redis_server.url, counted, silent, limits="")
        with running_gateway(tmp_path, config, env=TOKENS) as gateway:
            for server in (counted, silent):
                whole = chat(gateway, "CI_TOKEN", model=server.name)
                assert whole.status_code == 200, whole.text
                with httpx.stream(
                    "POST",
                    f"{gateway.base_url}/chat/completions",
                    json={
                        "model": server.name,
                        "messages": [{"role": "user", "content": "Say hi."}],
                        "stream": True,
                    },
                    headers=auth("CI_TOKEN"),
                    timeout=20,
                ) as streamed:
                    assert streamed.status_code == 200
                    assert "[DONE]" in streamed.read().decode()
            entries = settled(redis_server.url, "CI_TOKEN", 4)
    by_endpoint: dict[str, list[dict[str, Any]]] = {"counted": [], "silent": []}
    for entry in entries:
        by_endpoint[entry["endpoint"]].append(entry)
    for name, pair in by_endpoint.items():
        assert len(pair) == 2, name
        for entry in pair:
            assert int(entry["in"]) > 0 and int(entry["out"]) >= len(text) // 8, (name, entry)
            assert int(entry["micros"]) == 10 * (int(entry["in"]) + int(entry["out"]))
            assert entry["class"] == "endpoint"


def test_a_client_that_leaves_mid_stream_pays_for_what_streamed(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    slow = Behaviour(text="word " * 200, chunk_delay_s=0.02, chunk_chars=5)
    with FakeLLMServer(slow, name="slow") as server:
        config = team_config(redis_server.url, server, limits="")
        with (
            running_gateway(tmp_path, config, env=TOKENS) as gateway,
            httpx.stream(
                "POST",
                f"{gateway.base_url}/chat/completions",
                json={
                    "model": "slow",
                    "messages": [{"role": "user", "content": "Talk."}],
                    "stream": True,
                },
                headers=auth("ALICE_TOKEN"),
                timeout=20,
            ) as streamed,
        ):
            pieces = 0
            for line in streamed.iter_lines():
                pieces += line.startswith("data: ")
                if pieces >= 10:
                    break
        (entry,) = settled(redis_server.url, "ALICE_TOKEN", 1)
    assert entry["endpoint"] == "slow"
    assert int(entry["in"]) > 0 and 0 < int(entry["out"]) < 200
    assert int(entry["micros"]) > 0


@pytest.mark.parametrize(
    "two_gateways", ["[gateway.clients.ALICE_TOKEN]\nrpm = 6\n"], indirect=True
)
def test_the_openai_client_retries_after_retry_after_and_succeeds(
    two_gateways: tuple[Gateway, Gateway],
) -> None:
    first, second = two_gateways
    statuses = [complete(first if i % 2 else second, "ALICE_TOKEN").status_code for i in range(6)]
    assert statuses == [200] * 6  # a minute's allowance, spent: the next is 10 s away
    client = openai.OpenAI(
        base_url=first.base_url, api_key=TOKENS["ALICE_TOKEN"], max_retries=2, timeout=30
    )
    started = time.monotonic()
    raw = client.completions.with_raw_response.create(
        model="auto", prompt=PREFIX, suffix=SUFFIX, max_tokens=16
    )
    assert raw.retries_taken >= 1  # it was refused, waited as told, and got through
    assert raw.parse().choices[0].text
    assert time.monotonic() - started < 15
    assert raw.headers["x-ratelimit-limit-requests"] == "6"


def test_a_gateway_killed_mid_stream_gives_its_lease_back_within_the_lease_time(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    slow = Behaviour(text="word " * 400, chunk_delay_s=0.05, chunk_chars=5)
    limits = "[gateway.clients.ALICE_TOKEN]\nmax_concurrent = 1\n"
    with FakeLLMServer(slow, name="slow") as server:
        config = team_config(redis_server.url, server, limits=limits)
        with (
            running_gateway(tmp_path / "a", config, env=TOKENS) as doomed,
            running_gateway(tmp_path / "b", config, env=TOKENS) as survivor,
        ):
            with httpx.stream(
                "POST",
                f"{doomed.base_url}/chat/completions",
                json={
                    "model": "slow",
                    "messages": [{"role": "user", "content": "Talk."}],
                    "stream": True,
                },
                headers=auth("ALICE_TOKEN"),
                timeout=20,
            ) as streamed:
                lines = streamed.iter_lines()  # kept: a dropped iterator closes the stream
                next(lines)
                doomed.process.kill()  # SIGKILL: no settlement, no goodbye
                doomed.process.wait()
            killed_at = time.monotonic()
            refused = chat(survivor, "ALICE_TOKEN", model="slow", max_tokens=4)
            assert refused.status_code == 429
            assert refused.json()["error"]["type"] == "concurrency"
            while (
                answer := chat(survivor, "ALICE_TOKEN", model="slow", max_tokens=4)
            ).status_code == 429:
                assert time.monotonic() - killed_at < LEASE_S + 2, "the lease was never reclaimed"
                time.sleep(0.25)
            assert answer.status_code == 200
            assert chat(survivor, "BOB_TOKEN", model="slow", max_tokens=4).status_code == 200


def test_redis_restarted_no_request_fails_and_limits_resume(
    tmp_path: Path, redis_server: RedisServer, upstream: FakeLLMServer
) -> None:
    limits = "[gateway.clients.ALICE_TOKEN]\nrpm = 4\n[gateway.clients.CI_TOKEN]\nbudget_usd = 5\n"
    config = team_config(redis_server.url, upstream, limits=limits)
    with (
        running_gateway(tmp_path / "a", config, env=TOKENS) as first,
        running_gateway(tmp_path / "b", config, env=TOKENS) as second,
    ):
        gateways = (first, second)
        deadline = time.monotonic() + 10
        while not all(_limits_status(g)["gateways"] == 2 for g in gateways):
            assert time.monotonic() < deadline, "the gateways never counted each other"
            time.sleep(0.1)
        assert complete(first, "ALICE_TOKEN").status_code == 200
        redis_server.kill()
        # Down: unlimited clients flow; a limited one gets at most each gateway's share
        # (4 a minute over 2 gateways: 2, as the burst of each); budgets fail closed.
        flowing = [complete(gateways[i % 2], "BOB_TOKEN").status_code for i in range(10)]
        assert flowing == [200] * 10
        shared = [complete(gateways[i % 2], "ALICE_TOKEN").status_code for i in range(10)]
        assert shared.count(200) <= 4 and set(shared) <= {200, 429}
        closed = complete(first, "CI_TOKEN")
        assert closed.status_code == 503
        assert closed.json()["error"]["code"] == "budget_unavailable"
        for gateway in gateways:
            assert gateway.log().count("shared limits state is unreachable") == 1
        redis_server.start()
        deadline = time.monotonic() + 10
        while not all(_limits_status(g)["shared"] for g in gateways):
            assert time.monotonic() < deadline, "the gateways never found Redis again"
            time.sleep(0.1)
        assert complete(first, "CI_TOKEN").status_code == 200
        # Redis came back empty: the limit counts afresh, exactly, across both again.
        again = [complete(gateways[i % 2], "ALICE_TOKEN").status_code for i in range(8)]
        assert sorted(again) == [200] * 4 + [429] * 4
        for gateway in gateways:
            assert "shared limits state is back" in gateway.log()


def _limits_status(gateway: Gateway) -> dict[str, Any]:
    status = httpx.get(f"{gateway.base_url}/gateway-ls/status", headers=auth("BOB_TOKEN"))
    limits: dict[str, Any] = status.json()["limits"]
    return limits


@pytest.mark.parametrize(
    "two_gateways", ["[gateway.clients.ALICE_TOKEN]\nrpm = 2\n"], indirect=True
)
def test_metrics_parse_and_move_as_requests_are_made(
    two_gateways: tuple[Gateway, Gateway], upstream: FakeLLMServer
) -> None:
    gateway, other = two_gateways
    assert httpx.get(f"{gateway.root_url}/metrics").status_code == 401  # behind the tokens
    before = scrape(gateway, auth("BOB_TOKEN"))
    assert complete(gateway, "BOB_TOKEN").status_code == 200
    streamed = chat(gateway, "BOB_TOKEN", model="up", stream=True)
    assert streamed.status_code == 200
    statuses = [complete(gateway, "ALICE_TOKEN").status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    after = scrape(gateway, auth("BOB_TOKEN"))

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    ok = {"endpoint": "up", "outcome": "ok"}
    assert moved("gateway_ls_requests_total", task_class="inline", **ok) == 3
    assert moved("gateway_ls_requests_total", task_class="endpoint", **ok) == 1
    assert (
        moved("gateway_ls_requests_total", endpoint="none", task_class="inline", outcome="limited")
        == 1
    )
    assert moved("gateway_ls_limited_requests_total", client="ALICE_TOKEN", limit="requests") == 1
    chat_labels = {"gen_ai_operation_name": "chat", "endpoint": "up", "task_class": "endpoint"}
    assert moved("gen_ai_server_time_to_first_token_seconds_count", **chat_labels) == 1
    assert moved("gen_ai_client_operation_duration_seconds_count", **chat_labels) == 1
    for kind in ("input", "output"):
        usage = {"gen_ai_operation_name": "text_completion", "gen_ai_token_type": kind}
        assert moved("gen_ai_client_token_usage_count", endpoint="up", **usage) == 3
        assert moved("gateway_ls_tokens_total", client="BOB_TOKEN", type=kind) > 0
    assert moved("gateway_ls_spend_usd_total", client="BOB_TOKEN") > 0
    assert value(after, "gateway_ls_breaker_state", endpoint="up") == 0
    assert value(after, "gateway_ls_redis_duration_seconds_count", call="admit") >= 3
    # Each process serves its own registry: the other gateway saw none of this.
    assert (
        value(
            scrape(other, auth("BOB_TOKEN")), "gateway_ls_requests_total", **ok, task_class="inline"
        )
        == 0
    )


def test_metrics_may_be_public(
    tmp_path: Path, redis_server: RedisServer, upstream: FakeLLMServer
) -> None:
    config = team_config(redis_server.url, upstream, limits="", gateway="metrics_public = true\n")
    with running_gateway(tmp_path, config, env=TOKENS) as gateway:
        assert value(scrape(gateway), "gateway_ls_breaker_state", endpoint="up") == 0
        assert httpx.get(f"{gateway.base_url}/models").status_code == 401


def test_stats_usage_prints_spend_and_tokens_per_client_and_endpoint(
    two_gateways: tuple[Gateway, Gateway], tmp_path: Path
) -> None:
    first, second = two_gateways
    for gateway in (first, second, first):
        assert complete(gateway, "ALICE_TOKEN").status_code == 200
    assert chat(second, "BOB_TOKEN", model="up").status_code == 200
    command = [sys.executable, "-m", "lsp_server", "stats", "--url", first.root_url, "--usage"]
    env = server_env(tmp_path, {"STATS_TOKEN": TOKENS["CI_TOKEN"]})
    deadline = time.monotonic() + 10
    while True:  # the last settlement may still be on its way
        printed = subprocess.run(
            [*command, "--token-env", "STATS_TOKEN", "--json"],
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
        )
        assert printed.returncode == 0, printed.stderr
        usage = json.loads(printed.stdout)
        rows = {(r["client"], r["endpoint"]): r for r in usage["rows"]}
        if sum(r["requests"] for r in rows.values()) == 4 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert usage["source"] == "shared"  # both gateways' requests, from the ledger in Redis
    alice, bob = rows[("ALICE_TOKEN", "up")], rows[("BOB_TOKEN", "up")]
    assert (alice["requests"], bob["requests"]) == (3, 1)
    assert alice["input_tokens"] > 0 and alice["output_tokens"] > 0
    assert alice["cost_usd"] == pytest.approx(
        10 * (alice["input_tokens"] + alice["output_tokens"]) / 1e6
    )
    table = subprocess.run(
        [*command, "--token-env", "STATS_TOKEN", "--period", "month"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    assert table.returncode == 0, table.stderr
    assert "all gateways" in table.stdout
    assert any(line.split()[:3] == ["ALICE_TOKEN", "up", "3"] for line in table.stdout.splitlines())
    refused = subprocess.run(
        [sys.executable, "-m", "lsp_server", "stats", "--usage"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    assert refused.returncode == 2 and "--url" in refused.stderr
