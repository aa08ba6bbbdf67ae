"""The kept rate: how much of an accepted next edit is still in the document a while later.
In process, a real engine asking a scripted Mercury endpoint on loopback; the window made
short through the service's constructor."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from lsp_server.cli.stats import format_edit_traffic
from lsp_server.core.engine import Engine
from lsp_server.nextedit.history import EditHistory
from lsp_server.nextedit.kept_rate import MAX_DIRTY_CHARS, kept_chars
from lsp_server.nextedit.service import NextEditService
from lsp_server.routing.edit_outcomes import EditOutcomes
from lsp_server.text_edits import apply_edits
from tests.support.mercury_upstream import finish_the_rename
from tests.support.next_edit_engine import RENAMED, SOURCE, LocalStandIn, engine_for

WINDOW_S = 0.3
URI = "file:///w/scale.py"


@pytest.mark.unit
def test_kept_characters_are_counted_token_by_token() -> None:
    assert kept_chars("x = old\n", "x = new_name\n", "x = new_name\n") == (8, 8)
    assert kept_chars("x = old\n", "x = new_name\n", "x = old\n") == (0, 8)
    kept, inserted = kept_chars("f()\n", "f(alpha, beta)\n", "f(alpha)\n")
    assert 0 < kept < inserted
    assert kept_chars("a\n", "ab c\n", "ab c\n" + "z" * (MAX_DIRTY_CHARS + 10)) == (0, 4)


@pytest.mark.unit
def test_a_tracked_span_moves_with_edits_before_it_and_grows_with_edits_in_it() -> None:
    history = EditHistory()
    history.opened("u", "aaa bbb ccc\n")
    span = history.track("u", 4, 7)
    assert span is not None
    history.changed("u", "u", "zz aaa bbb ccc\n", 0)  # typed before it
    assert (span.start, span.end) == (7, 10)
    history.changed("u", "u", "zz aaa bXbb ccc\n", 0)  # typed inside it
    assert (span.start, span.end) == (7, 11)
    history.changed("u", "u", "zz aaa bXbb ccc!\n", 0)  # after it
    assert (span.start, span.end) == (7, 11)
    history.closed("u")
    assert span.lost


@pytest.mark.unit
def test_gateway_ls_stats_shows_the_kept_rate_beside_acceptance() -> None:
    outcomes = EditOutcomes()
    outcomes.shown["m"] += 4
    outcomes.accepted["m"] += 2
    outcomes.kept("m", 30, 40)
    table = format_edit_traffic({"endpoints": [{"name": "m", "edit": outcomes.status("m")}]})
    _, header, _, row = table.splitlines()
    assert header.split()[-2:] == ["dismissed", "kept"]
    assert row.split()[-3:] == ["0.5", "0.0", "0.8"]  # the table's one decimal


async def accepted_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after_acceptance: str
) -> dict[str, object]:
    """The rename finished by an accepted next edit; then the document is `after_acceptance`
    ("kept": left as it is; "undone": the edit undone); the endpoint's status once the
    window is over."""
    with FakeLLMServer(Behaviour(text=finish_the_rename("value", "amount"))) as mercury:
        engine: Engine = engine_for(tmp_path, mercury, LocalStandIn(), monkeypatch)
        try:
            service = NextEditService(engine.router, engine.privacy, kept_window_s=WINDOW_S)
            service.opened(URI, SOURCE)
            service.changed(URI, RENAMED, 0)
            edit = await service.predict(
                uri=URI, text=RENAMED, offset=RENAMED.index(","), language="python"
            )
            assert edit.edits, edit
            service.proposed(URI, edit)
            service.shown(edit.id)
            assert service.accepted(edit.id)
            applied = apply_edits(RENAMED, list(edit.edits))
            assert applied == RENAMED.replace("= value", "= amount")
            service.changed(URI, applied, 1)  # the client applies it
            if after_acceptance == "undone":
                service.changed(URI, RENAMED, 1)
            await asyncio.sleep(WINDOW_S * 3)
            status = engine.router.edit_outcomes.status("mercury")
            service.close()
            return status
        finally:
            await engine.aclose()


async def test_an_accepted_edit_undone_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    status = await accepted_then(tmp_path, monkeypatch, "undone")
    assert (status["accepted"], status["kept_rate"]) == (1, 0.0)


async def test_an_accepted_edit_left_in_place_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    status = await accepted_then(tmp_path, monkeypatch, "kept")
    assert (status["accepted"], status["kept_rate"]) == (1, 1.0)
