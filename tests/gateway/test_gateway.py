"""End to end: `gateway-ls gateway` as a subprocess on 127.0.0.1, called with the official `openai`
client (and plain httpx where a client would send what the SDK cannot), in front of loopback
endpoints the tests own.

Decided behaviour checked here: a request that must stay on this machine (sensitive header,
secret in the prompt, sensitive path) while the local model is disabled gets a 503 and nothing
leaves the machine; it never gets an empty 200 that would look like "the model had nothing to say".
"""

from __future__ import annotations

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
from openai.types.chat import ChatCompletionMessageParam

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from bench.harness.processes import free_port
from lsp_server.gateway.fim_prompt import split_fim_prompt
from tests.support.config_text import AWS_KEY_ID, LOCAL_OFF
from tests.support.gateway_process import (
    Gateway,
    gateway_command,
    running_gateway,
)
from tests.support.lsp_session import endpoint_toml, server_env

GENEROUS = "[routing]\ninline_deadline_ms = 3000\nhedge_after_ms = 150\n"
BOTH_ROLES = '["inline", "refactor"]'
FAST_TEXT = "return a + b\n"
SLOW_TEXT = "return b + a\n"
PREFIX = "def add(a, b):\n    "
SUFFIX = "\n\nprint(add(1, 2))\n"


def generation_bodies(server: FakeLLMServer) -> list[dict[str, Any]]:
    return [r.json for r in server.requests if r.path.endswith("completions") and r.json]


# --- the shared gateway: two endpoints, the slower listed first, no local model ------------


@pytest.fixture(scope="module")
def fast() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(Behaviour(text=FAST_TEXT), name="fast") as server:
        yield server


@pytest.fixture(scope="module")
def slow() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(Behaviour(text=SLOW_TEXT, latency_s=0.4), name="slow") as server:
        yield server


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory, fast: FakeLLMServer, slow: FakeLLMServer
) -> Iterator[Gateway]:
    config = (
        GENEROUS
        + LOCAL_OFF
        + endpoint_toml("slow", slow.base_url, roles=BOTH_ROLES)
        + endpoint_toml("fast", fast.base_url, roles=BOTH_ROLES)
    )
    with running_gateway(tmp_path_factory.mktemp("gateway"), config) as running:
        yield running


@pytest.fixture(autouse=True)
def fresh_records(request: pytest.FixtureRequest) -> None:
    for name in ("fast", "slow"):
        if name in request.fixturenames:
            server: FakeLLMServer = request.getfixturevalue(name)
            server.quiet()


def test_models_lists_automatic_routing_and_each_endpoint(gateway: Gateway) -> None:
    models = gateway.client().models.list()
    # An endpoint named like a class ("fast") takes the name.
    expected = ["gateway-ls", "auto", "reasoning", "local", "slow", "fast"]
    assert [model.id for model in models.data] == expected
    assert all(model.object == "model" for model in models.data)


def test_completion_with_suffix_is_fill_in_the_middle(
    gateway: Gateway, fast: FakeLLMServer, slow: FakeLLMServer
) -> None:
    raw = gateway.client().completions.with_raw_response.create(
        model="gateway-ls", prompt=PREFIX, suffix=SUFFIX, max_tokens=32
    )
    completion = raw.parse()
    served_by = raw.headers["x-gateway-ls-endpoint"]
    assert served_by in ("fast", "slow")
    assert completion.model == served_by
    assert completion.object == "text_completion"
    assert completion.choices[0].text == (FAST_TEXT if served_by == "fast" else SLOW_TEXT).strip()
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.completion_tokens > 0
    upstream = generation_bodies(fast if served_by == "fast" else slow)[-1]
    assert (upstream["prompt"], upstream["suffix"]) == (PREFIX, SUFFIX)


def test_zed_style_fim_prompt_is_split_into_prefix_and_suffix(
    gateway: Gateway, fast: FakeLLMServer, slow: FakeLLMServer
) -> None:
    # What Zed's OpenAI-compatible edit-prediction provider posts with prompt_format "qwen".
    body = {
        "model": "gateway-ls",
        "prompt": f"<|fim_prefix|>{PREFIX}<|fim_suffix|>{SUFFIX}<|fim_middle|>",
        "max_tokens": 64,
        "temperature": 0.2,
    }
    response = httpx.post(f"{gateway.base_url}/completions", json=body, timeout=30)
    assert response.status_code == 200
    payload = response.json()
    assert set(payload) >= {"id", "object", "created", "model", "choices", "usage"}
    assert payload["object"] == "text_completion"
    choice = payload["choices"][0]
    assert set(choice) >= {"index", "text", "finish_reason", "logprobs"}
    assert choice["logprobs"] is None
    assert set(payload["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    served_by = response.headers["x-gateway-ls-endpoint"]
    upstream = generation_bodies(fast if served_by == "fast" else slow)[-1]
    assert upstream["prompt"] == PREFIX
    assert upstream["suffix"] == SUFFIX
    assert "<|fim" not in json.dumps(upstream)


@pytest.mark.parametrize(
    "prompt",
    [
        "<|fim_prefix|>P1\n<|fim_suffix|>S1\n<|fim_middle|>",
        "<|repo_name|>demo\n<|file_sep|>a.py\n<|fim_prefix|>P1\n<|fim_suffix|>S1\n<|fim_middle|>",
        "<fim_prefix>P1\n<fim_suffix>S1\n<fim_middle>",
        "<｜fim▁begin｜>P1\n<｜fim▁hole｜>S1\n<｜fim▁end｜>",
        "<PRE> P1\n <SUF>S1\n <MID>",
        "[SUFFIX]S1\n[PREFIX]P1\n",
    ],
)
def test_each_fim_prompt_format_splits(prompt: str) -> None:
    parts = split_fim_prompt(prompt)
    assert parts is not None
    assert (parts.prefix, parts.suffix) == ("P1\n", "S1\n")


def test_a_plain_prompt_is_not_split() -> None:
    assert split_fim_prompt("def add(a, b):\n    # <|fim_prefix|> in a comment\n") is None


def test_streaming_completion(gateway: Gateway) -> None:
    stream = gateway.client().completions.create(
        model="gateway-ls", prompt=PREFIX, suffix=SUFFIX, stream=True
    )
    chunks = list(stream)
    text = "".join(chunk.choices[0].text for chunk in chunks if chunk.choices)
    assert text in (FAST_TEXT.strip(), SLOW_TEXT.strip())
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_chat_completion(gateway: Gateway) -> None:
    raw = gateway.client().chat.completions.with_raw_response.create(
        model="gateway-ls",
        messages=[
            {"role": "system", "content": "You rewrite code."},
            {"role": "user", "content": "Swap the operands of a + b."},
        ],
    )
    chat = raw.parse()
    served_by = raw.headers["x-gateway-ls-endpoint"]
    assert chat.model == served_by
    assert chat.choices[0].message.role == "assistant"
    assert chat.choices[0].message.content == (SLOW_TEXT if served_by == "slow" else FAST_TEXT)
    assert chat.choices[0].finish_reason == "stop"


def test_streaming_chat(gateway: Gateway) -> None:
    stream = gateway.client().chat.completions.create(
        model="gateway-ls",
        messages=[{"role": "user", "content": "Swap the operands."}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert content in (FAST_TEXT, SLOW_TEXT)
    assert len(finals) == 1 and finals[0].choices[0].finish_reason == "stop"
    assert finals[0].model in ("fast", "slow")
    assert {c.model for c in chunks} == {finals[0].model}  # every chunk names who is writing
    assert content == (SLOW_TEXT if finals[0].model == "slow" else FAST_TEXT)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_a_model_naming_an_endpoint_pins_it(gateway: Gateway) -> None:
    raw = gateway.client().completions.with_raw_response.create(
        model="slow", prompt=PREFIX, suffix=SUFFIX
    )
    assert raw.headers["x-gateway-ls-endpoint"] == "slow"
    assert raw.parse().model == "slow"


def test_an_unknown_model_name_is_an_openai_shaped_404_listing_the_valid_ones(
    gateway: Gateway,
) -> None:
    client = gateway.client()
    with pytest.raises(openai.NotFoundError) as caught:
        client.completions.create(model="qwen2.5-coder:7b", prompt=PREFIX, suffix=SUFFIX)
    error = caught.value.body
    assert isinstance(error, dict) and error["code"] == "model_not_found"
    assert error["param"] == "model" and error["type"] == "invalid_request_error"
    assert "gateway-ls, auto, slow, fast" in error["message"]
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    for name in ("auto", "gateway-ls"):
        assert client.completions.create(model=name, prompt=PREFIX, suffix=SUFFIX).choices


def test_no_suffix_goes_upstream_when_the_client_sent_none(
    gateway: Gateway, fast: FakeLLMServer
) -> None:
    client = gateway.client()
    client.completions.create(model="fast", prompt="Once upon a time")
    assert "suffix" not in generation_bodies(fast)[-1]
    client.completions.create(model="fast", prompt=PREFIX, suffix="")
    assert generation_bodies(fast)[-1]["suffix"] == ""


def test_any_number_of_stop_strings_first_four_upstream_the_rest_applied(
    gateway: Gateway, fast: FakeLLMServer
) -> None:
    """Zed's edit predictions send 14 stop strings; APIs take four."""
    stops = [f"<|marker{i}|>" for i in range(13)] + [" + "]
    completion = gateway.client().completions.create(
        model="fast", prompt=PREFIX, suffix=SUFFIX, stop=stops
    )
    assert completion.choices[0].text == "return a"
    assert generation_bodies(fast)[-1]["stop"] == stops[:4]


def test_most_requests_go_to_the_faster_endpoint(gateway: Gateway) -> None:
    client = gateway.client()
    served = []
    for index in range(12):
        raw = client.completions.with_raw_response.create(
            model="gateway-ls", prompt=f"x{index} = ", suffix="\n"
        )
        served.append(raw.headers["x-gateway-ls-endpoint"])
    assert served[-8:].count("fast") >= 6, served


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Gateway-LS-Sensitive": "1"},
        {"X-Gateway-LS-Sensitive": "true"},
        {"X-Gateway-LS-Path": "/home/dev/project/.env"},
        # The path as the file system reads it: dot segments, case, Windows' aliases.
        {"X-Gateway-LS-Path": "/home/dev/project/sub/../.env"},
        {"X-Gateway-LS-Path": "./.env"},
        {"X-Gateway-LS-Path": "/home/dev/project/.ENV"},
        {"X-Gateway-LS-Path": "/home/dev/project/Secrets/db.yml"},
        {"X-Gateway-LS-Path": "C:\\proj\\server.PEM."},
        {"X-Gateway-LS-Path": "/home/dev/.ssh/id_ed25519"},
        {"X-Gateway-LS-Path": "file:///home/dev/project/.kube/config"},
    ],
)
def test_a_sensitive_request_never_leaves_the_machine(
    gateway: Gateway, fast: FakeLLMServer, slow: FakeLLMServer, headers: dict[str, str]
) -> None:
    client = gateway.client().with_options(default_headers=headers)
    with pytest.raises(openai.APIStatusError) as completion_error:
        client.completions.create(model="gateway-ls", prompt=PREFIX, suffix=SUFFIX)
    with pytest.raises(openai.APIStatusError) as chat_error:
        client.chat.completions.create(
            model="fast", messages=[{"role": "user", "content": "refactor this"}]
        )
    for error in (completion_error.value, chat_error.value):
        assert error.status_code == 503
        assert "local model is disabled" in error.message
    assert fast.requests == [] and slow.requests == []


def test_a_secret_in_the_prompt_keeps_it_local(
    gateway: Gateway, fast: FakeLLMServer, slow: FakeLLMServer
) -> None:
    with pytest.raises(openai.APIStatusError) as error:
        gateway.client().completions.create(
            model="gateway-ls", prompt=f'AWS_KEY = "{AWS_KEY_ID}"\n', suffix=""
        )
    assert error.value.status_code == 503
    assert AWS_KEY_ID not in fast.received_text() + slow.received_text()
    assert fast.requests == [] and slow.requests == []


def test_chat_messages_and_stop_sequences_are_judged_together(
    gateway: Gateway, fast: FakeLLMServer, slow: FakeLLMServer
) -> None:
    password = "Wq7" + "rT2mZ9xL4kP8"
    split: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "db_password = "},
        {"role": "user", "content": f'"{password}"'},
    ]
    hi: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]
    in_stop: dict[str, Any] = {"stop": [f"{AWS_KEY_ID}"]}
    for messages, extra in ((split, {}), (hi, in_stop)):
        with pytest.raises(openai.APIStatusError) as error:
            gateway.client().chat.completions.create(model="gateway-ls", messages=messages, **extra)
        assert error.value.status_code == 503
    assert fast.requests == [] and slow.requests == []


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("completions", {"model": "gateway-ls"}, "prompt"),
        ("completions", {"prompt": 42}, "prompt"),
        ("completions", {"prompt": "x", "max_tokens": "ten"}, "max_tokens"),
        ("completions", {"prompt": "x", "stop": [1, 2]}, "stop"),
        ("completions", {"prompt": "x", "stream": "yes"}, "stream"),
        ("chat/completions", {"messages": []}, "messages"),
        (
            "chat/completions",
            {"messages": [{"role": "wizard", "content": "x"}]},
            "messages[0].role",
        ),
        ("chat/completions", {"messages": [{"role": "user", "content": 3}]}, "messages[0].content"),
        (
            "chat/completions",
            {"messages": [{"role": ["user"], "content": "x"}]},
            "messages[0].role",
        ),
        (
            "chat/completions",
            {
                "messages": [
                    {"role": "user", "content": "x"},
                    {"role": "assistant", "tool_calls": 7},
                ]
            },
            "messages[1].tool_calls",
        ),
        (
            "chat/completions",
            {
                "messages": [
                    {"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}
                ]
            },
            "messages[0].tool_calls[0]",
        ),
    ],
)
def test_invalid_bodies_get_400_naming_the_field(
    gateway: Gateway, path: str, body: dict[str, Any], param: str
) -> None:
    response = httpx.post(f"{gateway.base_url}/{path}", json=body, timeout=10)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert set(error) == {"message", "type", "param", "code"}


def test_http_errors_are_openai_shaped(gateway: Gateway) -> None:
    not_json = httpx.post(
        f"{gateway.base_url}/completions",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert not_json.status_code == 400
    unknown = httpx.get(f"{gateway.base_url}/engines")
    assert unknown.status_code == 404
    wrong_method = httpx.get(f"{gateway.base_url}/completions")
    assert wrong_method.status_code == 405
    oversized = httpx.post(
        f"{gateway.base_url}/completions",
        content=b'{"prompt": "' + b"x" * (9 * 1024 * 1024) + b'"}',
        timeout=30,
    )
    assert oversized.status_code == 413
    for response in (not_json, unknown, wrong_method, oversized):
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert "Traceback" not in error["message"]


def test_an_endpoint_without_the_role_cannot_be_pinned(tmp_path: Path) -> None:
    """While a refactor endpoint exists, chat is its job (with none, the inline ones chat)."""
    config = GENEROUS + LOCAL_OFF
    with (
        FakeLLMServer(Behaviour(text=FAST_TEXT)) as inline_only,
        running_gateway(
            tmp_path,
            config
            + endpoint_toml("mercury", inline_only.base_url)
            + endpoint_toml("reasoner", inline_only.base_url, roles='["refactor"]'),
        ) as gateway,
    ):
        with pytest.raises(openai.BadRequestError) as error:
            gateway.client().chat.completions.create(
                model="mercury", messages=[{"role": "user", "content": "hi"}]
            )
        body = error.value.body
        assert isinstance(body, dict) and body["param"] == "model"
        assert inline_only.requests == []


def test_status_is_readable_by_gateway_ls_stats(gateway: Gateway, tmp_path: Path) -> None:
    gateway.client().completions.create(model="gateway-ls", prompt=PREFIX, suffix=SUFFIX)
    status = httpx.get(f"{gateway.base_url}/gateway-ls/status").json()
    assert {e["name"] for e in status["endpoints"]} == {"fast", "slow"}
    assert status["inline_requests"] >= 1
    stats = subprocess.run(
        [sys.executable, "-m", "lsp_server", "stats", "--url", gateway.root_url, "--json"],
        capture_output=True,
        text=True,
        timeout=30,
        env=server_env(tmp_path),
    )
    assert stats.returncode == 0, stats.stderr
    assert "fast" in stats.stdout


def test_a_client_leaving_a_stream_cancels_the_upstream_call(
    gateway: Gateway, slow: FakeLLMServer
) -> None:
    long_answer = Behaviour(text="x = 1\n" * 200, chunk_delay_s=0.05, chunk_chars=6)
    slow.behaviour = long_answer
    try:
        body = {
            "model": "slow",
            "messages": [{"role": "user", "content": "write a long answer"}],
            "stream": True,
        }
        with (
            httpx.Client(timeout=30) as client,
            client.stream("POST", f"{gateway.base_url}/chat/completions", json=body) as response,
        ):
            assert response.status_code == 200
            next(response.iter_lines())  # the first event arrived; now hang up
        assert slow.wait_for(lambda s: s.disconnects >= 1, timeout_s=10)
        assert slow.completed_streams == 0
    finally:
        slow.behaviour = Behaviour(text=SLOW_TEXT, latency_s=0.4)


# --- gateways with their own configuration ---------------------------------------------------


def test_a_configured_token_is_required_even_on_loopback(
    tmp_path: Path, fast: FakeLLMServer
) -> None:
    config = (
        '[gateway]\ntoken_env = "GATEWAY_TEST_TOKEN"\n'
        + LOCAL_OFF
        + endpoint_toml("fast", fast.base_url, roles=BOTH_ROLES)
    )
    with running_gateway(tmp_path, config, env={"GATEWAY_TEST_TOKEN": "s3cret"}) as gateway:
        for wrong in ("unused", "s3cret-not"):
            with pytest.raises(openai.AuthenticationError):
                gateway.client(api_key=wrong).completions.create(model="gateway-ls", prompt="x")
        status = httpx.get(f"{gateway.base_url}/gateway-ls/status")
        assert status.status_code == 401
        assert status.json()["error"]["code"] == "invalid_api_key"
        assert httpx.get(f"{gateway.root_url}/healthz").status_code == 200
        assert fast.requests == []
        completion = gateway.client(api_key="s3cret").completions.create(
            model="gateway-ls", prompt=PREFIX, suffix=SUFFIX
        )
        assert completion.choices[0].text == FAST_TEXT.strip()


def test_binding_beyond_loopback_without_a_token_is_refused(tmp_path: Path) -> None:
    config_path = tmp_path / "config.toml"
    config_path.write_text('[gateway]\ntoken_env = "GATEWAY_TEST_UNSET"\n' + LOCAL_OFF)
    result = subprocess.run(
        gateway_command(config_path, host="0.0.0.0", port=free_port()),
        capture_output=True,
        text=True,
        timeout=30,
        env=server_env(tmp_path),
    )
    assert result.returncode == 2
    assert "GATEWAY_TEST_UNSET" in result.stderr
    assert "token" in result.stderr


def test_failing_upstream_gives_502(tmp_path: Path) -> None:
    with (
        FakeLLMServer(Behaviour(fault="status:500"), name="broken") as broken,
        running_gateway(
            tmp_path, LOCAL_OFF + endpoint_toml("broken", broken.base_url, roles=BOTH_ROLES)
        ) as gateway,
    ):
        client = gateway.client()
        with pytest.raises(openai.APIStatusError) as completion_error:
            client.completions.create(model="gateway-ls", prompt=PREFIX, suffix=SUFFIX)
        with pytest.raises(openai.APIStatusError) as chat_error:
            client.chat.completions.create(
                model="gateway-ls", messages=[{"role": "user", "content": "hi"}]
            )
        with pytest.raises(openai.APIStatusError) as stream_error:
            client.chat.completions.create(
                model="gateway-ls", messages=[{"role": "user", "content": "hi"}], stream=True
            )
        for error in (completion_error.value, chat_error.value, stream_error.value):
            assert error.status_code == 502
            assert "broken" in error.message and "HTTP 500" in error.message
        assert len(broken.requests) >= 3


@pytest.mark.model
def test_a_sensitive_request_is_served_by_the_local_model(
    tmp_path: Path, bundled_model_path: Path, fast: FakeLLMServer
) -> None:
    # A CPU shared with other work may take seconds: the keystroke deadline is not tested here.
    config = (
        "[routing]\ninline_deadline_ms = 60000\nhedge_after_ms = 30000\n"
        + f'[local]\nmodel_path = "{bundled_model_path.as_posix()}"\nn_ctx = 2048\n'
        + endpoint_toml("fast", fast.base_url, roles=BOTH_ROLES)
    )
    with running_gateway(tmp_path, config) as gateway:
        client = gateway.client().with_options(
            default_headers={"X-Gateway-LS-Sensitive": "1"}, timeout=120
        )
        deadline = time.monotonic() + 180
        while True:  # the first requests start loading the model and get 503 + Retry-After
            try:
                raw = client.completions.with_raw_response.create(
                    model="gateway-ls", prompt=PREFIX, suffix=SUFFIX, max_tokens=16
                )
                break
            except openai.APIStatusError as error:
                assert error.status_code == 503 and time.monotonic() < deadline, error.message
                time.sleep(float(error.response.headers.get("retry-after", "1")))
        assert raw.headers["x-gateway-ls-endpoint"] == "local"
        assert raw.parse().model == "local"
        assert fast.requests == []


# --- faithful to the upstream: finish reason, usage, providers, chat fallback, Zed -----------

ZED_ANSWER = "    return a + b\n\ndef main():\n    print(add(1, 2))\n\nmain()\n"


@pytest.fixture(scope="module")
def providers() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(Behaviour(text=ZED_ANSWER), name="providers") as server:
        yield server


@pytest.fixture(scope="module")
def inline_only(
    tmp_path_factory: pytest.TempPathFactory, providers: FakeLLMServer
) -> Iterator[Gateway]:
    """No refactor endpoint and no local model: an OpenAI-kind endpoint with a small cap, and
    Mercury (`kind = "inception"`) at its documented FIM path."""
    config = (
        GENEROUS
        + LOCAL_OFF
        + endpoint_toml("capped", providers.base_url, extra="max_tokens = 4")
        + '[[endpoints]]\nname = "mercury"\nkind = "inception"\nmodel = "mercury-edit-2"\n'
        + f'base_url = "{providers.provider_base_url("inception")}"\n'
    )
    env = {"INCEPTION_API_KEY": "test-key"}
    with running_gateway(tmp_path_factory.mktemp("inline-only"), config, env=env) as running:
        yield running


def test_an_answer_cut_by_the_endpoints_cap_says_length(
    inline_only: Gateway, providers: FakeLLMServer
) -> None:
    providers.behaviour = Behaviour(text="1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12")
    completion = inline_only.client().completions.create(
        model="capped", prompt="values = [", suffix="]\n", max_tokens=200
    )
    assert completion.choices[0].text == "1, 2, 3, 4, 5, 6"  # 4 tokens of the test server
    assert completion.choices[0].finish_reason == "length"
    assert generation_bodies(providers)[-1]["max_tokens"] == 4
    providers.behaviour = Behaviour(text="1, 2]")
    completion = inline_only.client().completions.create(
        model="capped", prompt="values = [", suffix="]\n", max_tokens=200
    )
    assert completion.choices[0].finish_reason == "stop"


def test_usage_is_the_upstreams_when_it_reports_one_and_marked_estimated_otherwise(
    inline_only: Gateway, providers: FakeLLMServer
) -> None:
    providers.behaviour = Behaviour(text=FAST_TEXT)
    client = inline_only.client()
    raw = client.completions.with_raw_response.create(model="capped", prompt=PREFIX, suffix=SUFFIX)
    assert raw.headers["x-gateway-ls-usage"] == "upstream"
    usage = raw.parse().usage
    assert usage is not None and usage.completion_tokens == 4
    assert usage.prompt_tokens == -(-(len(PREFIX) + len(SUFFIX)) // 4)
    raw = client.completions.with_raw_response.create(model="mercury", prompt=PREFIX, suffix=SUFFIX)
    assert raw.headers["x-gateway-ls-usage"] == "estimated"
    usage = raw.parse().usage
    assert usage is not None and usage.completion_tokens > 0 and usage.prompt_tokens > 0
    sent = providers.requests[-1]
    assert sent.path == "/inception/v1/fim/completions"
    assert sent.headers["authorization"] == "Bearer test-key"


def test_chat_with_only_inline_endpoints_is_served_by_their_chat(
    inline_only: Gateway, providers: FakeLLMServer
) -> None:
    providers.behaviour = Behaviour(text="Hello.")
    raw = inline_only.client().chat.completions.with_raw_response.create(
        model="gateway-ls", messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.headers["x-gateway-ls-endpoint"] in ("capped", "mercury")
    assert raw.parse().choices[0].message.content == "Hello."
    assert providers.requests[-1].path.endswith("/chat/completions")


@pytest.mark.parametrize(
    "prompt",
    [
        "<|code_prefix|>def add(a, b):\n<|code_suffix|>\n\ndef main():\n"
        "    print(add(1, 2))\n<|code_middle|>",
        "<|fim_prefix|>def add(a, b):\n<|fim_suffix|>\n\ndef main():\n"
        "    print(add(1, 2))\n<|fim_middle|>",
    ],
    ids=["glm", "qwen-codegemma"],
)
def test_zed_edit_prediction_without_a_path_never_repeats_the_code_after_the_cursor(
    inline_only: Gateway, providers: FakeLLMServer, prompt: str
) -> None:
    """What Zed posts: markers in `prompt`, no path, 14 stop strings, its max_tokens."""
    providers.behaviour = Behaviour(text=ZED_ANSWER)
    stops = ["<|endoftext|>", "<|file_separator|>", "<|fim_pad|>", "<|fim_prefix|>"]
    stops += ["<|fim_middle|>", "<|fim_suffix|>", "<fim_prefix>", "<fim_middle>"]
    stops += ["<fim_suffix>", "<PRE>", "<SUF>", "<MID>", "[PREFIX]", "[SUFFIX]"]
    response = httpx.post(
        f"{inline_only.base_url}/completions",
        json={"model": "capped", "prompt": prompt, "max_tokens": 256, "stop": stops},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["text"] == "    return a + b"
    sent = generation_bodies(providers)[-1]
    assert sent["prompt"] == "def add(a, b):\n" and sent["suffix"].startswith("\n\ndef main")
