"""The VS Code extension's contract with the server, over the server's real stdio.

The extension (clients/vscode) decides how to start the server and what to send in `initialize`;
its `out/cli-launch.js` prints exactly that for settings written as in settings.json. These tests
start the real server with that command line and use what the extension relies on: the
initialization options, `gatewayLs.status`, `gatewayLs.setOffline`, the settings overlay of
`workspace/didChangeConfiguration`, and `textDocument/inlineCompletion`.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import make_test_lsp_client

EXTENSION_DIR = Path(__file__).resolve().parents[2] / "clients" / "vscode"
CLI_LAUNCH = EXTENSION_DIR / "out" / "cli-launch.js"
# Generous: a loaded machine may take a while to start Python; this is no latency assertion.
REPLY_TIMEOUT_S = 60
DOCUMENT_TEXT = "def add(a, b):\n    return \n"


def extension_launch(settings: dict[str, Any], workspace: Path) -> dict[str, Any]:
    """{command, args, initializationOptions}, as the extension computes them."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed, so the extension's launch command cannot be computed")
    if not CLI_LAUNCH.is_file():
        pytest.skip("clients/vscode is not built: run `npm ci && npm run compile` there first")
    completed = subprocess.run(
        [node, str(CLI_LAUNCH), json.dumps(settings), str(workspace)],
        capture_output=True,
        text=True,
        timeout=REPLY_TIMEOUT_S,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    launch: dict[str, Any] = json.loads(completed.stdout)
    return launch


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "gateway-ls.toml").write_text("[routing]\nhedge_after_ms = 100\n")
    (tmp_path / "main.py").write_text(DOCUMENT_TEXT)
    return tmp_path


@pytest.fixture
def settings() -> dict[str, Any]:
    """User settings as in settings.json: nothing leaves the machine and no local model runs."""
    return {
        "gatewayLs.pythonPath": sys.executable,
        "gatewayLs.configPath": "gateway-ls.toml",
        "gatewayLs.routing.offline": "always",
        "gatewayLs.routing.inlineDeadlineMs": 300,
        "gatewayLs.local.enabled": False,
        "editor.fontSize": 14,
    }


def test_python_path_launches_the_module_with_config_and_set_keys_only(
    settings: dict[str, Any], workspace: Path
) -> None:
    launch = extension_launch(settings, workspace)

    assert launch == {
        "command": sys.executable,
        "args": ["-m", "lsp_server", "serve", "--config", str(workspace / "gateway-ls.toml")],
        "initializationOptions": {
            "gatewayLs": {
                "routing": {"offline": "always", "inline_deadline_ms": 300},
                "local": {"enabled": False},
            }
        },
    }


@pytest_asyncio.fixture
async def session(
    settings: dict[str, Any], workspace: Path
) -> AsyncIterator[tuple[LanguageClient, Path]]:
    """The server started and initialized exactly as the extension does it."""
    launch = extension_launch(settings, workspace)
    client = make_test_lsp_client()
    await client.start_io(launch["command"], *launch["args"], cwd=str(workspace))
    capabilities = client_capabilities("visual-studio-code")
    assert capabilities.text_document is not None
    capabilities.text_document.inline_completion = types.InlineCompletionClientCapabilities()
    async with asyncio.timeout(REPLY_TIMEOUT_S):
        await client.initialize_session(
            types.InitializeParams(
                capabilities=capabilities,
                root_uri=workspace.as_uri(),
                workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="ws")],
                initialization_options=launch["initializationOptions"],
            )
        )
    try:
        yield client, workspace
    finally:
        async with asyncio.timeout(REPLY_TIMEOUT_S):
            await client.shutdown_session()
        await client.stop()


async def execute(client: LanguageClient, command: str, *arguments: Any) -> Any:
    async with asyncio.timeout(REPLY_TIMEOUT_S):
        return await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=command, arguments=list(arguments))
        )


def assert_status_shape(status: Any) -> None:
    assert isinstance(status, dict)
    assert status["offline"] in ("auto", "always", "never")
    assert isinstance(status["offline_active"], bool)
    assert isinstance(status["local"]["state"], str)
    assert isinstance(status["endpoints"], list)
    assert isinstance(status["decisions"], list)


async def test_status_reflects_initialization_options(
    session: tuple[LanguageClient, Path],
) -> None:
    client, _ = session

    status = await execute(client, "gatewayLs.status")

    assert_status_shape(status)
    assert status["offline"] == "always"
    assert status["offline_active"] is True


async def test_set_offline_switches_the_mode(session: tuple[LanguageClient, Path]) -> None:
    client, _ = session

    await execute(client, "gatewayLs.setOffline", "never")
    after_never = await execute(client, "gatewayLs.status")
    await execute(client, "gatewayLs.setOffline", "auto")
    after_auto = await execute(client, "gatewayLs.status")

    assert after_never["offline"] == "never"
    assert after_never["offline_active"] is False
    assert after_auto["offline"] == "auto"


async def test_did_change_configuration_overlay_replaces_the_settings(
    session: tuple[LanguageClient, Path],
) -> None:
    client, _ = session

    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"gatewayLs": {"routing": {"offline": "never"}, "local": {"enabled": False}}}
        )
    )
    status = await execute(client, "gatewayLs.status")

    assert status["offline"] == "never"


async def test_inline_completion_offline_without_local_model_is_an_empty_list(
    session: tuple[LanguageClient, Path],
) -> None:
    client, workspace = session
    uri = (workspace / "main.py").as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=DOCUMENT_TEXT
            )
        )
    )

    async with asyncio.timeout(REPLY_TIMEOUT_S):
        result = await client.text_document_inline_completion_async(
            types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line=1, character=11),
                context=types.InlineCompletionContext(
                    trigger_kind=types.InlineCompletionTriggerKind.Automatic
                ),
            )
        )

    assert result is not None
    items = result.items if isinstance(result, types.InlineCompletionList) else result
    assert list(items) == []
