"""Privacy over every part of a next-edit prompt, in process: an `Engine` on a recording
Mercury endpoint on loopback, and a local model that stands in for the real one."""

from __future__ import annotations

from pathlib import Path

import pytest

from lsp_server.core.engine import Engine
from lsp_server.nextedit.service import NextEdit
from tests.support.config_text import AWS_KEY_ID
from tests.support.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.mercury_upstream import finish_the_rename
from tests.support.next_edit_engine import RENAMED, SOURCE, LocalStandIn, edit_bytes, engine_for


async def predict(engine: Engine, uri: str) -> NextEdit:
    return await engine.next_edits.predict(uri=uri, text=RENAMED, offset=16, language="python")


async def rename(engine: Engine, uri: str) -> None:
    engine.next_edits.opened(uri, SOURCE)
    engine.next_edits.changed(uri, RENAMED, 0)


async def test_a_secret_typed_in_an_earlier_edit_never_reaches_a_remote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = LocalStandIn()
    with FakeLLMServer(Behaviour(text=finish_the_rename("value", "amount"))) as mercury:
        engine = engine_for(tmp_path, mercury, local, monkeypatch)
        try:
            notes, scale = (tmp_path / "notes.py").as_uri(), (tmp_path / "scale.py").as_uri()
            # The control: the same edits without the secret go to Mercury.
            await rename(engine, scale)
            control = await engine.next_edits.predict(
                uri=scale, text=RENAMED, offset=16, language="python"
            )
            assert control.endpoint == "mercury" and edit_bytes(mercury) > 0
            mercury.reset()
            # A secret typed in another file, then the same rename: it is in the history.
            engine.next_edits.opened(notes, "# notes\n")
            engine.next_edits.changed(notes, f'# notes\nkey = "{AWS_KEY_ID}"\n', 1)
            await rename(engine, (tmp_path / "other.py").as_uri())
            edit = await predict(engine, (tmp_path / "other.py").as_uri())
            assert edit.endpoint == "local" and edit.reason == "sensitive"
            assert edit.edits  # the local model answered
            assert edit_bytes(mercury) == 0
            assert AWS_KEY_ID not in mercury.received_text()
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
