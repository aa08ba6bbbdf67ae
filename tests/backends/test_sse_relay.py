"""The relay's reading of an OpenAI-compatible chat stream at its edges: events cut anywhere by
the network, other line ends, comments, an error event, a malformed one, a stream without
`[DONE]`, an endless event; tool calls that keep the spec pass as they came, others are written
again, regular."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from lsp_server.backends.base import BackendError, Relayed, RelayedUsage, Usage
from lsp_server.backends.openai_relay import ChatRelayReader
from lsp_server.backends.sse_relay import relay_sse
from lsp_server.backends.sse_stream import MAX_SSE_EVENT_BYTES
from lsp_server.failures import FailureKind

pytestmark = pytest.mark.unit


def event(payload: dict[str, Any], end: bytes = b"\n\n") -> bytes:
    return b"data: " + json.dumps(payload).encode() + end


def delta(**fields: Any) -> dict[str, Any]:
    return {"id": "c1", "choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


ROLE = event(delta(role="assistant", content=""))
HELLO = event(delta(content="Hello"))
WORLD = event(delta(content=" world"))
FINISH = event({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
USAGE = event({"id": "c1", "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2}})
DONE = b"data: [DONE]\n\n"


async def relayed(*chunks: bytes) -> tuple[list[Relayed], Usage]:
    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())
    usage = Usage()
    reader = ChatRelayReader("up")
    return [piece async for piece in relay_sse("up", response, usage, reader)], usage


async def test_events_cut_anywhere_come_out_whole_the_first_with_what_came_before_it() -> None:
    stream = ROLE + HELLO + WORLD + FINISH + USAGE + DONE
    cuts = [stream[:3], stream[3 : len(ROLE) + 5], stream[len(ROLE) + 5 : -9], stream[-9:]]
    pieces, usage = await relayed(*cuts)
    assert b"".join(pieces) == ROLE + HELLO + WORLD + FINISH + USAGE
    assert pieces[0].startswith(ROLE + HELLO)  # the role's event waits for the first token
    assert [p for p in pieces if isinstance(p, RelayedUsage)] == [USAGE]
    assert (usage.completion_tokens, usage.reported) == (2, True)


async def test_crlf_events_and_comments_pass_as_they_came() -> None:
    crlf = [event(delta(content=t), b"\r\n\r\n") for t in ("a", "b")]
    stream = b": keep-alive\r\n\r\n" + crlf[0] + crlf[1] + b"data: [DONE]\r\n\r\n"
    pieces, usage = await relayed(stream[:20], stream[20:])
    assert b"".join(pieces) == b": keep-alive\r\n\r\n" + crlf[0] + crlf[1]
    assert usage.completion_tokens == 2 and not usage.reported  # estimated: one an event


async def test_an_answer_without_a_piece_is_passed_on_at_its_end() -> None:
    pieces, _ = await relayed(ROLE + FINISH + DONE)
    assert b"".join(pieces) == ROLE + FINISH


@pytest.mark.parametrize(
    ("chunks", "kind"),
    [
        ((ROLE, HELLO, b'data: {"error": {"message": "overloaded"}}\n\n'), FailureKind.SERVER),
        ((ROLE, b"data: {not json\n\n"), FailureKind.PROTOCOL),
        ((HELLO, b'data: {"error": true'), FailureKind.PROTOCOL),  # no [DONE]
        ((HELLO, b"data: " + b"x" * MAX_SSE_EVENT_BYTES), FailureKind.PROTOCOL),
    ],
)
async def test_what_must_be_read_and_is_wrong_fails_the_endpoint(
    chunks: tuple[bytes, ...], kind: FailureKind
) -> None:
    with pytest.raises(BackendError) as failed:
        await relayed(*chunks)
    assert failed.value.kind is kind


def call(**fields: Any) -> dict[str, Any]:
    return {"index": 0, **fields}


FINISH_CALLS = event(
    {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
)


def tool_calls_of(body: bytes) -> list[dict[str, Any]]:
    payloads = [json.loads(e.removeprefix(b"data: ")) for e in body.split(b"\n\n") if e]
    return [
        c for p in payloads if p["choices"] for c in p["choices"][0]["delta"].get("tool_calls", [])
    ]


async def test_a_tool_call_that_keeps_the_spec_passes_as_it_came() -> None:
    opened = event(
        delta(
            tool_calls=[call(id="call_1", type="function", function={"name": "f", "arguments": ""})]
        )
    )
    more = event(delta(tool_calls=[call(function={"arguments": '{"a": 1}'})]))
    pieces, _ = await relayed(ROLE + opened + more + FINISH_CALLS + DONE)
    assert b"".join(pieces) == ROLE + opened + more + FINISH_CALLS


async def test_a_tool_call_that_bends_the_spec_is_written_again_regular() -> None:
    # No index, the id and name repeated on every piece, no type.
    bent = [
        event(delta(tool_calls=[{"id": "call_1", "function": {"name": "f", "arguments": piece}}]))
        for piece in ('{"a"', ": 1}")
    ]
    pieces, _ = await relayed(ROLE + bent[0] + bent[1] + FINISH_CALLS + DONE)
    calls = tool_calls_of(b"".join(pieces))
    assert calls == [
        {
            "index": 0,
            "id": "call_1",
            "type": "function",
            "function": {"name": "f", "arguments": '{"a"'},
        },
        {"index": 0, "function": {"arguments": ": 1}"}},
    ]


async def test_a_tool_call_without_arguments_gets_an_empty_object_before_the_end() -> None:
    opened = event(delta(tool_calls=[call(id="call_1", type="function", function={"name": "f"})]))
    pieces, _ = await relayed(ROLE + opened + FINISH_CALLS + DONE)
    body = b"".join(pieces)
    assert body.startswith(ROLE + opened) and body.endswith(FINISH_CALLS)
    assert tool_calls_of(body)[-1] == {"index": 0, "function": {"arguments": "{}"}}
