"""End to end over LSP: the real server, a client speaking Copilot's next-edit method, and a
scripted Mercury upstream on loopback."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_server.lsp.next_edit import plain
from tests.nextedit.mercury_upstream import finish_the_rename, user_content
from tests.support.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.lsp_session import lsp_session, open_document, server_env, vscode_capabilities

KEY_ENV = {"INCEPTION_API_KEY": "test-key"}
SOURCE = "def scale(value, factor):\n    result = value * factor\n    return result\n"


def mercury_config(server: FakeLLMServer, *, routing: str = "edit_deadline_ms = 5000\n") -> str:
    return (
        f"[routing]\n{routing}\n[local]\nenabled = false\n"
        '[[endpoints]]\nname = "mercury"\nkind = "inception"\n'
        f'base_url = "{server.provider_base_url("inception")}"\n'
        'model = "mercury-edit-2"\nroles = ["edit"]\n'
    )


@contextlib.asynccontextmanager
async def mercury_session(
    tmp_path: Path, mercury: FakeLLMServer, routing: str = "edit_deadline_ms = 5000\n"
) -> AsyncIterator[LanguageClient]:
    """A session whose server has its core running: edits made before it runs are not yet
    history (an editor's first keystrokes come later than a test's)."""
    config = mercury_config(mercury, routing=routing)
    async with lsp_session(tmp_path, config_text=config, env=KEY_ENV) as client:
        await status(client)
        yield client


async def status(client: LanguageClient) -> Any:
    return plain(
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="gatewayLs.status")
        )
    )


def rename_in_signature(client: LanguageClient, uri: str) -> None:
    """`value` becomes `amount` in the signature, a keystroke at a time."""
    version = 1
    for start, end, text in ((10, 15, ""), (10, 10, "a"), (11, 11, "mount")):
        version += 1
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[
                    types.TextDocumentContentChangePartial(
                        range=types.Range(
                            start=types.Position(line=0, character=start),
                            end=types.Position(line=0, character=end),
                        ),
                        text=text,
                    )
                ],
            )
        )


async def next_edit(client: LanguageClient, uri: str, version: int, line: int, col: int) -> Any:
    result = await client.protocol.send_request_async(
        "textDocument/copilotInlineEdit",
        {
            "textDocument": {"uri": uri, "version": version},
            "position": {"line": line, "character": col},
        },
    )
    return plain(result)


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
            body = asked[0].json
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
