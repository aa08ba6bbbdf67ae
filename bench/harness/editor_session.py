"""An editor's session with a served `gateway-ls serve` whose model must load first, as the
quality benchmarks drive one: the server's own environment, its log on stderr, files opened
and inline suggestions asked for."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient


def isolated_env(home: Path) -> dict[str, str]:
    """The environment of a served condition: the user's own config and state left out."""
    return {
        **{k: v for k, v in os.environ.items() if k != "GATEWAY_LS_CONFIG"},
        "XDG_CONFIG_HOME": str(home / "xdg-config"),
        "XDG_STATE_HOME": str(home / "xdg-state"),
    }


def logging_client(name: str) -> LanguageClient:
    """A pygls client that prints the server's log messages to stderr."""
    client = LanguageClient(name, "1")

    @client.feature(types.WINDOW_LOG_MESSAGE)  # type: ignore[untyped-decorator]
    def server_log(params: types.LogMessageParams) -> None:
        print(params.message, file=sys.stderr)

    return client


async def wait_until_loaded(client: LanguageClient, workspace: Path) -> None:
    """One throwaway suggestion: the model is loaded before the first timed request."""
    warmup = workspace / "warmup.py"
    warmup.write_text("def add(a, b):\n    ")
    open_file(client, warmup, warmup.read_text())
    await inline(client, warmup, types.Position(line=1, character=4))
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=warmup.as_uri())
        )
    )


def open_file(client: LanguageClient, path: Path, text: str) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=path.as_uri(), language_id="python", version=1, text=text
            )
        )
    )


async def inline(client: LanguageClient, path: Path, position: types.Position) -> str:
    result = await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=path.as_uri()),
            position=position,
            context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Automatic
            ),
        )
    )
    items = result.items if isinstance(result, types.InlineCompletionList) else (result or [])
    if not items:
        return ""
    text = items[0].insert_text
    return text if isinstance(text, str) else text.value


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2
