"""Drive the real `gateway-ls serve` over stdio as an editor would (pytest-lsp's client)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities


def server_env(tmp_path: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment that isolates the server from the user's own config and state."""
    env = {k: v for k, v in os.environ.items() if k != "GATEWAY_LS_CONFIG"}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg-config")
    env["XDG_STATE_HOME"] = str(tmp_path / "xdg-state")
    env.update(extra or {})
    return env


def vscode_capabilities() -> types.ClientCapabilities:
    """VS Code's capabilities, with LSP 3.18 inline completion and work-done progress."""
    capabilities = client_capabilities("visual-studio-code")
    text_document = capabilities.text_document or types.TextDocumentClientCapabilities()
    text_document.inline_completion = types.InlineCompletionClientCapabilities(
        dynamic_registration=False
    )
    capabilities.text_document = text_document
    window = capabilities.window or types.WindowClientCapabilities()
    window.work_done_progress = True
    capabilities.window = window
    return capabilities


async def server_status(client: LanguageClient) -> dict[str, Any]:
    """What `gatewayLs.status` answers: the server's status, a JSON object."""
    status = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="gatewayLs.status")
    )
    assert isinstance(status, dict), status
    return status


@contextlib.asynccontextmanager
async def lsp_session(
    tmp_path: Path,
    *,
    config_text: str | None = None,
    initialization_options: Any = None,
    env: Mapping[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
    capabilities: types.ClientCapabilities | None = None,
) -> AsyncIterator[LanguageClient]:
    """The server started over stdio and initialized by a client with `capabilities`
    (VS Code's by default)."""
    args = [sys.executable, "-m", "lsp_server", "serve", *extra_args]
    if config_text is not None:
        config_path = tmp_path / "config.toml"
        config_path.write_text(config_text, encoding="utf-8")
        args[4:4] = ["--config", str(config_path)]
    config = ClientServerConfig(server_command=args, server_env=server_env(tmp_path, env))
    client = await config.start()
    assert isinstance(client, LanguageClient)
    await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities or vscode_capabilities(),
            initialization_options=initialization_options,
            root_uri=tmp_path.as_uri(),
        )
    )
    try:
        yield client
    finally:
        await client.shutdown_session()


def open_document(
    client: LanguageClient, uri: str, text: str, *, language: str = "python", version: int = 1
) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id=language, version=version, text=text
            )
        )
    )


async def inline_completion(
    client: LanguageClient, uri: str, line: int, character: int
) -> types.InlineCompletionList | None:
    result = await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=character),
            context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Automatic
            ),
        )
    )
    assert result is None or isinstance(result, types.InlineCompletionList)
    return result


def endpoint_toml(
    name: str, base_url: str, *, fim: bool = True, roles: str = '["inline"]', extra: str = ""
) -> str:
    return (
        f'[[endpoints]]\nname = "{name}"\nkind = "openai"\nbase_url = "{base_url}"\n'
        f'model = "fake-model"\nroles = {roles}\nfim = {str(fim).lower()}\n{extra}\n'
    )


def one_endpoint_config(directory: Path, base_url: str) -> Path:
    """A config file with one remote endpoint, "fast", at `base_url`: generous deadlines, the
    local model off, so a real editor's request is answered by that endpoint alone."""
    config = directory / "config.toml"
    config.write_text(
        "[routing]\ninline_deadline_ms = 5000\nhedge_after_ms = 4000\n"
        "[local]\nenabled = false\n" + endpoint_toml("fast", base_url)
    )
    return config


async def eventually(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Poll without blocking the event loop (the client's messages keep flowing)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def insert_text(
    client: LanguageClient, uri: str, *, version: int, line: int, character: int, text: str
) -> None:
    """Type `text` at a position, as an incremental `didChange`."""
    at = types.Position(line=line, character=character)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(start=at, end=at), text=text
                )
            ],
        )
    )
