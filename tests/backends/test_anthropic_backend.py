"""The Anthropic backend against a real Messages-API server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager

import pytest

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from bench.harness.permits import permit_for
from lsp_server.backends.anthropic import AnthropicBackend, stream_error
from lsp_server.backends.base import (
    BackendError,
    ChatMessage,
    ChatRequest,
    CompletionRequest,
    Usage,
)
from lsp_server.backends.fim_instruction import CURSOR_MARKER
from lsp_server.config.model import EndpointConfig
from lsp_server.failures import FailureKind

KEY_ENV = "GATEWAY_LS_TEST_ANTHROPIC_KEY"
KEY = "sk-ant-test-0123456789abcdefghij"
ANSWER = "def area(self):\n    return math.pi * self.radius ** 2\n"


@pytest.fixture(scope="module")
def running_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(name="claude", api_key=KEY) as server:
        yield server


@pytest.fixture
def server(running_server: FakeLLMServer) -> FakeLLMServer:
    running_server.behaviour = Behaviour(text=ANSWER)
    running_server.quiet()
    return running_server


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


@pytest.fixture
async def backend(server: FakeLLMServer, key: str) -> AsyncIterator[AnthropicBackend]:
    async with _backend(server.root_url) as made:
        yield made


@asynccontextmanager
async def _backend(base_url: str) -> AsyncIterator[AnthropicBackend]:
    config = EndpointConfig(
        name="claude",
        kind="anthropic",
        base_url=base_url,
        model="claude-test",
        api_key_env=KEY_ENV,
        roles=("refactor",),
        fim=False,
        timeout_ms=5000,
    )
    backend = AnthropicBackend(config)
    try:
        yield backend
    finally:
        await backend.aclose()


def _chat(*messages: ChatMessage, stop: tuple[str, ...] = ()) -> ChatRequest:
    return ChatRequest(messages=messages, max_tokens=500, stop=stop)


async def _collect(stream: AsyncIterator[str]) -> list[str]:
    return [piece async for piece in stream]


async def _eventually(condition: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def test_chat_streams_the_answer_and_counts_usage(
    backend: AnthropicBackend, server: FakeLLMServer
) -> None:
    usage = Usage()
    request = _chat(
        ChatMessage("system", "You rewrite code."),
        ChatMessage("user", "Simplify area()."),
    )
    pieces = await _collect(backend.chat(request, usage, permit=permit_for(backend)))
    assert len(pieces) > 1  # it streamed
    assert "".join(pieces) == ANSWER
    assert usage.prompt_tokens > 0
    assert usage.completion_tokens == len(ANSWER) // 4 + 1


async def test_request_shape_system_prompt_and_headers(
    backend: AnthropicBackend, server: FakeLLMServer
) -> None:
    request = _chat(
        ChatMessage("system", "You rewrite code."),
        ChatMessage("user", "Simplify area()."),
    )
    await _collect(backend.chat(request, permit=permit_for(backend)))
    (sent,) = server.requests
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert sent.payload["system"] == "You rewrite code."
    assert sent.payload["messages"] == [{"role": "user", "content": "Simplify area()."}]
    assert sent.payload["model"] == "claude-test"
    assert sent.payload["stream"] is True
    assert sent.payload["max_tokens"] == 500


async def test_complete_asks_for_the_text_at_the_cursor(
    backend: AnthropicBackend, server: FakeLLMServer
) -> None:
    server.behaviour = Behaviour(text="a + b\n    # done\n")
    request = CompletionRequest(
        prefix="def add(a, b):\n    return ",
        suffix="\n\nprint(add(1, 2))\n",
        language="python",
        path="src/add.py",
        max_tokens=32,
        single_line=True,
    )
    assert "".join(await _collect(backend.complete(request, permit=permit_for(backend)))) == "a + b"
    sent = server.requests[0].payload
    assert CURSOR_MARKER in sent["system"] and "no code fences" in sent["system"]
    (user,) = sent["messages"]
    assert "def add(a, b):\n    return <CURSOR>\n\nprint(add(1, 2))\n" in user["content"]
    assert "src/add.py" in user["content"] and "python" in user["content"]
    assert "stop_sequences" not in sent  # the API refuses whitespace stops: applied locally
    assert sent["max_tokens"] == 32


async def test_stop_strings_split_across_chunks_end_the_stream(
    backend: AnthropicBackend, server: FakeLLMServer
) -> None:
    server.behaviour = Behaviour(text="first block\n\nsecond block", chunk_chars=3)
    request = _chat(ChatMessage("user", "go"), stop=("\n\n", "END"))
    assert (
        "".join(await _collect(backend.chat(request, permit=permit_for(backend)))) == "first block"
    )
    assert server.requests[0].payload["stop_sequences"] == ["END"]


async def test_missing_key_is_an_auth_error_naming_the_variable(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    async with _backend(server.root_url) as backend:
        with pytest.raises(BackendError) as caught:
            await _collect(
                backend.chat(_chat(ChatMessage("user", "hi")), permit=permit_for(backend))
            )
    assert caught.value.kind is FailureKind.AUTH
    assert KEY_ENV in str(caught.value)
    assert server.requests == []


async def test_wrong_key_is_an_auth_error_without_the_key(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "sk-ant-wrong-9876543210zyxwvutsrq"
    monkeypatch.setenv(KEY_ENV, wrong)
    async with _backend(server.root_url) as backend:
        with pytest.raises(BackendError) as caught:
            await _collect(
                backend.chat(_chat(ChatMessage("user", "hi")), permit=permit_for(backend))
            )
    assert caught.value.kind is FailureKind.AUTH
    assert caught.value.status == 401
    assert wrong not in str(caught.value) and wrong not in repr(caught.value.args)


@pytest.mark.parametrize(
    ("fault", "retry_after", "kind", "retry_after_s"),
    [
        ("status:500", None, FailureKind.SERVER, None),
        ("status:529", None, FailureKind.SERVER, None),
        ("status:429", "7", FailureKind.RATE_LIMITED, 7.0),
        ("status:404", None, FailureKind.NOT_FOUND, None),
    ],
)
async def test_http_errors_map_to_failure_kinds(
    backend: AnthropicBackend,
    server: FakeLLMServer,
    fault: str,
    retry_after: str | None,
    kind: FailureKind,
    retry_after_s: float | None,
) -> None:
    server.behaviour = Behaviour(fault=fault, retry_after=retry_after)
    with pytest.raises(BackendError) as caught:
        await _collect(backend.chat(_chat(ChatMessage("user", "hi")), permit=permit_for(backend)))
    assert caught.value.kind is kind
    assert caught.value.status == int(fault.partition(":")[2])
    assert caught.value.retry_after_s == retry_after_s
    assert KEY not in str(caught.value)


async def test_a_stream_without_message_stop_is_truncated(
    backend: AnthropicBackend, server: FakeLLMServer
) -> None:
    server.behaviour = Behaviour(text=ANSWER, fault="truncated")
    with pytest.raises(BackendError, match="truncated stream") as caught:
        await _collect(backend.chat(_chat(ChatMessage("user", "hi")), permit=permit_for(backend)))
    assert caught.value.kind is FailureKind.PROTOCOL


async def test_a_malformed_stream_is_a_protocol_error(
    backend: AnthropicBackend, server: FakeLLMServer
) -> None:
    server.behaviour = Behaviour(fault="malformed_json")
    with pytest.raises(BackendError) as caught:
        await _collect(backend.chat(_chat(ChatMessage("user", "hi")), permit=permit_for(backend)))
    assert caught.value.kind is FailureKind.PROTOCOL


async def test_cancelling_the_consumer_closes_the_stream_at_once(
    backend: AnthropicBackend, server: FakeLLMServer
) -> None:
    server.behaviour = Behaviour(text="x" * 400, chunk_chars=4, chunk_delay_s=0.05)
    first_piece = asyncio.Event()

    async def consume() -> None:
        async for _ in backend.chat(_chat(ChatMessage("user", "hi")), permit=permit_for(backend)):
            first_piece.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_piece.wait(), timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _eventually(lambda: server.disconnects == 1)
    assert server.completed_streams == 0


async def test_refused_connection_looks_offline(key: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with _backend(f"http://127.0.0.1:{port}") as backend:
        with pytest.raises(BackendError) as caught:
            await _collect(
                backend.chat(_chat(ChatMessage("user", "hi")), permit=permit_for(backend))
            )
    assert caught.value.kind is FailureKind.NETWORK
    assert caught.value.looks_offline


@pytest.mark.parametrize(
    ("error_type", "kind"),
    [
        ("overloaded_error", FailureKind.SERVER),
        ("rate_limit_error", FailureKind.RATE_LIMITED),
        ("api_error", FailureKind.SERVER),
        ("something_new", FailureKind.SERVER),
    ],
)
def test_error_events_in_a_stream_map_by_their_type(error_type: str, kind: FailureKind) -> None:
    error = stream_error("claude", {"type": error_type, "message": "Overloaded"})
    assert error.kind is kind
    assert error_type in error.message
