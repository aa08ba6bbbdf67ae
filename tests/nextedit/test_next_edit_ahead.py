"""A next edit's request assembled while typing pauses (`nextedit.ahead`): used by the request
made for the same state, with the same prompt, and never once anything it read has changed.
In process, on a recording Mercury endpoint on loopback; over LSP, the real server."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from lsp_server.core.engine import Engine
from lsp_server.nextedit.ahead import PAUSE_S
from lsp_server.nextedit.service import NextEdit
from tests.support.config_text import AWS_KEY_ID
from tests.support.lsp_session import open_document
from tests.support.mercury_session import mercury_session, next_edit, rename_in_signature
from tests.support.mercury_upstream import finish_the_rename, user_content
from tests.support.next_edit_engine import RENAMED, SOURCE, LocalStandIn, edit_bytes, engine_for

CURSOR = 16  # the end of the rename in RENAMED


@asynccontextmanager
async def engine_and_mercury(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Engine, FakeLLMServer]]:
    """An engine whose next edits go to a recording Mercury endpoint that finishes the rename."""
    with FakeLLMServer(Behaviour(text=finish_the_rename("value", "amount"))) as mercury:
        engine = engine_for(tmp_path, mercury, LocalStandIn(), monkeypatch)
        try:
            yield engine, mercury
        finally:
            await engine.aclose()


def counting_assemblies(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many requests the service assembles on a request's path from now on."""
    count = [0]
    assemble: Callable[..., Any] = engine.next_edits._assemble

    def counted(*args: Any) -> Any:
        count[0] += 1
        return assemble(*args)

    monkeypatch.setattr(engine.next_edits, "_assemble", counted)
    return count


async def predict(engine: Engine, uri: str, offset: int = CURSOR) -> NextEdit:
    return await engine.next_edits.predict(uri=uri, text=RENAMED, offset=offset, language="python")


async def renamed_and_paused(engine: Engine, uri: str) -> None:
    """The rename typed, the cursor left at its end, then a pause in typing."""
    engine.next_edits.changed(uri, RENAMED, 0)
    engine.next_edits.prepare(uri=uri, text=RENAMED, offset=CURSOR, language="python")
    await asyncio.sleep(PAUSE_S + 0.2)


def last_prompt(mercury: FakeLLMServer) -> str:
    asked = [r for r in mercury.requests if r.path.endswith("/edit/completions")]
    return user_content(asked[-1].payload)


async def test_the_request_after_a_pause_is_the_one_prepared_with_the_same_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with engine_and_mercury(tmp_path, monkeypatch) as (engine, mercury):
        uri = (tmp_path / "scale.py").as_uri()
        engine.next_edits.opened(uri, SOURCE)
        engine.next_edits.changed(uri, RENAMED, 0)
        fresh = await predict(engine, uri)  # assembled on its path, as before
        assert fresh.endpoint == "mercury" and fresh.edits
        fresh_prompt = last_prompt(mercury)
        assembled = counting_assemblies(engine, monkeypatch)

        # The same state again, this time prepared during the pause.
        engine.next_edits.opened(uri, SOURCE)
        await renamed_and_paused(engine, uri)
        assert assembled == [1]  # prepared off the request's path
        edit = await predict(engine, uri)
        assert assembled == [1]  # and the request used it
        assert (edit.endpoint, edit.edits, edit.hull) == (
            fresh.endpoint,
            fresh.edits,
            fresh.hull,
        )
        assert last_prompt(mercury) == fresh_prompt

        # Another cursor is another request: assembled on its path.
        await predict(engine, uri, offset=CURSOR - 1)
        assert assembled == [2]


async def test_nothing_is_prepared_for_a_client_that_never_asks_for_next_edits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with engine_and_mercury(tmp_path, monkeypatch) as (engine, _mercury):
        assembled = counting_assemblies(engine, monkeypatch)
        uri = (tmp_path / "scale.py").as_uri()
        engine.next_edits.opened(uri, SOURCE)
        await renamed_and_paused(engine, uri)
        assert assembled == [0]


async def test_a_secret_typed_after_the_preparation_keeps_the_edit_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with engine_and_mercury(tmp_path, monkeypatch) as (engine, mercury):
        uri = (tmp_path / "scale.py").as_uri()
        engine.next_edits.opened(uri, SOURCE)
        await predict(engine, uri)  # the client asks for next edits
        engine.next_edits.opened(uri, SOURCE)
        await renamed_and_paused(engine, uri)  # prepared, with a clean history
        mercury.reset()
        # Then a secret typed in this document, further down: it joins its own history.
        secret = f'KEY = "{AWS_KEY_ID}"\n'
        engine.next_edits.changed(uri, RENAMED + "\n" * 6 + secret, 9)
        edit = await predict(engine, uri)
        assert edit.endpoint == "local" and edit.reason == "sensitive"
        assert edit_bytes(mercury) == 0


async def test_a_secret_typed_in_another_file_after_the_preparation_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with engine_and_mercury(tmp_path, monkeypatch) as (engine, mercury):
        uri, notes = (tmp_path / "scale.py").as_uri(), (tmp_path / "notes.py").as_uri()
        engine.next_edits.opened(uri, SOURCE)
        await predict(engine, uri)  # the client asks for next edits
        engine.next_edits.opened(notes, "# notes\n")
        engine.next_edits.opened(uri, SOURCE)
        await renamed_and_paused(engine, uri)  # prepared, with a clean history
        mercury.reset()
        # Then a secret typed in another file: it joins the history, and is left out of it.
        engine.next_edits.changed(notes, f'# notes\nkey = "{AWS_KEY_ID}"\n', 1)
        edit = await predict(engine, uri)
        assert edit.endpoint == "mercury" and edit.withheld == 1
        assert edit_bytes(mercury) > 0 and AWS_KEY_ID not in mercury.received_text()


async def test_a_file_made_sensitive_after_the_preparation_keeps_the_edit_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with engine_and_mercury(tmp_path, monkeypatch) as (engine, mercury):
        uri = (tmp_path / "scale.py").as_uri()
        engine.next_edits.opened(uri, SOURCE)
        await predict(engine, uri)
        engine.next_edits.opened(uri, SOURCE)
        await renamed_and_paused(engine, uri)
        mercury.reset()
        routing = dataclasses.replace(engine.config.routing, sensitive_globs=("**/scale.py",))
        engine.reconfigure(dataclasses.replace(engine.config, routing=routing))
        edit = await predict(engine, uri)
        assert edit.endpoint == "local" and edit.reason == "sensitive"
        assert edit_bytes(mercury) == 0


async def test_only_the_local_model_reads_a_prepared_prompt_ahead_where_it_alone_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sensitive document's next edit is the local model's: its prompt is read while typing
    pauses, the call the request then makes. One Mercury may answer is not read locally."""
    local = LocalStandIn()
    with FakeLLMServer(Behaviour(text=finish_the_rename("value", "amount"))) as mercury:
        engine = engine_for(tmp_path, mercury, local, monkeypatch)
        try:
            uri = (tmp_path / "scale.py").as_uri()
            engine.next_edits.opened(uri, SOURCE)
            await predict(engine, uri)
            await renamed_and_paused(engine, uri)
            assert local.read_ahead == []

            routing = dataclasses.replace(engine.config.routing, sensitive_globs=("**/scale.py",))
            engine.reconfigure(dataclasses.replace(engine.config, routing=routing))
            engine.next_edits.opened(uri, SOURCE)
            await renamed_and_paused(engine, uri)
            (read,) = local.read_ahead
            prepared = engine.next_edits._ahead.take(
                uri,
                RENAMED,
                CURSOR,
                "python",
                engine.next_edits._state(),
                engine.next_edits.history.now(),
            )
            assert prepared is not None and prepared.calls["local"][1] is read
        finally:
            await engine.aclose()


async def test_over_lsp_a_next_edit_asked_after_a_pause_in_typing(tmp_path: Path) -> None:
    """As the VS Code extension asks: a pause after the last keystroke, then the request at
    the cursor it left."""
    with FakeLLMServer(Behaviour(text=finish_the_rename("value", "amount"))) as mercury:
        async with mercury_session(tmp_path, mercury) as client:
            uri = (tmp_path / "scale.py").as_uri()
            open_document(client, uri, SOURCE)
            await next_edit(client, uri, 1, 0, 10)  # the client asks for next edits
            rename_in_signature(client, uri)
            await asyncio.sleep(PAUSE_S + 0.3)
            result = await next_edit(client, uri, 4, 0, 16)

            assert [(e["text"], e["range"]) for e in result["edits"]] == [
                (
                    "amount",
                    {"start": {"line": 1, "character": 13}, "end": {"line": 1, "character": 18}},
                )
            ]
            prompt = last_prompt(mercury)
            assert "+def scale(amount, factor):" in prompt
            assert "<|code_to_edit|>\ndef scale(amount<|cursor|>, factor):" in prompt
