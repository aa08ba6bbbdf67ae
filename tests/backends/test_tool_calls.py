"""Tool-call pieces as upstreams bend the spec, made regular (`ToolCallStream`)."""

from __future__ import annotations

import pytest

from lsp_server.backends.base import BackendError, ToolCall, ToolCallDelta
from lsp_server.backends.tool_calls import MAX_TOOL_CALLS, ToolCallStream

pytestmark = pytest.mark.unit


def test_spec_pieces_pass_unchanged() -> None:
    calls = ToolCallStream("up")
    assert calls.feed(0, id="call_1", name="f", arguments="") == [
        ToolCallDelta(0, id="call_1", name="f")
    ]
    assert calls.feed(0, arguments='{"a":') == [ToolCallDelta(0, arguments='{"a":')]
    assert calls.feed(0, arguments="1}") == [ToolCallDelta(0, arguments="1}")]
    assert calls.finish() == []
    assert calls.calls() == (ToolCall("call_1", "f", '{"a":1}'),)


def test_an_id_repeated_on_every_piece_never_changes() -> None:
    calls = ToolCallStream("up")
    calls.feed(0, id="call_1", name="f")
    assert calls.feed(0, id="call_1", arguments="{}") == [ToolCallDelta(0, arguments="{}")]
    assert calls.calls()[0].id == "call_1"


def test_pieces_without_index_start_a_call_at_each_new_id() -> None:
    calls = ToolCallStream("up")
    calls.feed(None, id="a", name="f", arguments='{"x":1}')
    calls.feed(None, arguments="")  # no id: the same call goes on
    calls.feed(None, id="b", name="g", arguments='{"y":2}')
    assert [(c.id, c.name, c.arguments) for c in calls.calls()] == [
        ("a", "f", '{"x":1}'),
        ("b", "g", '{"y":2}'),
    ]


def test_a_call_without_id_gets_one_and_empty_arguments_become_an_object() -> None:
    calls = ToolCallStream("up")
    (opening,) = calls.feed(0, name="f")
    assert opening.id.startswith("call_") and opening.name == "f"
    assert calls.finish() == [ToolCallDelta(0, arguments="{}")]
    assert calls.calls() == (ToolCall(opening.id, "f", "{}"),)


def test_arguments_before_the_name_go_out_with_the_opening_piece() -> None:
    calls = ToolCallStream("up")
    assert calls.feed(0, id="c", arguments='{"a"') == []
    assert calls.feed(0, name="f", arguments=":1}") == [
        ToolCallDelta(0, id="c", name="f", arguments='{"a":1}')
    ]


def test_a_call_that_never_names_its_function_is_dropped() -> None:
    calls = ToolCallStream("up")
    calls.feed(0, id="c", arguments="{}")
    assert calls.finish() == [] and calls.calls() == ()


def test_a_flood_of_calls_is_a_protocol_error() -> None:
    calls = ToolCallStream("up")
    with pytest.raises(BackendError):
        for index in range(MAX_TOOL_CALLS + 1):
            calls.feed(index, name="f")
