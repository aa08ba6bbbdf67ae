"""End to end: `POST /v1/responses` on `gateway-ls gateway`, a subprocess on 127.0.0.1, in front
of loopback upstreams the tests own: what the client reads (events in order, the response
object, errors and their codes), what the upstream receives (the chat completion a request
becomes, or the request itself for an endpoint with `responses_path`), and what never leaves
the machine."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, cast

import httpx
import openai
import pytest
from openai.types.responses import FunctionToolParam

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from bench.harness.scripted_agent import ScriptedAgentServer, ToolScript, call_tool
from tests.support.config_text import AWS_KEY_ID, LOCAL_OFF
from tests.support.gateway_process import Gateway, running_gateway
from tests.support.lsp_session import endpoint_toml
from tests.support.weather_agent import (
    ANSWER_AFTER_TOOL,
    ANTHROPIC_KEY,
    ANTHROPIC_KEY_ENV,
    WEATHER_ARGUMENTS,
    weather_agent,
)

# The API takes `strict` as optional (the test sends none); the SDK's type requires it.
WEATHER_TOOL = cast(
    FunctionToolParam,
    {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
)


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedAgentServer]:
    with ScriptedAgentServer(ToolScript(call_tool("get_weather", city="Oslo"))) as server:
        yield server


@pytest.fixture(scope="module")
def limited() -> Iterator[FakeLLMServer]:
    """An upstream that answers every request with 429."""
    with FakeLLMServer(Behaviour(fault="status:429", retry_after="7"), name="limited") as server:
        yield server


@pytest.fixture(scope="module")
def talker() -> Iterator[FakeLLMServer]:
    """An upstream that talks slowly: a long answer in small, spaced pieces."""
    behaviour = Behaviour(text="word " * 400, chunk_chars=5, chunk_delay_s=0.05)
    with FakeLLMServer(behaviour, name="talker") as server:
        yield server


@pytest.fixture(scope="module")
def claude() -> Iterator[FakeLLMServer]:
    """An Anthropic Messages API upstream that calls `get_weather`, then answers in words."""
    with FakeLLMServer(weather_agent(), name="claude", api_key=ANTHROPIC_KEY) as server:
        yield server


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory,
    model: ScriptedAgentServer,
    limited: FakeLLMServer,
    claude: FakeLLMServer,
    talker: FakeLLMServer,
) -> Iterator[Gateway]:
    config = (
        "[routing]\nrefactor_deadline_ms = 30000\n"
        + LOCAL_OFF
        + endpoint_toml("scripted", model.base_url, fim=False, roles='["agent"]')
        + endpoint_toml("limited", limited.base_url, fim=False, roles='["refactor"]')
        + endpoint_toml(
            "native",
            model.base_url,
            fim=False,
            roles='["refactor"]',
            extra='responses_path = "/responses"',
        )
    )
    config += endpoint_toml("talker", talker.base_url, fim=False, roles='["refactor"]')
    config += (
        f'[[endpoints]]\nname = "claude"\nkind = "anthropic"\nbase_url = "{claude.root_url}"\n'
        f'model = "claude-test"\napi_key_env = "{ANTHROPIC_KEY_ENV}"\nroles = ["refactor"]\n'
    )
    directory = tmp_path_factory.mktemp("responses-gateway")
    with running_gateway(directory, config, env={ANTHROPIC_KEY_ENV: ANTHROPIC_KEY}) as running:
        yield running


@pytest.fixture(autouse=True)
def fresh_records(
    model: ScriptedAgentServer, limited: FakeLLMServer, claude: FakeLLMServer, talker: FakeLLMServer
) -> None:
    for server in (model, limited, claude, talker):
        server.quiet()


def post(gateway: Gateway, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(f"{gateway.base_url}/responses", json=body, headers=headers, timeout=30)


def events_of(response: httpx.Response) -> list[dict[str, Any]]:
    """The data of each server-sent event, checked against its `event:` name."""
    events = []
    for block in response.text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        event = json.loads(lines["data"])
        assert lines["event"] == event["type"]
        events.append(event)
    return events


def test_a_request_becomes_one_chat_completion_upstream(
    gateway: Gateway, model: ScriptedAgentServer
) -> None:
    response = post(
        gateway,
        {
            "model": "auto",
            "instructions": "Use the tools.",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "Oslo?"}]}],
            "tools": [WEATHER_TOOL],
            "tool_choice": "required",
            "parallel_tool_calls": False,
            "max_output_tokens": 300,
            "text": {"format": {"type": "json_object"}},
            "store": False,
        },
    )
    assert response.status_code == 200, response.text
    assert response.headers["x-gateway-ls-endpoint"] == "scripted"
    (sent,) = [r.payload for r in model.requests if r.path == "/v1/chat/completions"]
    assert sent["messages"][:2] == [
        {"role": "system", "content": "Use the tools."},
        {"role": "user", "content": "Oslo?"},
    ]
    assert sent["tools"][0]["function"]["name"] == "get_weather"
    assert sent["tool_choice"] == "required"
    assert sent["parallel_tool_calls"] is False
    assert sent["response_format"] == {"type": "json_object"}
    assert sent.get("max_completion_tokens", sent.get("max_tokens")) == 300
    assert "temperature" not in sent and "store" not in sent
    body = response.json()
    assert body["object"] == "response" and body["status"] == "completed"
    assert body["model"] == "scripted"
    (call,) = body["output"]
    assert (call["type"], call["name"], json.loads(call["arguments"])) == (
        "function_call",
        "get_weather",
        {"city": "Oslo"},
    )
    assert body["usage"]["total_tokens"] == (
        body["usage"]["input_tokens"] + body["usage"]["output_tokens"]
    )


def test_a_stream_is_the_whole_event_sequence_in_order(gateway: Gateway) -> None:
    body = {
        "input": [
            {"role": "user", "content": "Oslo?"},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "rain"},
        ],
        "tools": [WEATHER_TOOL],
        "stream": True,
    }
    response = post(gateway, body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = events_of(response)
    kinds = [event["type"] for event in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert set(kinds[4:-4]) == {"response.output_text.delta"}
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    text = "".join(event["delta"] for event in events if event["type"].endswith("text.delta"))
    assert text == "The tool said: rain"
    completed = events[-1]["response"]
    assert completed["status"] == "completed" and completed["usage"]["output_tokens"] > 0
    assert completed["output"][0]["content"][0]["text"] == text


def test_the_sdk_reads_streamed_tool_call_arguments(gateway: Gateway) -> None:
    client = openai.OpenAI(base_url=gateway.base_url, api_key="unused", max_retries=0)
    with client.responses.stream(model="auto", input="Oslo?", tools=[WEATHER_TOOL]) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.function_call_arguments.delta" in kinds
    assert kinds.index("response.function_call_arguments.done") < kinds.index(
        "response.output_item.done"
    )
    (call,) = final.output
    assert call.type == "function_call" and json.loads(call.arguments) == {"city": "Oslo"}


def test_previous_response_id_is_a_clear_400(gateway: Gateway, model: ScriptedAgentServer) -> None:
    response = post(gateway, {"input": "hi", "previous_response_id": "resp_123"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "previous_response_id"
    assert error["code"] == "unsupported_parameter"
    assert "whole conversation" in error["message"]
    assert model.requests == []


@pytest.mark.parametrize(
    "item",
    [
        {"type": "function_call_output", "call_id": "c1", "output": f'AWS_KEY = "{AWS_KEY_ID}"'},
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "f",
            "arguments": f'{{"k": "{AWS_KEY_ID}"}}',
        },
        {"role": "user", "content": [{"type": "input_text", "text": f"key {AWS_KEY_ID}"}]},
    ],
    ids=["tool-output", "tool-arguments", "text-part"],
)
def test_a_secret_anywhere_in_the_input_never_leaves_the_machine(
    gateway: Gateway, model: ScriptedAgentServer, limited: FakeLLMServer, item: dict[str, Any]
) -> None:
    response = post(gateway, {"input": [{"role": "user", "content": "go"}, item], "stream": True})
    assert response.status_code == 503
    assert "local model is disabled" in response.json()["error"]["message"]
    assert model.requests == [] and limited.requests == []
    assert AWS_KEY_ID not in model.received_text()


def test_a_secret_in_instructions_or_a_tool_description_never_leaves_the_machine(
    gateway: Gateway, model: ScriptedAgentServer
) -> None:
    described = {**WEATHER_TOOL, "description": f"uses {AWS_KEY_ID}"}
    for body in (
        {"input": "hi", "instructions": f"token {AWS_KEY_ID}"},
        {"input": "hi", "tools": [described]},
    ):
        assert post(gateway, body).status_code == 503
    assert model.requests == []


def test_an_upstream_rate_limit_is_response_failed_with_the_code_clients_retry_on(
    gateway: Gateway, limited: FakeLLMServer
) -> None:
    response = post(gateway, {"model": "limited", "input": "hi", "stream": True})
    assert response.status_code == 200
    events = events_of(response)
    assert [event["type"] for event in events] == [
        "response.created",
        "response.in_progress",
        "response.failed",
    ]
    failed = events[-1]["response"]
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == "rate_limit_exceeded"
    assert "try again in 7s" in failed["error"]["message"]
    assert limited.requests  # it was asked


def test_an_upstream_rate_limit_not_streamed_is_an_http_429(gateway: Gateway) -> None:
    client = openai.OpenAI(base_url=gateway.base_url, api_key="unused", max_retries=0)
    with pytest.raises(openai.RateLimitError) as raised:
        client.responses.create(model="limited", input="hi")
    assert isinstance(raised.value.body, dict)
    assert raised.value.body["code"] == "rate_limit_exceeded"


def test_an_endpoint_with_responses_path_gets_the_request_as_sent(
    gateway: Gateway, model: ScriptedAgentServer
) -> None:
    client = openai.OpenAI(base_url=gateway.base_url, api_key="unused", max_retries=0)
    first = client.responses.create(
        model="native", input="Oslo?", tools=[WEATHER_TOOL], store=False
    )
    with client.responses.stream(model="native", input="Oslo?", tools=[WEATHER_TOOL]) as stream:
        streamed = stream.get_final_response()
    paths = [r.path for r in model.requests]
    assert paths == ["/v1/responses", "/v1/responses"]
    sent = model.requests[0].payload
    assert sent["model"] == "fake-model"  # the endpoint's own model
    assert sent["tools"] == [WEATHER_TOOL] and sent["store"] is False
    for response in (first, streamed):
        (call,) = response.output
        assert call.type == "function_call" and call.name == "get_weather"
    status = httpx.get(f"{gateway.base_url}/gateway-ls/status", timeout=10).json()
    native = next(e for e in status["endpoints"] if e["name"] == "native")
    assert (native["requests"], native["errors"]) == (2, 0)  # counted as any chat is


def test_a_sensitive_request_for_a_pass_through_endpoint_stays_local(
    gateway: Gateway, model: ScriptedAgentServer
) -> None:
    response = post(gateway, {"model": "native", "input": "hi"}, **{"X-Gateway-LS-Sensitive": "1"})
    assert response.status_code == 503
    assert model.requests == []


def test_unknown_models_and_bad_bodies_are_openai_shaped(gateway: Gateway) -> None:
    missing = post(gateway, {"model": "gpt-5", "input": "hi"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"
    bad = post(gateway, {"input": [{"type": "item_reference", "id": "msg_1"}]})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "input[0].type"


def test_an_anthropic_endpoint_serves_a_responses_tool_round_trip(
    gateway: Gateway, claude: FakeLLMServer
) -> None:
    client = openai.OpenAI(base_url=gateway.base_url, api_key="unused", max_retries=0)
    items: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
    with client.responses.stream(model="claude", input=items, tools=[WEATHER_TOOL]) as stream:
        first = stream.get_final_response()
    (call,) = first.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == json.loads(WEATHER_ARGUMENTS)
    items += [item.model_dump(exclude_none=True) for item in first.output]
    items.append({"type": "function_call_output", "call_id": call.call_id, "output": "21 C"})
    final = client.responses.create(model="claude", input=items, tools=[WEATHER_TOOL])
    assert final.output_text == ANSWER_AFTER_TOOL
    last = claude.requests[-1]
    assert last.path == "/v1/messages"
    blocks = [b for m in last.payload["messages"] for b in m["content"] if isinstance(b, dict)]
    assert {"tool_use", "tool_result"} <= {b["type"] for b in blocks}
    result = next(b for b in blocks if b["type"] == "tool_result")
    assert result["tool_use_id"] == call.call_id


def test_a_client_that_leaves_mid_stream_stops_the_upstream(
    gateway: Gateway, talker: FakeLLMServer
) -> None:
    body = {"model": "talker", "input": "talk", "stream": True}
    with httpx.stream("POST", f"{gateway.base_url}/responses", json=body, timeout=30) as response:
        for line in response.iter_lines():
            if "response.output_text.delta" in line:
                break  # leave, with the answer half said
    assert talker.wait_for(lambda server: server.disconnects >= 1, timeout_s=15)
    assert talker.completed_streams == 0
