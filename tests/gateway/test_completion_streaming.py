"""Streaming `/v1/completions`: text goes out as the upstream writes it, cleaned, and the chunks
add up to the answer the same upstream text gets without streaming.

The cleaner is checked on its own for the cases where post-processing must hold text back (a
stop string across chunk boundaries, a suggestion that runs into the code after the cursor, a
single-line suggestion, an echo of the line before the cursor, CRLF); the gateway end to end
with the official `openai` client against a slow streaming upstream, a stop string it applies
itself included (a cleaned completion is rewritten, never relayed).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import httpx
import pytest
from openai.types import Completion

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from lsp_server.backends.base import CompletionRequest
from lsp_server.suggest.postprocess import clean_suggestion
from lsp_server.suggest.streaming import StreamingCleaner, cut_at_stops
from tests.support.config_text import LOCAL_OFF
from tests.support.gateway_process import Gateway, running_gateway
from tests.support.lsp_session import endpoint_toml
from tests.support.metrics_scrape import scrape, value

STREAMED = "gateway_ls_streamed_answers_total"
PY_PREFIX = "def numbers():\n    total = 0\n    "
PY_SUFFIX = "\n    return total\n\n\nprint(numbers())\n"
LINES = "".join(f"total += {n}\n    " for n in range(1, 12)) + "total += 12\n"


def _streamed(request: CompletionRequest, raw: str, size: int) -> tuple[list[str], str]:
    """The chunks sent while `raw` arrives `size` characters at a time, and the final rest,
    once the whole answer is cleaned as the suggestion service cleans it."""
    cleaner = StreamingCleaner(request)
    sent = [cleaner.feed(raw[i : i + size]) for i in range(0, len(raw), size)]
    final = cleaner.clean(cut_at_stops(raw, request.stop))
    assert final == clean_suggestion(cut_at_stops(raw, request.stop), request)
    return [piece for piece in sent if piece], cleaner.finish(final)


def _request(
    prefix: str, suffix: str, *, stop: tuple[str, ...], single_line: bool = False
) -> CompletionRequest:
    return CompletionRequest(
        prefix=prefix, suffix=suffix, language="python", stop=stop, single_line=single_line
    )


CASES = {
    "block": (_request(PY_PREFIX, PY_SUFFIX, stop=("\n\n\n",)), LINES),
    "stop string across chunks": (
        _request(PY_PREFIX, PY_SUFFIX, stop=("\n\n\n", "#", "a", "b", "# END")),
        "total += 1\n    total += 2\n    # END of it\n    total += 3\n",
    ),
    "extra stop beyond the first four": (
        _request(PY_PREFIX, PY_SUFFIX, stop=("\n\n\n", "x1", "x2", "x3", "+= 3\n")),
        LINES,
    ),
    "repeats the code after the cursor": (
        _request(PY_PREFIX, PY_SUFFIX, stop=("\n\n\n",)),
        "total += 1\n    total += 2\n    return total\n\n\nprint(numbers())\n",
    ),
    "repeats the suffix's first line only": (
        _request(PY_PREFIX, PY_SUFFIX, stop=("\n\n\n",)),
        "total += 1\n    return total\n    total += 2\n",
    ),
    "single line": (
        _request("x = compute(", ")\nprint(x)\n", stop=("\n",), single_line=True),
        'alpha, "beta (gamma", delta)\nnext line\n',
    ),
    "echo of the line before the cursor": (
        _request("def f():\n    total = 0\n    to", "\n", stop=("\n\n\n",)),
        "    total = 0\n    total += 1\n    total += 2\n",
    ),
    "crlf": (
        _request(PY_PREFIX.replace("\n", "\r\n"), "\r\n", stop=("\r\n\r\n\r\n",)),
        LINES.replace("\n", "\r\n"),
    ),
}


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
@pytest.mark.parametrize("case", CASES)
def test_streamed_chunks_add_up_to_the_non_streamed_answer(case: str, size: int) -> None:
    request, raw = CASES[case]
    chunks, rest = _streamed(request, raw, size)
    assert "".join(chunks) + rest == clean_suggestion(cut_at_stops(raw, request.stop), request)


def test_a_block_streams_before_the_upstream_is_done() -> None:
    request, raw = CASES["block"]
    chunks, rest = _streamed(request, raw, 4)
    assert len(chunks) >= 5
    assert len(rest) < len(raw) // 4  # only the tail waited for the end


def test_lines_that_may_repeat_the_code_after_the_cursor_wait() -> None:
    request = _request(PY_PREFIX, PY_SUFFIX, stop=("\n\n\n",))
    cleaner = StreamingCleaner(request)
    assert cleaner.feed("total += 1\n    return total\n") == "total += 1"
    assert cleaner.feed("    total += 2\n") == "\n    return total\n    total += 2"


# --- end to end: the gateway, the openai client, a slow streaming upstream -------------------

CHUNK_DELAY_S = 0.08


@pytest.fixture(scope="module")
def dripping() -> Iterator[FakeLLMServer]:
    behaviour = Behaviour(text=LINES, chunk_delay_s=CHUNK_DELAY_S, chunk_chars=4)
    with FakeLLMServer(behaviour, name="dripping") as server:
        yield server


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, dripping: FakeLLMServer) -> Iterator[Gateway]:
    config = (
        "[routing]\ninline_deadline_ms = 30000\nhedge_after_ms = 5000\n"
        + LOCAL_OFF
        + endpoint_toml("dripping", dripping.base_url)
    )
    with running_gateway(tmp_path_factory.mktemp("streaming"), config) as running:
        yield running


def test_text_reaches_the_client_while_the_upstream_still_writes(
    gateway: Gateway, dripping: FakeLLMServer
) -> None:
    dripping.quiet()
    stream = gateway.client().completions.with_raw_response.create(
        model="gateway-ls",
        prompt=PY_PREFIX,
        suffix=PY_SUFFIX,
        max_tokens=64,
        stream=True,
        stream_options={"include_usage": True},
    )
    assert stream.headers["x-gateway-ls-endpoint"] == "dripping"
    started = time.monotonic()
    texts: list[tuple[float, str, int]] = []
    chunks = list(_tracked(stream.parse(), texts, dripping))
    upstream_s = (len(LINES) / 4 - 1) * CHUNK_DELAY_S
    first_at, _, completed_then = next(t for t in texts if t[1])
    assert completed_then == 0, "the first text came after the upstream had finished"
    assert first_at - started < upstream_s / 2
    assert len([t for t in texts if t[1]]) >= 3

    streamed = "".join(text for _, text, _ in texts)
    whole = gateway.client().completions.create(
        model="gateway-ls", prompt=PY_PREFIX, suffix=PY_SUFFIX, max_tokens=64
    )
    assert streamed == whole.choices[0].text
    assert streamed.startswith("total += 1\n    total += 2")
    finishing = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finishing] == [whole.choices[0].finish_reason]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_a_stop_string_the_gateway_applies_still_cuts_the_rewritten_stream(
    gateway: Gateway, dripping: FakeLLMServer
) -> None:
    # The upstream gets the first four stop strings; the fifth is the gateway's to apply.
    stops = ["x1", "x2", "x3", "x4", "+= 3"]
    dripping.quiet()
    stream = gateway.client().completions.create(
        model="gateway-ls",
        prompt=PY_PREFIX,
        suffix=PY_SUFFIX,
        max_tokens=64,
        stream=True,
        stop=stops,
    )
    text = "".join(chunk.choices[0].text for chunk in stream if chunk.choices)
    assert dripping.requests[-1].payload["stop"] == stops[:4]
    assert text.startswith("total += 1\n    total += 2") and "+= 3" not in text
    metrics = httpx.get(f"{gateway.root_url}/metrics", timeout=10).text
    assert 'gateway_ls_streamed_answers_total{path="rewrite"}' in metrics


def _tracked(
    stream: Iterable[Completion], texts: list[tuple[float, str, int]], upstream: FakeLLMServer
) -> Iterator[Completion]:
    for chunk in stream:
        text = chunk.choices[0].text if chunk.choices else ""
        texts.append((time.monotonic(), text, upstream.completed_streams))
        yield chunk


def test_a_client_leaving_mid_stream_cancels_the_upstream(
    gateway: Gateway, dripping: FakeLLMServer
) -> None:
    dripping.quiet()
    stream = gateway.client().completions.create(
        model="gateway-ls", prompt=PY_PREFIX, suffix=PY_SUFFIX, max_tokens=64, stream=True
    )
    first = next(chunk for chunk in stream if chunk.choices and chunk.choices[0].text)
    assert first.choices[0].text
    stream.close()
    assert dripping.wait_for(lambda s: s.disconnects >= 1, timeout_s=10)
    assert dripping.completed_streams == 0


def test_every_streamed_completion_is_counted_whichever_way_it_is_written(
    tmp_path: Path,
) -> None:
    """An answer that cleaning cuts to nothing (blank lines, the stop string) is
    settled before any piece is shown, and written at once: still a streamed answer the
    gateway wrote, and `/metrics` counts it so."""
    with FakeLLMServer(Behaviour(text="\n\n\n")) as upstream:
        config = LOCAL_OFF + endpoint_toml("quick", upstream.base_url)
        with running_gateway(tmp_path, config) as gateway:
            for count in (1, 2):
                stream = gateway.client().completions.create(
                    model="gateway-ls", prompt=PY_PREFIX, suffix=PY_SUFFIX, stream=True
                )
                assert not "".join(c.choices[0].text for c in stream if c.choices)
                assert value(scrape(gateway), STREAMED, path="rewrite") == count
