"""End to end: agents' chat through `gateway-ls gateway` (a subprocess on 127.0.0.1), with the
real `openai` SDK and raw HTTP, in front of scripted tool-using upstreams the tests own: one
OpenAI-compatible (role `agent`), one Anthropic (role `refactor`), one FIM-only (role `inline`).

What is checked: every field a client sends reaches the upstream (and temperature only when
sent); tool calls come back unchanged, streamed per the spec and not; tool history goes up
intact; the Anthropic kind is translated both ways; task classes pick their endpoints; a request
carrying a secret anywhere (a tool's arguments, a tool's result) never leaves the machine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionContentPartParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
)

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.config_text import AWS_KEY_ID
from tests.support.gateway_process import Gateway, running_gateway
from tests.support.lsp_session import endpoint_toml
from tests.support.weather_agent import (
    ANSWER_AFTER_TOOL,
    ANTHROPIC_KEY,
    ANTHROPIC_KEY_ENV,
    WEATHER_ARGUMENTS,
    weather_agent,
)

WEATHER_TOOL: ChatCompletionFunctionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
ASK: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the weather in Paris?"}
]


@pytest.fixture(scope="module")
def agent_up() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(weather_agent(), name="agent") as server:
        yield server


@pytest.fixture(scope="module")
def claude_up() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(weather_agent(), name="claude", api_key=ANTHROPIC_KEY) as server:
        yield server


@pytest.fixture(scope="module")
def coder_up() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(Behaviour(text="return 1\n"), name="coder") as server:
        yield server


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory,
    agent_up: FakeLLMServer,
    claude_up: FakeLLMServer,
    coder_up: FakeLLMServer,
) -> Iterator[Gateway]:
    config = (
        "[local]\nenabled = false\n"
        + endpoint_toml(
            "agent", agent_up.base_url, fim=False, roles='["agent"]', extra="chat_max_tokens = 6000"
        )
        + '[[endpoints]]\nname = "claude"\nkind = "anthropic"\n'
        + f'base_url = "{claude_up.root_url}"\nmodel = "claude-test"\n'
        + f'api_key_env = "{ANTHROPIC_KEY_ENV}"\nroles = ["refactor"]\n\n'
        + endpoint_toml("coder", coder_up.base_url)
    )
    directory = tmp_path_factory.mktemp("agents")
    with running_gateway(directory, config, env={ANTHROPIC_KEY_ENV: ANTHROPIC_KEY}) as running:
        yield running


@pytest.fixture(autouse=True)
def fresh_records(agent_up: FakeLLMServer, claude_up: FakeLLMServer) -> None:
    for server in (agent_up, claude_up):
        server.quiet()
        server.behaviour = weather_agent()


def chat_bodies(server: FakeLLMServer) -> list[dict[str, Any]]:
    return [r.json for r in server.requests if r.method == "POST" and r.json]


def sse_payloads(response: httpx.Response) -> list[Any]:
    """The data of each event of a finished SSE response, `[DONE]` as the string."""
    payloads: list[Any] = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            payloads.append(data if data == "[DONE]" else json.loads(data))
    return payloads


def post_stream(gateway: Gateway, body: dict[str, Any]) -> list[Any]:
    with (
        httpx.Client(timeout=30) as client,
        client.stream("POST", f"{gateway.base_url}/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200, response.read()
        return sse_payloads(response)


def assert_streamed_tool_call(payloads: list[Any], name: str, arguments: str) -> None:
    """The stream keeps the spec: every tool-call delta has `index`; the first carries `id`,
    `type` and `function.name`; the id never changes; the argument pieces add up; the stream
    ends with `finish_reason: tool_calls`."""
    assert payloads[-1] == "[DONE]"
    chunks = [p for p in payloads[:-1] if p.get("choices")]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    pieces = [call for delta in deltas for call in delta.get("tool_calls", [])]
    assert pieces, "no tool-call delta"
    assert all(piece["index"] == 0 for piece in pieces)
    first = pieces[0]
    assert first["id"] and first["type"] == "function" and first["function"]["name"] == name
    assert all(piece.get("id", first["id"]) == first["id"] for piece in pieces)
    assert "".join(p["function"].get("arguments", "") for p in pieces) == arguments
    assert len(pieces) > 2, "the arguments came in one piece; the test means to see them chunked"
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


# --- forwarding ---------------------------------------------------------------------------


def test_every_field_a_client_sends_reaches_the_upstream(
    gateway: Gateway, agent_up: FakeLLMServer
) -> None:
    schema = {
        "type": "json_schema",
        "json_schema": {
            "name": "weather",
            "strict": True,
            "schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    body = {
        "model": "agent",
        "messages": [
            {"role": "developer", "content": "Answer briefly."},
            {"role": "user", "content": [{"type": "text", "text": "What is this?"}, image]},
        ],
        "tools": [WEATHER_TOOL],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "parallel_tool_calls": False,
        "response_format": schema,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_completion_tokens": 4096,
        "reasoning_effort": "low",
        "seed": 7,
        "top_p": 0.5,
        "stop": ["\n\n"],
        "user": "user-42",
        "metadata": {"session": "s1"},
        "x_vendor_knob": {"deep": [1, 2]},
    }
    post_stream(gateway, body)
    (sent,) = chat_bodies(agent_up)
    for name in (
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "response_format",
        "max_completion_tokens",
        "reasoning_effort",
        "seed",
        "top_p",
        "stop",
        "user",
        "metadata",
        "x_vendor_knob",
    ):
        assert sent[name] == body[name], name
    assert sent["messages"] == body["messages"]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert "temperature" not in sent
    assert "max_tokens" not in sent


def test_temperature_goes_up_only_when_sent_and_the_clients_token_cap_wins_below_the_chat_cap(
    gateway: Gateway, agent_up: FakeLLMServer
) -> None:
    client = gateway.client()
    client.chat.completions.create(model="agent", messages=ASK, max_tokens=4096)
    client.chat.completions.create(model="agent", messages=ASK, temperature=0.7, max_tokens=9999)
    client.chat.completions.create(model="agent", messages=ASK)
    first, second, third = chat_bodies(agent_up)
    assert "temperature" not in first and first["max_tokens"] == 4096  # not the inline 64
    assert second["temperature"] == 0.7 and second["max_tokens"] == 6000  # chat_max_tokens
    assert third["max_tokens"] == 6000


def test_tool_history_goes_up_intact(gateway: Gateway, agent_up: FakeLLMServer) -> None:
    call: ChatCompletionMessageFunctionToolCallParam = {
        "id": "call_abc",
        "type": "function",
        "function": {"name": "get_weather", "arguments": WEATHER_ARGUMENTS},
    }
    messages: list[ChatCompletionMessageParam] = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_abc", "content": '{"celsius": 21}'},
    ]
    reply = gateway.client().chat.completions.create(
        model="agent", messages=messages, tools=[WEATHER_TOOL]
    )
    assert reply.choices[0].message.content == ANSWER_AFTER_TOOL
    (sent,) = chat_bodies(agent_up)
    assert sent["messages"] == messages
    assert sent["tools"] == [WEATHER_TOOL]


# --- tool calls back, OpenAI upstream -----------------------------------------------------


def test_a_tool_call_comes_back_whole_when_not_streamed(gateway: Gateway) -> None:
    raw = gateway.client().chat.completions.with_raw_response.create(
        model="agent", messages=ASK, tools=[WEATHER_TOOL]
    )
    reply = raw.parse()
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.type == "function" and call.id
    assert call.function.name == "get_weather"
    assert call.function.arguments == WEATHER_ARGUMENTS
    assert reply.usage is not None and reply.usage.completion_tokens > 0
    assert raw.headers["x-gateway-ls-endpoint"] == "agent"


def test_a_streamed_tool_call_keeps_the_spec_and_usage_comes_last_when_asked(
    gateway: Gateway,
) -> None:
    body = {
        "model": "auto",
        "messages": ASK,
        "tools": [WEATHER_TOOL],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    payloads = post_stream(gateway, body)
    assert_streamed_tool_call(payloads, "get_weather", WEATHER_ARGUMENTS)
    usage_chunk = payloads[-2]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["total_tokens"] > 0


@pytest.mark.parametrize("model", ["agent", "claude"])
def test_parallel_tool_calls_stream_each_under_its_own_index(
    gateway: Gateway, agent_up: FakeLLMServer, claude_up: FakeLLMServer, model: str
) -> None:
    two = (
        {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
    )
    for server in (agent_up, claude_up):
        server.behaviour = Behaviour(text="", tool_calls=two, chunk_chars=4)
    payloads = post_stream(
        gateway, {"model": model, "messages": ASK, "tools": [WEATHER_TOOL], "stream": True}
    )
    pieces = [
        call for p in payloads[:-1] for call in p["choices"][0]["delta"].get("tool_calls", [])
    ]
    ids: dict[int, str] = {}
    arguments: dict[int, str] = {}
    for piece in pieces:
        if "id" in piece:
            assert piece["index"] not in ids, "a call was opened twice"
            ids[piece["index"]] = piece["id"]
        arguments[piece["index"]] = arguments.get(piece["index"], "") + piece["function"].get(
            "arguments", ""
        )
    assert sorted(ids) == [0, 1] and ids[0] != ids[1]
    assert [json.loads(arguments[i])["city"] for i in (0, 1)] == ["Paris", "Oslo"]


def test_a_tool_call_without_arguments_gets_an_empty_object(
    gateway: Gateway, agent_up: FakeLLMServer
) -> None:
    agent_up.behaviour = weather_agent(arguments="")
    reply = gateway.client().chat.completions.create(
        model="agent", messages=ASK, tools=[WEATHER_TOOL]
    )
    call = (reply.choices[0].message.tool_calls or [])[0]
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert call.function.arguments == "{}"
    payloads = post_stream(
        gateway, {"model": "agent", "messages": ASK, "tools": [WEATHER_TOOL], "stream": True}
    )
    pieces = [
        call for p in payloads[:-1] for call in p["choices"][0]["delta"].get("tool_calls", [])
    ]
    assert "".join(p["function"].get("arguments", "") for p in pieces) == "{}"


def test_an_upstream_refusing_the_request_is_told_as_it_said_and_trips_no_breaker(
    gateway: Gateway, agent_up: FakeLLMServer
) -> None:
    agent_up.behaviour = Behaviour(fault="status:400")
    client = gateway.client()
    for _ in range(4):  # more than a breaker takes to open on failures
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="agent", messages=ASK, tools=[WEATHER_TOOL])
        assert caught.value.code == "upstream_rejected"
        assert "agent refused the request" in caught.value.message
    status = httpx.get(f"{gateway.base_url}/gateway-ls/status", timeout=10).json()
    (agent,) = [e for e in status["endpoints"] if e["name"] == "agent"]
    assert agent["health"] != "open" and agent["errors"] == 0
    agent_up.behaviour = weather_agent()
    reply = client.chat.completions.create(model="agent", messages=ASK, tools=[WEATHER_TOOL])
    assert reply.choices[0].finish_reason == "tool_calls"


# --- the Anthropic kind -------------------------------------------------------------------


def test_anthropic_requests_carry_tools_and_tool_history_as_blocks(
    gateway: Gateway, claude_up: FakeLLMServer
) -> None:
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "You are terse."},
        *ASK,
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": WEATHER_ARGUMENTS},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"celsius": 21}'},
    ]
    reply = gateway.client().chat.completions.create(
        model="reasoning",
        messages=messages,
        tools=[WEATHER_TOOL],
        tool_choice="required",
        parallel_tool_calls=False,
    )
    assert reply.choices[0].message.content == ANSWER_AFTER_TOOL
    assert reply.choices[0].finish_reason == "stop"
    (sent,) = chat_bodies(claude_up)
    assert sent["system"] == "You are terse."
    assert sent["tools"] == [
        {
            "name": "get_weather",
            "description": "The weather in a city.",
            "input_schema": WEATHER_TOOL["function"]["parameters"],
        }
    ]
    assert sent["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert "temperature" not in sent
    assert sent["messages"] == [
        {"role": "user", "content": ASK[0]["content"]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": "call_1",
                    "name": "get_weather",
                    "input": json.loads(WEATHER_ARGUMENTS),
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": '{"celsius": 21}'}
            ],
        },
    ]


def test_anthropic_tool_use_comes_back_as_openai_tool_calls(
    gateway: Gateway, claude_up: FakeLLMServer
) -> None:
    reply = gateway.client().chat.completions.create(
        model="claude", messages=ASK, tools=[WEATHER_TOOL]
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert call.id.startswith("call_") and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == json.loads(WEATHER_ARGUMENTS)
    payloads = post_stream(
        gateway, {"model": "claude", "messages": ASK, "tools": [WEATHER_TOOL], "stream": True}
    )
    assert_streamed_tool_call(payloads, "get_weather", WEATHER_ARGUMENTS)


def test_anthropic_images_become_image_blocks(gateway: Gateway, claude_up: FakeLLMServer) -> None:
    parts: list[ChatCompletionContentPartParam] = [
        {"type": "text", "text": "Describe it."},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
    ]
    gateway.client().chat.completions.create(
        model="claude", messages=[{"role": "user", "content": parts}]
    )
    (sent,) = chat_bodies(claude_up)
    assert sent["messages"][0]["content"] == [
        {"type": "text", "text": "Describe it."},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
    ]


# --- task classes -------------------------------------------------------------------------


def test_models_lists_classes_and_endpoints(gateway: Gateway) -> None:
    names = [model.id for model in gateway.client().models.list().data]
    assert names == ["gateway-ls", "auto", "fast", "reasoning", "local", "agent", "claude", "coder"]


@pytest.mark.parametrize(
    ("model", "served_by"),
    [("auto", "agent"), ("gateway-ls", "agent"), ("reasoning", "claude"), ("agent", "agent")],
)
def test_each_class_goes_where_it_says(gateway: Gateway, model: str, served_by: str) -> None:
    raw = gateway.client().chat.completions.with_raw_response.create(model=model, messages=ASK)
    assert raw.headers["x-gateway-ls-endpoint"] == served_by


def test_fast_goes_to_an_endpoint_that_chats(gateway: Gateway) -> None:
    raw = gateway.client().chat.completions.with_raw_response.create(model="fast", messages=ASK)
    assert raw.headers["x-gateway-ls-endpoint"] in ("agent", "claude")


def test_a_fim_only_endpoint_is_no_chat_model(gateway: Gateway) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        gateway.client().chat.completions.create(model="coder", messages=ASK)
    assert caught.value.code == "model_not_supported"


def test_local_with_the_local_model_off_is_a_clear_503(gateway: Gateway) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        gateway.client().chat.completions.create(model="local", messages=ASK)
    assert caught.value.status_code == 503
    assert "local model is disabled" in caught.value.message


# --- privacy over everything an agent sends -----------------------------------------------


@pytest.mark.parametrize(
    "messages",
    [
        [
            *ASK,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "deploy", "arguments": f'{{"key": "{AWS_KEY_ID}"}}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "done"},
        ],
        [
            *ASK,
            {"role": "assistant", "content": None, "tool_calls": []},
            {
                "role": "tool",
                "tool_call_id": "call_1",
                "content": f"AWS_ACCESS_KEY_ID={AWS_KEY_ID}",
            },
        ],
        [{"role": "user", "content": [{"type": "text", "text": f"use {AWS_KEY_ID}"}]}],
    ],
    ids=["tool-arguments", "tool-result", "text-part"],
)
def test_a_secret_anywhere_in_an_agents_request_never_leaves_the_machine(
    gateway: Gateway,
    agent_up: FakeLLMServer,
    claude_up: FakeLLMServer,
    messages: list[ChatCompletionMessageParam],
) -> None:
    for model in ("auto", "agent", "reasoning"):
        with pytest.raises(openai.APIStatusError) as caught:
            gateway.client().chat.completions.create(
                model=model, messages=messages, tools=[WEATHER_TOOL]
            )
        assert caught.value.status_code == 503
        assert "must stay on this machine" in caught.value.message
    assert agent_up.requests == [] and claude_up.requests == []
    assert agent_up.bytes_received == 0 and claude_up.bytes_received == 0


def test_a_secret_in_a_later_turn_or_an_edited_earlier_one_never_leaves(
    gateway: Gateway, agent_up: FakeLLMServer
) -> None:
    """Turn after turn the gateway judges only what it has not judged clean before; a secret
    in a new turn, or in an earlier message an agent rewrote, is still caught."""
    client = gateway.client()
    history: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "You are a careful coding agent.\n" * 200},
        *ASK,
        {"role": "assistant", "content": "Let me look at the settings first."},
    ]
    asked = len(agent_up.requests)
    client.chat.completions.create(model="agent", messages=history, tools=[WEATHER_TOOL])
    assert len(agent_up.requests) == asked + 1
    with_secret: list[ChatCompletionMessageParam] = [
        *history,
        {"role": "user", "content": f"The key is {AWS_KEY_ID}"},
    ]
    edited: list[ChatCompletionMessageParam] = [
        history[0],
        {"role": "user", "content": f"Weather? key={AWS_KEY_ID}"},
        history[2],
    ]
    followed: list[ChatCompletionMessageParam] = [*edited, {"role": "user", "content": "And now?"}]
    for messages in (with_secret, edited, followed):
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model="agent", messages=messages, tools=[WEATHER_TOOL])
        assert caught.value.status_code == 503
    client.chat.completions.create(model="agent", messages=history, tools=[WEATHER_TOOL])
    assert len(agent_up.requests) == asked + 2
    assert all(AWS_KEY_ID.encode() not in r.body for r in agent_up.requests)


# --- a real client's round trip -----------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("model", ["agent", "claude"])
def test_an_openai_sdk_tool_round_trip(gateway: Gateway, model: str, stream: bool) -> None:
    """The loop every agent runs: ask with tools, run the tool the model calls, send the
    result back, read the answer."""
    client = gateway.client()
    messages: list[Any] = list(ASK)
    completion: ChatCompletion
    if stream:
        with client.chat.completions.stream(
            model=model, messages=messages, tools=[WEATHER_TOOL]
        ) as events:
            for _ in events:
                pass
            completion = events.get_final_completion()
    else:
        completion = client.chat.completions.create(
            model=model, messages=messages, tools=[WEATHER_TOOL]
        )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert call.function.name == "get_weather"
    city = json.loads(call.function.arguments)["city"]
    messages.append(choice.message.model_dump(exclude_none=True, exclude={"parsed"}))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": f"21 degrees in {city}"})
    final = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER_TOOL])
    assert final.choices[0].finish_reason == "stop"
    assert final.choices[0].message.content == ANSWER_AFTER_TOOL
