"""Each provider kind, configured with the few lines a user writes, against the test server
speaking that provider's documented shape (paths, request fields, response and stream forms)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from bench.harness.permits import permit_for
from lsp_server.backends.base import (
    BackendError,
    ChatMessage,
    ChatRequest,
    CompletionRequest,
    Usage,
)
from lsp_server.backends.factory import remote_backend
from lsp_server.config.loader import ConfigError
from lsp_server.config.providers import chat_path, fim_path
from lsp_server.failures import FailureKind
from tests.support.provider_endpoints import KEY, collect, endpoint

ANSWER = "return a + b\n"
# kind → (FIM path the server saw, chat path the server saw, key variable of the kind)
EXPECTED = {
    "inception": (
        "/inception/v1/fim/completions", "/inception/v1/chat/completions", "INCEPTION_API_KEY"
    ),
    "mistral": ("/mistral/v1/fim/completions", "/mistral/v1/chat/completions", "MISTRAL_API_KEY"),
    "deepseek": ("/deepseek/beta/completions", "/deepseek/chat/completions", "DEEPSEEK_API_KEY"),
    # llama-server takes `--api-key`; the kind names no variable, so the test names one.
    "llamacpp": ("/llamacpp/infill", "/llamacpp/v1/chat/completions", "LLAMACPP_TEST_KEY"),
}  # fmt: skip


@pytest.fixture(scope="module")
def running_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(name="provider", api_key=KEY) as server:
        yield server


@pytest.fixture
def server(running_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> FakeLLMServer:
    running_server.behaviour = Behaviour(text=ANSWER, models=("m",))
    running_server.quiet()
    for _, _, variable in EXPECTED.values():
        if variable:
            monkeypatch.setenv(variable, KEY)
    return running_server


def test_presets_follow_the_providers_documentation() -> None:
    mercury = endpoint("inception")
    assert mercury.base_url == "https://api.inceptionlabs.ai/v1"
    assert (fim_path(mercury), chat_path(mercury)) == ("/fim/completions", "/chat/completions")
    assert mercury.api_key_env == "INCEPTION_API_KEY" and mercury.fim
    codestral = endpoint("mistral")
    assert codestral.base_url == "https://api.mistral.ai/v1"
    assert fim_path(codestral) == "/fim/completions" and codestral.api_key_env == "MISTRAL_API_KEY"
    deepseek = endpoint("deepseek")
    assert deepseek.base_url == "https://api.deepseek.com"
    assert fim_path(deepseek) == "/beta/completions" and chat_path(deepseek) == "/chat/completions"
    llama = endpoint("llamacpp")
    assert llama.base_url == "http://127.0.0.1:8080" and llama.api_key_env == ""
    assert (fim_path(llama), chat_path(llama)) == ("/infill", "/v1/chat/completions")
    assert fim_path(endpoint("openai", "http://h/v1")) == "/completions"


def test_paths_in_the_file_win_and_are_checked() -> None:
    custom = endpoint("openai", "http://h/v1", 'fim_path = "/fim/completions"\n')
    assert fim_path(custom) == "/fim/completions"
    with pytest.raises(ConfigError) as caught:
        endpoint("openai", "http://h/v1", 'chat_path = "https://elsewhere/chat"\n')
    assert caught.value.key == "endpoints[0].chat_path" and caught.value.line == 6


@pytest.mark.parametrize("kind", sorted(EXPECTED))
async def test_fim_call_reaches_the_documented_path_in_the_documented_shape(
    server: FakeLLMServer, kind: str
) -> None:
    backend = remote_backend(endpoint(kind, server.provider_base_url(kind)))
    usage = Usage()
    request = CompletionRequest(prefix="def add(a, b):\n    ", suffix="\n\nprint(add(1, 2))\n")
    try:
        text = await collect(backend.complete(request, usage, permit=permit_for(backend)))
    finally:
        await backend.aclose()
    assert text == ANSWER
    sent = server.requests[-1]
    assert sent.path == EXPECTED[kind][0]
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    if kind == "llamacpp":
        assert sent.payload["input_prefix"] == request.prefix
        assert sent.payload["input_suffix"] == request.suffix
        assert sent.payload["cache_prompt"] is True and sent.payload["n_predict"] == 64
    else:
        assert sent.headers["authorization"] == f"Bearer {KEY}"
        assert (sent.payload["prompt"], sent.payload["suffix"]) == (request.prefix, request.suffix)
    # Counted by the upstream where its stream reports usage, else one token per chunk.
    assert usage.reported is (kind in ("deepseek", "llamacpp"))
    assert usage.completion_tokens == 4 and usage.finish_reason == "stop"


@pytest.mark.parametrize("kind", sorted(EXPECTED))
async def test_chat_reaches_the_documented_path(server: FakeLLMServer, kind: str) -> None:
    backend = remote_backend(endpoint(kind, server.provider_base_url(kind)))
    request = ChatRequest(messages=(ChatMessage("user", "hello"),), max_tokens=16)
    try:
        assert await collect(backend.chat(request, permit=permit_for(backend))) == ANSWER
    finally:
        await backend.aclose()
    assert server.requests[-1].path == EXPECTED[kind][1]


@pytest.mark.parametrize("kind", sorted(EXPECTED))
async def test_a_cut_answer_says_length(server: FakeLLMServer, kind: str) -> None:
    server.behaviour = Behaviour(text="x" * 400)
    config = endpoint(kind, server.provider_base_url(kind), "max_tokens = 8\n")
    backend = remote_backend(config)
    usage = Usage()
    request = CompletionRequest(prefix="a = ", suffix="", max_tokens=100)
    try:
        text = await collect(backend.complete(request, usage, permit=permit_for(backend)))
    finally:
        await backend.aclose()
    assert len(text) == 32  # the test server's tokens are 4 characters
    assert usage.finish_reason == "length" and usage.completion_tokens == 8


async def test_no_suffix_sent_when_the_client_sent_none(server: FakeLLMServer) -> None:
    openai = remote_backend(
        endpoint("openai", server.base_url, 'api_key_env = "LLAMACPP_TEST_KEY"\n')
    )
    llama = remote_backend(endpoint("llamacpp", server.provider_base_url("llamacpp")))
    request = CompletionRequest(prefix="Once upon a time", suffix="", has_suffix=False)
    try:
        await collect(openai.complete(request, permit=permit_for(openai)))
        assert "suffix" not in server.requests[-1].payload
        await collect(llama.complete(request, permit=permit_for(llama)))
    finally:
        await openai.aclose()
        await llama.aclose()
    sent = server.requests[-1]
    assert sent.path == "/llamacpp/completion" and sent.payload["prompt"] == "Once upon a time"
    assert "input_suffix" not in sent.payload


async def test_llamacpp_without_infill_uses_its_openai_completions(server: FakeLLMServer) -> None:
    """llama-cpp-python's server has no `/infill`: the backend moves to `/v1/completions`
    with prompt + suffix, once, and stays there."""
    backend = remote_backend(endpoint("llamacpp", server.root_url))
    request = CompletionRequest(prefix="def f():\n    ", suffix="\n")
    try:
        assert await collect(backend.complete(request, permit=permit_for(backend))) == ANSWER
        assert await collect(backend.complete(request, permit=permit_for(backend))) == ANSWER
    finally:
        await backend.aclose()
    assert [r.path for r in server.requests] == ["/infill", "/v1/completions", "/v1/completions"]
    assert server.requests[-1].payload["suffix"] == "\n"


async def test_llamacpp_native_stream_cut_short_is_a_protocol_fault(server: FakeLLMServer) -> None:
    server.behaviour = Behaviour(text=ANSWER * 4, fault="truncated")
    backend = remote_backend(endpoint("llamacpp", server.provider_base_url("llamacpp")))
    try:
        with pytest.raises(BackendError) as caught:
            await collect(
                backend.complete(
                    CompletionRequest(prefix="x", suffix=""), permit=permit_for(backend)
                )
            )
    finally:
        await backend.aclose()
    assert caught.value.kind is FailureKind.PROTOCOL


async def test_zero_usage_on_every_chunk_leaves_the_estimate(server: FakeLLMServer) -> None:
    """A proxy that puts zero usage on every chunk (LiteLLM) must not zero the token count."""
    from lsp_server.backends.openai_compat import read_choice

    usage = Usage()
    zero = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    for _ in range(3):
        assert read_choice({"choices": [{"text": "ab"}], "usage": zero}, usage) == "ab"
        usage.completion_tokens += 1  # what the stream loop does per chunk while estimating
    assert (usage.completion_tokens, usage.reported) == (3, False)
    read_choice({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 5}}, usage)
    assert (usage.prompt_tokens, usage.completion_tokens, usage.reported) == (9, 5, True)
