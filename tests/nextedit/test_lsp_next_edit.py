"""End to end over LSP: the real server, a client speaking Copilot's next-edit method, and a
scripted Mercury upstream on loopback."""

from __future__ import annotations

import sys
from pathlib import Path

from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.lsp_session import open_document, server_env, vscode_capabilities
from tests.support.mercury_session import (
    SOURCE,
    mercury_session,
    next_edit,
    plain,
    rename_in_signature,
    status,
)
from tests.support.mercury_upstream import finish_the_rename, user_content


async def test_after_a_rename_the_next_edit_rewrites_a_use_below(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text=finish_the_rename("value", "amount"))) as mercury:
        async with mercury_session(tmp_path, mercury) as client:
            uri = (tmp_path / "scale.py").as_uri()
            open_document(client, uri, SOURCE)
            rename_in_signature(client, uri)
            result = await next_edit(client, uri, 4, 0, 16)

            assert result["edits"], result
            edit = result["edits"][0]
            assert edit["text"] == "amount"
            assert edit["range"] == {
                "start": {"line": 1, "character": 13},
                "end": {"line": 1, "character": 18},
            }
            assert edit["textDocument"] == {"uri": uri, "version": 4}
            assert edit["command"]["command"] == "gatewayLs.didAcceptInlineEdit"

            asked = [r for r in mercury.requests if r.path.endswith("/edit/completions")]
            assert len(asked) == 1
            body = asked[0].payload
            assert body["model"] == "mercury-edit-2"
            assert [m["role"] for m in body["messages"]] == ["user"]
            prompt = user_content(body)
            assert "-def scale(value, factor):" in prompt
            assert "+def scale(amount, factor):" in prompt
            assert "<|edit_diff_history|>" in prompt
            assert "<|code_to_edit|>\ndef scale(amount<|cursor|>, factor):" in prompt
            assert "<|/code_to_edit|>" in prompt
            assert "current_file_path: scale.py" in prompt


async def test_acceptance_and_dismissal_are_counted_per_endpoint(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text=finish_the_rename("value", "amount"))) as mercury:
        async with mercury_session(tmp_path, mercury) as client:
            uri = (tmp_path / "scale.py").as_uri()
            open_document(client, uri, SOURCE)
            rename_in_signature(client, uri)
            first = await next_edit(client, uri, 4, 0, 16)
            command = first["edits"][0]["command"]
            client.protocol.notify("textDocument/didShowInlineEdit", {"item": {"command": command}})
            second = await next_edit(client, uri, 4, 0, 16)  # the first was passed over
            shown = {"item": {"command": second["edits"][0]["command"]}}
            client.protocol.notify("textDocument/didShowInlineEdit", shown)
            await client.workspace_execute_command_async(
                types.ExecuteCommandParams(
                    command=second["edits"][0]["command"]["command"],
                    arguments=second["edits"][0]["command"]["arguments"],
                )
            )
            status_now = await status(client)
            (endpoint,) = [e for e in status_now["endpoints"] if e["name"] == "mercury"]
            assert endpoint["edit"]["shown"] == 2
            assert endpoint["edit"]["accepted"] == 1
            assert endpoint["edit"]["dismissed"] == 1
            assert endpoint["edit"]["acceptance_rate"] == 0.5
            assert status_now["edit_requests"] == 2
            assert any(d["kind"] == "edit" for d in status_now["decisions"])


async def test_a_stale_version_gets_no_edits(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text=finish_the_rename("value", "amount"))) as mercury:
        async with mercury_session(tmp_path, mercury) as client:
            uri = (tmp_path / "scale.py").as_uri()
            open_document(client, uri, SOURCE)
            rename_in_signature(client, uri)
            assert await next_edit(client, uri, 3, 0, 16) == {"edits": []}
            assert not [r for r in mercury.requests if r.path.endswith("/edit/completions")]


async def test_the_method_is_announced_in_the_capabilities(tmp_path: Path) -> None:
    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "lsp_server", "serve"],
        server_env=server_env(tmp_path),
    )
    client = await config.start()
    assert isinstance(client, LanguageClient)
    try:
        result = await client.initialize_session(
            types.InitializeParams(capabilities=vscode_capabilities(), root_uri=tmp_path.as_uri())
        )
        experimental = plain(result.capabilities.experimental)
        assert experimental["copilotInlineEdit"] is True
    finally:
        await client.shutdown_session()
