"""An LSP session whose server asks a scripted Mercury for next edits, and the keystrokes and
requests the next-edit tests send."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp import LanguageClient

from bench.harness.fake_llm_server import FakeLLMServer
from tests.support.lsp_session import lsp_session

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


def plain(value: Any) -> Any:
    """`value` as plain JSON: a pygls client reads an object lsprotocol has no type for (a next
    edit's result, the server's experimental capabilities) as nested named tuples."""
    if hasattr(value, "_asdict"):
        return {key: plain(item) for key, item in value._asdict().items()}
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value
