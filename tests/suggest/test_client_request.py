"""A client's own completion (the gateway's `/v1/completions`) is shaped as a keystroke is:
language, single line, stop strings and the token cap are decided by the service."""

from __future__ import annotations

from typing import Any

import pytest

from lsp_server.backends.base import CompletionRequest
from lsp_server.suggest.client_request import (
    DEFAULT_INLINE_MAX_TOKENS,
    MAX_INLINE_TOKENS,
    client_completion,
)
from lsp_server.suggest.prompt import BLOCK_STOP

pytestmark = pytest.mark.unit


def shaped(**fields: Any) -> CompletionRequest:
    defaults: dict[str, Any] = {
        "prefix": "def add(a, b):\n    ",
        "suffix": "\n",
        "has_suffix": True,
        "max_tokens": None,
        "stop": None,
        "temperature": None,
        "path": None,
    }
    return client_completion(**(defaults | fields))


def test_a_named_file_says_the_language_over_the_guess_from_the_text() -> None:
    assert shaped().language == "python"
    named = shaped(path="src/add.rs")
    assert (named.language, named.path) == ("rust", "src/add.rs")
    assert shaped(path="notes.unknown-suffix").language == "python"
    assert shaped().path == ""


def test_text_after_the_cursor_on_its_line_asks_for_one_line() -> None:
    mid = shaped(prefix="total = add(", suffix=")\n")
    assert mid.single_line and BLOCK_STOP not in mid.stop
    block = shaped()
    assert not block.single_line and BLOCK_STOP in block.stop


def test_the_clients_stops_and_cap_win_within_the_bound() -> None:
    own = shaped(stop=("\n", "END"), max_tokens=32, temperature=0.4)
    assert (own.stop, own.max_tokens, own.temperature) == (("\n", "END"), 32, 0.4)
    assert own.client_max_tokens
    uncapped = shaped()
    assert uncapped.max_tokens == DEFAULT_INLINE_MAX_TOKENS and not uncapped.client_max_tokens
    assert (uncapped.temperature, uncapped.has_suffix) == (0.0, True)
    assert shaped(max_tokens=100_000).max_tokens == MAX_INLINE_TOKENS


def test_crlf_text_gets_crlf_stops() -> None:
    crlf = shaped(prefix="def add(a, b):\r\n    ", suffix="\r\n")
    assert any("\r\n" in stop for stop in crlf.stop)
