"""The acceptance and kept rate of inline suggestions: an offered suggestion is remembered by a
short id, an acceptance reported under that id counts for the endpoint that answered, and the
kept rate is measured on the document once the window is over. In process, a real engine
asking a scripted endpoint on loopback; the window made short through the engine's
constructor."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from lsp_server.cli.stats import format_inline_outcomes
from lsp_server.config.loader import load_config_file
from lsp_server.core.engine import Engine
from lsp_server.suggest.offered import MAX_OFFERED, OFFERED_FOR_S, OfferedSuggestions
from tests.support.config_text import LOCAL_OFF
from tests.support.lsp_session import endpoint_toml

WINDOW_S = 0.3
URI = "file:///w/add.py"
TEXT = "def add(a, b):\n    \n\nprint(add(1, 2))\n"
CURSOR = TEXT.index("    \n") + 4
SUGGESTION = "return a + b"


@pytest.mark.unit
def test_an_offer_is_taken_once_by_its_id_and_forgotten_when_old_or_crowded_out() -> None:
    now = [0.0]
    offers = OfferedSuggestions(clock=lambda: now[0])
    first = offers.offer(uri=URI, offset=3, text="x", endpoint="fast")
    taken = offers.take(first)
    assert taken is not None and (taken.endpoint, taken.offset, taken.text) == ("fast", 3, "x")
    assert offers.take(first) is None  # once
    assert offers.take("made-up") is None
    assert offers.take("x" * 10_000) is None
    old = offers.offer(uri=URI, offset=3, text="x", endpoint="fast")
    now[0] += OFFERED_FOR_S + 1
    assert offers.take(old) is None
    crowded = offers.offer(uri=URI, offset=3, text="x", endpoint="fast")
    for _ in range(MAX_OFFERED):
        offers.offer(uri=URI, offset=3, text="x", endpoint="fast")
    assert offers.take(crowded) is None
    assert len(offers._offered) == MAX_OFFERED


@pytest.mark.unit
def test_gateway_ls_stats_shows_inline_acceptance_and_the_kept_rate() -> None:
    inline = {"offered": 8, "accepted": 2, "acceptance_rate": 0.25, "kept_rate": 0.5}
    status = {"endpoints": [{"name": "fast", "inline": inline}, {"name": "x", "inline": None}]}
    _, header, _, row = format_inline_outcomes(status).splitlines()
    assert header.split() == ["inline", "endpoint", "offered", "accepted", "acceptance", "kept"]
    assert row.split() == ["fast", "8", "2", "0.2", "0.5"]  # the table's one decimal
    assert format_inline_outcomes({"endpoints": [{"name": "x", "inline": None}]}) == ""


async def accepted_then(tmp_path: Path, after_acceptance: str) -> dict[str, Any]:
    """A suggestion offered, inserted and reported accepted; then the document is
    `after_acceptance` ("kept": left as it is; "undone": the insertion undone; "retyped":
    half of it typed over); the endpoint's inline figures once the window is over."""
    with FakeLLMServer(Behaviour(text=SUGGESTION + "\n")) as endpoint:
        config = tmp_path / "config.toml"
        config.write_text(LOCAL_OFF + endpoint_toml("fast", endpoint.base_url))
        engine = Engine(load_config_file(config), kept_window_s=WINDOW_S)
        try:
            engine.next_edits.opened(URI, TEXT)
            suggestion = await engine.suggestions.suggest(
                uri=URI, text=TEXT, offset=CURSOR, language="python"
            )
            assert suggestion.text == SUGGESTION, suggestion
            offer_id = engine.suggestions.offer(URI, CURSOR, suggestion)
            assert offer_id is not None
            inserted = TEXT[:CURSOR] + SUGGESTION + TEXT[CURSOR:]
            engine.next_edits.changed(URI, inserted, 1)  # the editor inserts it, then reports
            assert engine.suggestions.accepted(offer_id)
            assert not engine.suggestions.accepted(offer_id)  # an id counts once
            if after_acceptance == "undone":
                engine.next_edits.changed(URI, TEXT, 1)
            elif after_acceptance == "retyped":
                engine.next_edits.changed(URI, inserted.replace("a + b", "total"), 1)
            await asyncio.sleep(WINDOW_S * 3)
            endpoints = engine.router.status()["endpoints"]
            inline = next(e["inline"] for e in endpoints if e["name"] == "fast")
            # What `/metrics` reads: offered, accepted, characters kept and inserted.
            counts = engine.router.suggestion_counts()
            assert counts[0][:4] == ("fast", "inline", 1, 1)
            assert counts[0][5] == len(SUGGESTION)
            return dict(inline)
        finally:
            await engine.aclose()


async def test_an_accepted_suggestion_left_in_place_is_kept(tmp_path: Path) -> None:
    inline = await accepted_then(tmp_path, "kept")
    assert inline == {"offered": 1, "accepted": 1, "acceptance_rate": 1.0, "kept_rate": 1.0}


async def test_an_accepted_suggestion_undone_is_not_kept(tmp_path: Path) -> None:
    inline = await accepted_then(tmp_path, "undone")
    assert (inline["accepted"], inline["kept_rate"]) == (1, 0.0)


async def test_an_accepted_suggestion_partly_typed_over_is_kept_in_part(tmp_path: Path) -> None:
    inline = await accepted_then(tmp_path, "retyped")
    assert 0.0 < inline["kept_rate"] < 1.0
