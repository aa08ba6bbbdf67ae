"""Unit edges of the HTTP plumbing every remote backend shares: usage figures that are not
counts, and SSE bounds that must hold however the bytes are split into chunks."""

from __future__ import annotations

import gzip
import itertools
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from httpx_sse import EventSource
from hypothesis import given
from hypothesis import strategies as st

from lsp_server.backends import http_client, sse_stream
from lsp_server.backends.base import BackendError, token_count

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (12, 12),
        (12.0, 12),
        (0, 0),
        ("12", None),
        ("n/a", None),
        (True, None),
        (1.5, None),
        (float("inf"), None),
        (float("nan"), None),
        (-1, None),
        (10**400, None),
        (None, None),
        ([3], None),
    ],
)
def test_token_count_takes_only_sane_counts(value: object, expected: int | None) -> None:
    assert token_count(value) == expected


def sse_response(chunks: list[bytes], headers: dict[str, str] | None = None) -> httpx.Response:
    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    all_headers = {"content-type": "text/event-stream", **(headers or {})}
    return httpx.Response(200, headers=all_headers, stream=_Stream(body()))


class _Stream(httpx.AsyncByteStream):
    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._chunks:
            yield chunk


async def payloads(response: httpx.Response) -> list[dict[str, Any]]:
    return [payload async for payload in sse_stream.iter_sse_json("e", response)]


async def test_many_events_whose_sum_passes_the_event_bound_are_fine() -> None:
    event = b'data: {"n": "' + b"x" * 1000 + b'"}\r\n\r\n'
    count = 2 * sse_stream.MAX_SSE_EVENT_BYTES // len(event)
    stream = event * count + b"data: [DONE]\r\n\r\n"
    # chunks of an odd size, so line breaks, "\r\n" pairs among them, fall across chunks
    chunks = [stream[i : i + 1001] for i in range(0, len(stream), 1001)]
    assert len(await payloads(sse_response(chunks))) == count


async def test_an_endless_line_fails_as_a_malformed_stream() -> None:
    line = [b"data: "] + [b"x" * 65536] * 64  # 4 MB, no newline
    with pytest.raises(BackendError, match="SSE event too large") as raised:
        await payloads(sse_response(line))
    assert raised.value.kind == "protocol"


async def test_an_event_of_many_lines_is_bounded_as_a_whole() -> None:
    many = [b"data: " + b"x" * 1000 + b"\n"] * 2000 + [b"\n", b"data: [DONE]\n\n"]
    with pytest.raises(BackendError, match="SSE event too large"):
        await payloads(sse_response(many))


def bounds_after(chunks: list[bytes], count: str) -> list[tuple[int, int, bool] | str]:
    """Where a line's and an event's bounds stand after each of `chunks`, counted by `count`
    (the method's name), until the error that refused them."""
    bounds = sse_stream.EventBounds("e")
    states: list[tuple[int, int, bool] | str] = []
    for chunk in chunks:
        try:
            getattr(bounds, count)(chunk)
        except BackendError as refused:
            return [*states, refused.message]
        states.append((bounds._line, bounds._event, bounds._after_cr))
    return states


@given(
    st.lists(st.sampled_from([b"x", b"data: ab", b"\n", b"\n\n", b"\n\n\n"]), max_size=40),
    st.lists(st.integers(min_value=0, max_value=80), max_size=8),
    st.sampled_from([b"", b"\r", b"\r\n"]),
)
def test_the_quick_count_of_a_chunk_agrees_with_the_line_by_line_one(
    pieces: list[bytes], cuts: list[int], carriage: bytes
) -> None:
    stream = b"".join(pieces)
    middle = len(stream) // 2
    stream = stream[:middle] + carriage + stream[middle:]  # a "\r" or none: read line by line
    ends = sorted({0, len(stream), *(min(cut, len(stream)) for cut in cuts)})
    chunks = [stream[start:end] for start, end in itertools.pairwise(ends)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sse_stream, "MAX_SSE_EVENT_BYTES", 30)  # reached by some, not by all
        assert bounds_after(chunks, "count") == bounds_after(chunks, "_count_lines")


async def test_a_gzip_stream_sent_anyway_is_inflated() -> None:
    body = gzip.compress(b'data: {"text": "ok"}\n\ndata: [DONE]\n\n')
    response = sse_response([body[:10], body[10:]], {"content-encoding": "gzip"})
    assert await payloads(response) == [{"text": "ok"}]


async def test_an_unknown_encoding_is_refused() -> None:
    response = sse_response([b"whatever"], {"content-encoding": "br"})
    with pytest.raises(BackendError, match="unsupported content-encoding"):
        await payloads(response)


# Line breaks of all three kinds, comments, fields without a space, an event name, a multi-line
# data field, an id, retry values good and bad, a lone field name, non-ASCII split mid-character.
_AWKWARD_STREAM = (
    ": a comment\r\n"
    'event: delta\r\ndata: {"a": 1}\r\n\r\n'
    'data:{"b": "é😀"}\rid: 7\r\r'
    "data: first\ndata: second\nretry: 40\n\n"
    "retry: soon\ndata\n\n"
    "data: [DONE]\n\n"
).encode()


async def events_of(response: httpx.Response) -> list[tuple[str, str, str, int | None]]:
    return [
        (event.event, event.data, event.id, event.retry)
        async for event in sse_stream.sse_events("e", response)
    ]


async def test_events_are_read_as_httpx_sse_reads_them_however_the_bytes_are_split() -> None:
    expected = [
        (event.event, event.data, event.id, event.retry)
        async for event in EventSource(sse_response([_AWKWARD_STREAM])).aiter_sse()
    ]
    assert len(expected) == 5
    for cut in range(1, len(_AWKWARD_STREAM)):
        chunks = [_AWKWARD_STREAM[:cut], _AWKWARD_STREAM[cut:]]
        assert await events_of(sse_response(chunks)) == expected, cut
    one_byte_each = [_AWKWARD_STREAM[i : i + 1] for i in range(len(_AWKWARD_STREAM))]
    assert await events_of(sse_response(one_byte_each)) == expected


async def test_a_body_that_is_not_an_event_stream_is_a_protocol_fault() -> None:
    response = sse_response([b'{"choices": []}'], {"content-type": "application/json"})
    with pytest.raises(BackendError, match="not an SSE stream") as raised:
        await events_of(response)
    assert raised.value.kind == "protocol"


async def test_a_cookie_an_endpoint_sets_is_never_kept() -> None:
    """The gateway's clients share one HTTP client per endpoint: a cookie from one client's
    answer must not ride on the next client's request."""
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    answer = httpx.Response(200, headers={"set-cookie": "session=abc; Path=/"}, request=request)
    keeping = httpx.AsyncClient()
    keeping.cookies.extract_cookies(answer)
    assert dict(keeping.cookies) == {"session": "abc"}  # what httpx does by default
    client = http_client.make_client("http://127.0.0.1:9/v1", 5.0)
    client.cookies.extract_cookies(answer)
    assert not client.cookies
    await keeping.aclose()
    await client.aclose()
