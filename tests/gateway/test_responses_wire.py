"""The Responses API translated to a chat completion and back, checked against the `openai`
SDK's own types (what the SDK parses is what Codex CLI and the Agents SDK read)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from lsp_server.backends.http_failures import status_failure_kind
from lsp_server.failures import EndpointFailure, FailureKind
from lsp_server.gateway.errors import responses_code
from lsp_server.gateway.openai_wire import GatewayError
from lsp_server.gateway.responses_request import parse_responses_body
from lsp_server.gateway.responses_stream import ResponseStream
from lsp_server.gateway.sse import named_sse_event

pytestmark = pytest.mark.unit

EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": True,
}


def chat_of(payload: dict[str, Any]) -> dict[str, Any]:
    return parse_responses_body(payload).chat


# --- request ----------------------------------------------------------------------------------


def test_a_string_input_is_one_user_message_and_instructions_lead_as_system() -> None:
    chat = chat_of({"model": "fast", "input": "hi", "instructions": "be brief"})
    assert chat == {
        "model": "fast",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"},
        ],
    }


def test_no_model_routes_automatically_and_streaming_asks_for_usage() -> None:
    request = parse_responses_body({"input": "hi", "stream": True})
    assert request.stream
    assert request.chat["model"] == "auto"
    assert request.chat["stream"] is True
    assert request.chat["stream_options"] == {"include_usage": True}


def test_items_become_the_chat_history_with_tool_calls_and_results_intact() -> None:
    chat = chat_of(
        {
            "input": [
                {"role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "weather in "},
                        {"type": "input_text", "text": "Oslo?"},
                    ],
                },
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
                },
                {
                    "type": "function_call",
                    "call_id": "call_a",
                    "name": "get_weather",
                    "arguments": '{"city":"Oslo"}',
                },
                {
                    "type": "function_call",
                    "call_id": "call_b",
                    "name": "get_weather",
                    "arguments": '{"city":"Bergen"}',
                },
                {"type": "function_call_output", "call_id": "call_a", "output": "rain"},
                {
                    "type": "function_call_output",
                    "call_id": "call_b",
                    "output": [{"type": "input_text", "text": "sun"}],
                },
                {"type": "reasoning", "id": "rs_1", "summary": []},
            ]
        }
    )
    assert chat["messages"] == [
        {"role": "developer", "content": "rules"},
        {"role": "user", "content": "weather in Oslo?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Bergen"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "rain"},
        {"role": "tool", "tool_call_id": "call_b", "content": "sun"},
    ]


def test_a_call_with_no_assistant_text_before_it_opens_its_own_turn() -> None:
    chat = chat_of(
        {
            "input": [
                {"role": "user", "content": "go"},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            ]
        }
    )
    assert chat["messages"][1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }


def test_images_and_files_become_chat_content_parts() -> None:
    chat = chat_of(
        {
            "input": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "what is this?"},
                        {
                            "type": "input_image",
                            "image_url": "data:image/png;base64,AA",
                            "detail": "low",
                        },
                        {
                            "type": "input_file",
                            "file_data": "data:application/pdf;base64,AA",
                            "filename": "a.pdf",
                        },
                    ],
                }
            ]
        }
    )
    assert chat["messages"][0]["content"] == [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA", "detail": "low"}},
        {
            "type": "file",
            "file": {"file_data": "data:application/pdf;base64,AA", "filename": "a.pdf"},
        },
    ]


def test_function_tools_nest_under_function_and_hosted_tools_are_left_out() -> None:
    chat = chat_of(
        {
            "input": "hi",
            "tools": [WEATHER_TOOL, {"type": "web_search"}],
            "tool_choice": {"type": "function", "name": "get_weather"},
            "parallel_tool_calls": False,
        }
    )
    assert chat["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city",
                "parameters": WEATHER_TOOL["parameters"],
                "strict": True,
            },
        }
    ]
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert chat["parallel_tool_calls"] is False


def test_tool_fields_go_only_with_tools_as_chat_upstreams_refuse_them_alone() -> None:
    chat = chat_of({"input": "hi", "tool_choice": "auto", "parallel_tool_calls": True})
    assert "tool_choice" not in chat and "parallel_tool_calls" not in chat and "tools" not in chat


def test_allowed_tools_choice_keeps_its_functions() -> None:
    chat = chat_of(
        {
            "input": "hi",
            "tools": [WEATHER_TOOL],
            "tool_choice": {
                "type": "allowed_tools",
                "mode": "required",
                "tools": [{"type": "function", "name": "get_weather"}],
            },
        }
    )
    assert chat["tool_choice"] == {
        "type": "allowed_tools",
        "allowed_tools": {
            "mode": "required",
            "tools": [{"type": "function", "function": {"name": "get_weather"}}],
        },
    }


def test_structured_output_and_the_other_fields_map_to_their_chat_names() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    chat = chat_of(
        {
            "input": "count",
            "text": {
                "format": {
                    "type": "json_schema",
                    "name": "count",
                    "schema": schema,
                    "strict": True,
                },
                "verbosity": "low",
            },
            "max_output_tokens": 4096,
            "reasoning": {"effort": "high", "summary": "auto"},
            "temperature": 0.3,
            "top_p": 0.9,
            "metadata": {"run": "1"},
            "user": "u-1",
            "store": False,
            "include": ["reasoning.encrypted_content"],
            "truncation": "auto",
        }
    )
    assert chat["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "count", "schema": schema, "strict": True},
    }
    assert chat["verbosity"] == "low"
    assert chat["max_completion_tokens"] == 4096
    assert chat["reasoning_effort"] == "high"
    assert (chat["temperature"], chat["top_p"]) == (0.3, 0.9)
    assert chat["metadata"] == {"run": "1"} and chat["user"] == "u-1"
    for absent in ("store", "include", "truncation", "max_output_tokens", "text", "reasoning"):
        assert absent not in chat


def test_json_object_format_and_plain_text_format() -> None:
    assert chat_of({"input": "x", "text": {"format": {"type": "json_object"}}})[
        "response_format"
    ] == {"type": "json_object"}
    assert "response_format" not in chat_of({"input": "x", "text": {"format": {"type": "text"}}})


def test_sampling_fields_go_only_when_sent() -> None:
    chat = chat_of({"input": "x"})
    for absent in ("temperature", "top_p", "max_completion_tokens", "reasoning_effort"):
        assert absent not in chat


@pytest.mark.parametrize(
    ("payload", "param", "code"),
    [
        (
            {"input": "x", "previous_response_id": "resp_1"},
            "previous_response_id",
            "unsupported_parameter",
        ),
        ({"input": "x", "conversation": "conv_1"}, "conversation", "unsupported_parameter"),
        ({"input": "x", "background": True}, "background", "unsupported_parameter"),
        (
            {"input": [{"type": "item_reference", "id": "msg_1"}]},
            "input[0].type",
            "unsupported_parameter",
        ),
        ({"input": []}, "input", "invalid_value"),
        ({}, "input", "invalid_value"),
        ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role", "invalid_value"),
        ({"input": [{"type": "computer_call_output"}]}, "input[0].type", "invalid_value"),
        (
            {"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]},
            "input[0].call_id",
            "invalid_value",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]},
            "input[0].content[0].image_url",
            "invalid_value",
        ),
        ({"input": "x", "max_output_tokens": 0}, "max_output_tokens", "invalid_value"),
        ({"input": "x", "stream": "yes"}, "stream", "invalid_value"),
        (
            {"input": "x", "text": {"format": {"type": "json_schema"}}},
            "text.format",
            "invalid_value",
        ),
    ],
)
def test_what_cannot_be_carried_is_a_400_that_names_the_field(
    payload: dict[str, Any], param: str, code: str
) -> None:
    with pytest.raises(GatewayError) as raised:
        parse_responses_body(payload)
    assert raised.value.status == 400
    assert raised.value.param == param
    assert raised.value.code == code


def test_previous_response_id_error_says_what_to_send_instead() -> None:
    with pytest.raises(GatewayError) as raised:
        parse_responses_body({"input": "x", "previous_response_id": "resp_1"})
    assert "send the whole conversation in `input`" in raised.value.message


# --- answer -----------------------------------------------------------------------------------


def validated(events: list[dict[str, Any]]) -> list[Any]:
    """Each event as the SDK's own type, strictly validated, after a round trip through JSON."""
    return [EVENTS.validate_python(json.loads(json.dumps(event))) for event in events]


def test_a_text_answer_streams_the_whole_sequence_in_order() -> None:
    stream = ResponseStream(
        {"model": "auto", "tools": [], "tool_choice": "auto", "parallel_tool_calls": True}
    )
    stream.model = "mercury"
    events = stream.opening() + stream.text("Hel") + stream.text("lo") + stream.complete(7, 2)
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    typed = validated(events)
    assert typed[6].text == "Hello"
    final = typed[-1].response
    assert final.status == "completed"
    assert final.model == "mercury"
    assert final.output_text == "Hello"
    assert final.usage.input_tokens == 7
    assert final.usage.output_tokens == 2
    assert final.usage.total_tokens == 9
    assert typed[0].response.status == "in_progress" and typed[0].response.output == []


def test_tool_calls_stream_as_function_call_items_after_the_text() -> None:
    stream = ResponseStream(
        {
            "model": "auto",
            "tools": [WEATHER_TOOL],
            "tool_choice": "auto",
            "parallel_tool_calls": True,
        }
    )
    events = [
        *stream.opening(),
        *stream.text("Let me check."),
        *stream.tool_call(0, call_id="call_1", name="get_weather", arguments='{"ci'),
        *stream.tool_call(0, arguments='ty":"Oslo"}'),
        *stream.tool_call(1, call_id="call_2", name="get_weather"),
        *stream.complete(10, 5, "tool_calls"),
    ]
    kinds = [e["type"] for e in events]
    assert kinds[2:] == [
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.output_item.added",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    typed = validated(events)
    added = typed[8].item
    assert (added.type, added.call_id, added.name, added.arguments) == (
        "function_call",
        "call_1",
        "get_weather",
        "",
    )
    assert typed[12].arguments == '{"city":"Oslo"}'
    assert typed[12].item_id == added.id and typed[12].output_index == 1
    final = typed[-1].response
    calls = [item for item in final.output if item.type == "function_call"]
    assert [(c.call_id, c.arguments, c.status) for c in calls] == [
        ("call_1", '{"city":"Oslo"}', "completed"),
        ("call_2", "{}", "completed"),  # a call with no arguments gets an empty object
    ]
    assert final.output[0].content[0].text == "Let me check."


def test_pieces_of_parallel_calls_may_interleave() -> None:
    stream = ResponseStream(
        {"model": "auto", "tools": [], "tool_choice": "auto", "parallel_tool_calls": True}
    )
    events = [
        *stream.opening(),
        *stream.tool_call(0, call_id="a", name="f", arguments='{"x"'),
        *stream.tool_call(1, call_id="b", name="g", arguments='{"y"'),
        *stream.tool_call(0, arguments=":1}"),
        *stream.tool_call(1, arguments=":2}"),
        *stream.complete(1, 1, "tool_calls"),
    ]
    typed = validated(events)
    deltas = [(e.output_index, e.delta) for e in typed if e.type.endswith("arguments.delta")]
    assert deltas == [(0, '{"x"'), (1, '{"y"'), (0, ":1}"), (1, ":2}")]
    done = [(e.output_index, e.arguments) for e in typed if e.type.endswith("arguments.done")]
    assert done == [(0, '{"x":1}'), (1, '{"y":2}')]


def test_the_final_response_is_a_valid_non_streamed_answer() -> None:
    stream = ResponseStream(
        {
            "model": "auto",
            "tools": [],
            "tool_choice": "auto",
            "parallel_tool_calls": True,
            "metadata": {"a": "b"},
        }
    )
    stream.tool_call(0, call_id="call_9", name="f", arguments="{}")
    stream.complete(3, 4, "tool_calls")
    response = Response.model_validate(json.loads(json.dumps(stream.response())))
    assert response.id.startswith("resp_")
    assert response.metadata == {"a": "b"}
    assert response.output[0].type == "function_call"
    call_id = response.output[0].id
    assert call_id is not None and call_id.startswith("fc_")


def test_a_cut_answer_ends_incomplete() -> None:
    stream = ResponseStream(
        {"model": "auto", "tools": [], "tool_choice": "auto", "parallel_tool_calls": True}
    )
    events = stream.opening() + stream.text("abc") + stream.complete(1, 1, "length")
    typed = validated(events)
    assert typed[-1].type == "response.incomplete"
    assert typed[-1].response.status == "incomplete"
    assert typed[-1].response.incomplete_details.reason == "max_output_tokens"


def test_a_failure_mid_stream_ends_with_response_failed_and_keeps_what_was_sent() -> None:
    stream = ResponseStream(
        {"model": "auto", "tools": [], "tool_choice": "auto", "parallel_tool_calls": True}
    )
    events = stream.opening() + stream.text("par") + stream.fail("rate_limit_exceeded", "slow down")
    typed = validated(events)
    failed = typed[-1]
    assert failed.type == "response.failed"
    assert failed.response.status == "failed"
    assert failed.response.error.code == "rate_limit_exceeded"
    assert failed.response.output[0].status == "incomplete"
    assert failed.response.output[0].content[0].text == "par"


def test_sse_events_are_named_after_their_type() -> None:
    raw = named_sse_event({"type": "response.completed", "sequence_number": 3})
    assert (
        raw
        == b'event: response.completed\ndata: {"type":"response.completed","sequence_number":3}\n\n'
    )


@pytest.mark.parametrize(
    ("status", "message", "code"),
    [
        (429, "Too Many Requests", "rate_limit_exceeded"),
        (400, "This model's maximum context length is 8192 tokens", "context_length_exceeded"),
        (400, "prompt is too long: 210000 tokens > 200000 maximum", "context_length_exceeded"),
        (400, "the request exceeds the available context size", "context_length_exceeded"),
        (413, "payload too large", "context_length_exceeded"),
        (400, "invalid tool schema", "server_error"),
        (503, "overloaded", "server_error"),
        (None, "connection refused", "server_error"),
    ],
)
def test_failure_codes_are_those_clients_act_on(
    status: int | None, message: str, code: str
) -> None:
    kind = status_failure_kind(status, message) if status else FailureKind.NETWORK
    failure = EndpointFailure(endpoint="e", kind=kind, message=message, status=status)
    assert responses_code(failure) == code
