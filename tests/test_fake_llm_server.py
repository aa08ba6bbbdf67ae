"""The test endpoint server: each route, streaming and not, faults, records and lifecycle."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from httpx_sse import connect_sse

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer

TEXT = "return a + b\n"


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(Behaviour(text=TEXT)) as running:
        yield running


@pytest.fixture
def client(server: FakeLLMServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.root_url, timeout=5) as http:
        yield http


def sse_payloads(client: httpx.Client, path: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    with connect_sse(client, "POST", path, json=body) as events:
        return [(event.event, event.data) for event in events.iter_sse()]


def test_models_lists_the_configured_models(server: FakeLLMServer, client: httpx.Client) -> None:
    server.behaviour.models = ("fast", "smart")
    listing = client.get("/v1/models").json()
    assert listing["object"] == "list"
    assert [model["id"] for model in listing["data"]] == ["fast", "smart"]


def test_completions_answers_with_text_and_usage(
    server: FakeLLMServer, client: httpx.Client
) -> None:
    body = {"model": "m", "prompt": "def add(a, b):\n    ", "suffix": "\n"}
    answer = client.post("/v1/completions", json=body).json()
    assert answer["choices"][0]["text"] == TEXT
    assert answer["choices"][0]["finish_reason"] == "stop"
    assert answer["usage"]["completion_tokens"] > 0
    assert server.requests[0].json == body
    assert server.requests[0].path == "/v1/completions"


def test_completions_stream_sends_text_chunks_then_done(
    server: FakeLLMServer, client: httpx.Client
) -> None:
    events = sse_payloads(client, "/v1/completions", {"prompt": "x", "stream": True})
    assert events[-1][1] == "[DONE]"
    chunks = [json.loads(data) for _, data in events[:-1]]
    assert "".join(chunk["choices"][0]["text"] for chunk in chunks) == TEXT
    assert len(chunks) > 2
    assert server.wait_for(lambda s: s.completed_streams == 1 and s.open_streams == 0)


def test_chat_completions_answers_and_streams(client: httpx.Client) -> None:
    body = {"messages": [{"role": "user", "content": "add"}]}
    answer = client.post("/v1/chat/completions", json=body).json()
    assert answer["choices"][0]["message"] == {"role": "assistant", "content": TEXT}
    assert answer["usage"]["prompt_tokens"] > 0

    events = sse_payloads(client, "/v1/chat/completions", {**body, "stream": True})
    assert events[-1][1] == "[DONE]"
    deltas = [json.loads(data)["choices"][0]["delta"] for _, data in events[:-1]]
    assert "".join(delta.get("content", "") for delta in deltas) == TEXT


def test_messages_answers_and_streams_anthropic_events(client: httpx.Client) -> None:
    body = {"model": "claude", "max_tokens": 100, "messages": [{"role": "user", "content": "add"}]}
    answer = client.post("/v1/messages", json=body).json()
    assert answer["content"][0] == {"type": "text", "text": TEXT}
    assert answer["stop_reason"] == "end_turn"
    assert answer["usage"]["output_tokens"] > 0

    events = sse_payloads(client, "/v1/messages", {**body, "stream": True})
    names = [name for name, _ in events]
    assert names[:2] == ["message_start", "content_block_start"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    payloads = [json.loads(data) for _, data in events]
    deltas = [p["delta"] for p in payloads if p["type"] == "content_block_delta"]
    assert all(delta["type"] == "text_delta" for delta in deltas)
    assert "".join(delta["text"] for delta in deltas) == TEXT


def test_max_tokens_and_stop_cut_the_answer(server: FakeLLMServer, client: httpx.Client) -> None:
    server.behaviour.text = "first line\nsecond line\n"
    capped = client.post("/v1/completions", json={"prompt": "x", "max_tokens": 1}).json()
    assert capped["choices"][0]["text"] == "firs"
    assert capped["choices"][0]["finish_reason"] == "length"
    stopped = client.post("/v1/completions", json={"prompt": "x", "stop": ["\n"]}).json()
    assert stopped["choices"][0]["text"] == "first line"
    body = {"max_tokens": 50, "messages": [], "stop_sequences": ["second"]}
    anthropic = client.post("/v1/messages", json=body).json()
    assert anthropic["content"][0]["text"] == "first line\n"
    assert anthropic["stop_reason"] == "stop_sequence"


def test_text_may_depend_on_the_request(server: FakeLLMServer, client: httpx.Client) -> None:
    server.behaviour = Behaviour(text=lambda request: request["prompt"].upper())
    answer = client.post("/v1/completions", json={"prompt": "shout"}).json()
    assert answer["choices"][0]["text"] == "SHOUT"


def test_a_stream_keeps_its_own_pace_and_headers(
    server: FakeLLMServer, client: httpx.Client
) -> None:
    server.behaviour = Behaviour(
        text="abcdefgh", chunk_chars=4, gaps_s=(0.1, 0.1, 0.1), headers=(("x-paced", "yes"),)
    )
    started = time.monotonic()
    with client.stream("POST", "/v1/completions", json={"prompt": "x", "stream": True}) as r:
        parts = list(r.iter_raw())
        paced_header = r.headers["x-paced"]
    assert time.monotonic() - started >= 0.3  # a wait before each of the first three parts
    assert paced_header == "yes"
    assert b"".join(parts).endswith(b"data: [DONE]\n\n")


def test_under_load_it_keeps_counts_but_no_records() -> None:
    answered: list[tuple[str, float]] = []
    with FakeLLMServer(Behaviour(text=TEXT), for_load=True) as server:
        server.answered = lambda request, ended: answered.append((request.path, ended))
        with httpx.Client(base_url=server.root_url, timeout=5) as http:
            answer = http.post("/v1/completions", json={"prompt": "x"}).json()
        assert server.wait_for(lambda s: bool(answered))
    assert answer["choices"][0]["text"] == TEXT
    assert server.requests == []
    assert server.bytes_received > 0
    assert answered[0][0] == "/v1/completions"


def test_openai_sdk_streams_from_it(server: FakeLLMServer) -> None:
    sdk = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    stream = sdk.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "add"}], stream=True
    )
    assert "".join(chunk.choices[0].delta.content or "" for chunk in stream) == TEXT


def test_status_fault_returns_error_json_and_retry_after(
    server: FakeLLMServer, client: httpx.Client
) -> None:
    server.behaviour.fault = "status:429"
    server.behaviour.retry_after = "7"
    response = client.post("/v1/completions", json={"prompt": "x", "stream": True})
    assert response.status_code == 429
    assert response.headers["retry-after"] == "7"
    assert response.json()["error"]["type"] == "rate_limit_error"


@pytest.mark.parametrize("fault", ["hang_mid_stream", "slow_drip"])
def test_client_abort_mid_stream_counts_as_disconnect(
    server: FakeLLMServer, client: httpx.Client, fault: str
) -> None:
    server.behaviour.fault = fault
    body = {"messages": [], "stream": True}
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        chunks = response.iter_raw()
        assert next(chunks)
        assert server.open_streams == 1
    assert server.wait_for(lambda s: s.disconnects == 1 and s.open_streams == 0)
    assert server.completed_streams == 0


def test_hang_before_headers_ends_when_the_client_gives_up(
    server: FakeLLMServer, client: httpx.Client
) -> None:
    server.behaviour.fault = "hang_before_headers"
    with pytest.raises(httpx.ReadTimeout):
        client.post("/v1/messages", json={"messages": []}, timeout=0.3)
    assert server.wait_for(lambda s: s.disconnects == 1)


def test_truncated_stream_stops_halfway_without_done(
    server: FakeLLMServer, client: httpx.Client
) -> None:
    server.behaviour.fault = "truncated"
    events = sse_payloads(client, "/v1/completions", {"prompt": "x", "stream": True})
    assert all(data != "[DONE]" for _, data in events)
    text = "".join(json.loads(data)["choices"][0]["text"] for _, data in events)
    assert text == TEXT[: len(TEXT) // 2]

    cut = client.post("/v1/completions", json={"prompt": "x"})
    assert cut.status_code == 200
    with pytest.raises(ValueError):
        json.loads(cut.content)


@pytest.mark.parametrize("stream", [False, True])
def test_malformed_faults_are_not_readable_json(
    server: FakeLLMServer, client: httpx.Client, stream: bool
) -> None:
    server.behaviour.fault = "malformed_json"
    response = client.post("/v1/completions", json={"prompt": "x", "stream": stream})
    lines = [line.removeprefix("data: ") for line in response.text.splitlines() if line]
    with pytest.raises(ValueError):
        [json.loads(line) for line in lines if line != "[DONE]"]

    server.behaviour.fault = "malformed_sse"
    response = client.post("/v1/completions", json={"prompt": "x", "stream": stream})
    assert response.headers["content-type"] == "text/event-stream"
    assert not any(line.startswith("data:") for line in response.text.splitlines())


def test_oversized_body_is_megabytes(server: FakeLLMServer, client: httpx.Client) -> None:
    server.behaviour.fault = "oversized"
    assert len(client.post("/v1/completions", json={"prompt": "x"}).content) > 5_000_000


def test_bytes_received_counts_request_line_headers_and_body(server: FakeLLMServer) -> None:
    body = b'{"prompt": "secret document", "max_tokens": 4}'
    raw = (
        b"POST /v1/completions HTTP/1.1\r\n"
        b"Host: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n"
        b"Connection: close\r\n"
        b"\r\n" + body
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as connection:
        connection.sendall(raw)
        assert b"200 OK" in connection.recv(65536)
    assert server.bytes_received == len(raw)
    assert "secret document" in server.received_text()
    server.reset()
    assert (server.bytes_received, server.requests, server.received_text()) == (0, [], "")


def test_api_key_is_required_per_api_style() -> None:
    with FakeLLMServer(api_key="k-123") as guarded, httpx.Client(base_url=guarded.root_url) as http:
        completion = {"prompt": "x"}
        message = {"max_tokens": 8, "messages": []}
        assert http.post("/v1/completions", json=completion).status_code == 401
        bearer = {"Authorization": "Bearer k-123"}
        assert http.post("/v1/completions", json=completion, headers=bearer).status_code == 200
        assert http.post("/v1/messages", json=message, headers=bearer).status_code == 401
        x_api_key = {"x-api-key": "k-123"}
        assert http.post("/v1/messages", json=message, headers=x_api_key).status_code == 200
        assert http.get("/v1/models", headers=bearer).status_code == 200


def test_stop_returns_promptly_with_a_hung_request_open() -> None:
    server = FakeLLMServer(Behaviour(fault="hang_before_headers")).start()
    outcome: list[object] = []

    def hung_call() -> None:
        try:
            outcome.append(httpx.post(f"{server.base_url}/completions", json={}, timeout=30))
        except httpx.HTTPError as error:
            outcome.append(error)

    caller = threading.Thread(target=hung_call)
    caller.start()
    assert server.wait_for(lambda s: len(s.requests) == 1)
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 5
    caller.join(timeout=5)
    assert outcome, "the hung client was not released"


def test_runs_as_a_command() -> None:
    command = [sys.executable, "-m", "bench.harness.fake_llm_server", "--port", "0"]
    command += ["--text", "hello"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as process:
        try:
            assert process.stdout is not None
            base_url = process.stdout.readline().decode().split()[2]
            answer = httpx.post(f"{base_url}/completions", json={"prompt": "x"}).json()
            assert answer["choices"][0]["text"] == "hello"
        finally:
            process.terminate()


async def test_async_tests_can_wait_without_blocking_their_loop(server: FakeLLMServer) -> None:
    server.behaviour.chunk_delay_s = 0.01
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        body = {"prompt": "x", "stream": True}
        async with http.stream("POST", "/completions", json=body) as response:
            assert await server.wait_for_async(lambda s: s.open_streams == 1)
            await response.aread()
    assert await server.wait_for_async(lambda s: s.completed_streams == 1)


def test_port_in_use_fails_to_start(server: FakeLLMServer) -> None:
    with pytest.raises(OSError):
        FakeLLMServer(port=server.port).start()
