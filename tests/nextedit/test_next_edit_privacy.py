"""Privacy over every part of a next-edit prompt, in process: an `Engine` on a recording
Mercury endpoint on loopback, and a local model that stands in for the real one."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from lsp_server.core.engine import Engine
from lsp_server.nextedit.service import NextEdit
from tests.support.config_text import AWS_KEY_ID
from tests.support.mercury_upstream import finish_the_rename
from tests.support.next_edit_engine import RENAMED, SOURCE, LocalStandIn, edit_bytes, engine_for


async def predict(engine: Engine, uri: str) -> NextEdit:
    return await engine.next_edits.predict(uri=uri, text=RENAMED, offset=16, language="python")


async def rename(engine: Engine, uri: str) -> None:
    engine.next_edits.opened(uri, SOURCE)
    engine.next_edits.changed(uri, RENAMED, 0)


async def test_a_secret_in_another_documents_history_is_left_out_not_the_next_edit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another document's recent edit only adds context: the one holding a secret is left out
    (counted, not sent), and the next edit goes on to Mercury without it."""
    local = LocalStandIn()
    with FakeLLMServer(Behaviour(text=finish_the_rename("value", "amount"))) as mercury:
        engine = engine_for(tmp_path, mercury, local, monkeypatch)
        try:
            notes, other = (tmp_path / "notes.py").as_uri(), (tmp_path / "other.py").as_uri()
            # A secret typed in another file: it is in the history every prompt carries.
            engine.next_edits.opened(notes, "# notes\n")
            engine.next_edits.changed(notes, f'# notes\nkey = "{AWS_KEY_ID}"\n', 1)
            await rename(engine, other)  # typing elsewhere closes the edit that typed it
            edit = await predict(engine, other)
            assert edit.endpoint == "mercury" and edit.edits
            assert edit.withheld == 1
            assert local.asked == 0
            assert edit_bytes(mercury) > 0
            assert AWS_KEY_ID not in mercury.received_text()
            assert "(amount" in mercury.received_text()  # this document's own edit went
            assert engine.privacy.withheld >= 1
        finally:
            await engine.aclose()


async def test_a_secret_in_the_documents_own_history_keeps_its_next_edit_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the request is about goes whole or not at all: a secret typed in this document,
    even taken out again, keeps its next edit on the local model."""
    local = LocalStandIn()
    with FakeLLMServer(Behaviour(text=finish_the_rename("value", "amount"))) as mercury:
        engine = engine_for(tmp_path, mercury, local, monkeypatch)
        try:
            uri = (tmp_path / "scale.py").as_uri()
            key, tail = f'key = "{AWS_KEY_ID}"\n', "\n" * 6 + "x = 1\n"
            engine.next_edits.opened(uri, SOURCE)
            engine.next_edits.changed(uri, key + SOURCE, 0)  # the secret, typed
            engine.next_edits.changed(uri, key + SOURCE + tail, 9)  # far away: that edit closes
            engine.next_edits.changed(uri, SOURCE + tail, 0)  # and the secret goes again
            edit = await engine.next_edits.predict(
                uri=uri, text=SOURCE + tail, offset=16, language="python"
            )
            assert edit.endpoint == "local" and edit.reason == "sensitive"
            assert local.asked == 1
            assert edit_bytes(mercury) == 0
        finally:
            await engine.aclose()


async def test_a_secret_in_the_region_keeps_the_next_edit_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = LocalStandIn()
    with FakeLLMServer(Behaviour(text=finish_the_rename("value", "amount"))) as mercury:
        engine = engine_for(tmp_path, mercury, local, monkeypatch)
        try:
            uri = (tmp_path / "scale.py").as_uri()
            text = RENAMED.replace(
                "    return result", f'    key = "{AWS_KEY_ID}"\n    return result'
            )
            engine.next_edits.opened(uri, SOURCE)
            engine.next_edits.changed(uri, text, 0)
            edit = await engine.next_edits.predict(uri=uri, text=text, offset=16, language="python")
            assert edit.endpoint == "local" and edit.reason == "sensitive"
            assert edit_bytes(mercury) == 0
        finally:
            await engine.aclose()


async def test_a_sensitive_files_next_edit_is_answered_locally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = LocalStandIn()
    with FakeLLMServer(Behaviour(text=finish_the_rename("value", "amount"))) as mercury:
        engine = engine_for(tmp_path, mercury, local, monkeypatch)
        try:
            uri = (tmp_path / "secrets" / "scale.py").as_uri()
            await rename(engine, uri)
            edit = await engine.next_edits.predict(
                uri=uri, text=RENAMED, offset=16, language="python"
            )
            assert edit.endpoint == "local" and edit.reason == "sensitive"
            assert local.asked == 1
            assert [(e.text) for e in edit.edits] == ["amount"]
            assert edit_bytes(mercury) == 0
        finally:
            await engine.aclose()


async def test_a_local_preset_that_cannot_predict_next_edits_is_not_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sensitive file's next edit with a local model that does not predict next edits: no
    edit, at once, with the reason; the model is never asked, nothing leaves the machine."""
    local = LocalStandIn(next_edits=False)
    with FakeLLMServer(Behaviour(text=finish_the_rename("value", "amount"))) as mercury:
        engine = engine_for(tmp_path, mercury, local, monkeypatch)
        try:
            # A file that may leave the machine gets Mercury's edit; the local model is no hedge.
            other = (tmp_path / "scale.py").as_uri()
            await rename(engine, other)
            assert (await predict(engine, other)).endpoint == "mercury"
            sent = edit_bytes(mercury)
            uri = (tmp_path / "secrets" / "scale.py").as_uri()
            await rename(engine, uri)
            edit = await predict(engine, uri)
            assert (edit.endpoint, edit.edits, edit.reason) == (None, (), "local-declines")
            assert edit.unavailable is not None
            assert "does not predict next edits" in str(edit.unavailable)
            assert local.asked == 0
            assert edit_bytes(mercury) == sent
        finally:
            await engine.aclose()
