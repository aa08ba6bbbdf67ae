"""The first keystroke in a document finds its prompt read: the local model reads ahead where
our clients report the cursor (`gatewayLs/didMoveCursor`), and a stock client that reports
nothing still gets its suggestion, only later."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_server.lsp.cursor_report import NOTIFY_CURSOR
from tests.support.lsp_session import inline_completion, lsp_session, open_document, server_status

pytestmark = pytest.mark.model

CONFIG = (
    '[routing]\noffline = "always"\n\n'
    '[local]\nmodel = "gemma-3-270m"\nn_ctx = 2048\nmax_tokens = 6\ndeadline_ms = 60000\n'
)
WAIT_S = 180.0
DOCUMENT = "".join(
    f"def step_{i}(value: int) -> int:\n    return value * {i} + {i * 3}\n\n\n" for i in range(40)
)
CURSOR = types.Position(line=81, character=4)  # in the middle: `return` of step_20 begins here


async def local_status(client: LanguageClient) -> dict[str, Any]:
    status = await asyncio.wait_for(server_status(client), WAIT_S)
    local: dict[str, Any] = status["local"]
    return local


async def until(client: LanguageClient, done: Any) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while not done(local := await local_status(client)):
        assert asyncio.get_running_loop().time() < deadline, local
        await asyncio.sleep(0.2)
    return local


def text_without_line(line: int) -> str:
    lines = DOCUMENT.splitlines(keepends=True)
    lines[line] = "    \n"
    return "".join(lines)


@pytest.mark.parametrize("reported", [True, False], ids=["cursor reported", "stock client"])
async def test_the_first_keystroke_reads_only_what_the_reported_cursor_left(
    tmp_path: Path, reported: bool
) -> None:
    async with lsp_session(tmp_path, config_text=CONFIG) as client:
        warmup = (tmp_path / "warmup.py").as_uri()
        open_document(client, warmup, "x = 1\n")
        await until(client, lambda local: local["state"] == "ready")
        uri = (tmp_path / "steps.py").as_uri()
        open_document(client, uri, text_without_line(CURSOR.line))
        before = await local_status(client)
        if reported:
            client.protocol.notify(
                NOTIFY_CURSOR,
                {
                    "textDocument": {"uri": uri},
                    "position": {"line": CURSOR.line, "character": CURSOR.character},
                },
            )
        await until(
            client,
            lambda local: (
                (local["prefills"] > before["prefills"] or not reported)
                and not local["reading_ahead"]
            ),
        )
        answer = await inline_completion(client, uri, CURSOR.line, CURSOR.character)
        assert answer is not None and answer.items  # both get a suggestion in the end
        local = await local_status(client)
        # The document's first keystroke ended by itself, well within its budget.
        assert local["first_keystrokes"] == {"gemma-3-270m": {"documents": 1, "cut_share": 0.0}}
        if reported:
            assert local["reused_tokens"] >= local["prompt_tokens"] - 2, local
        else:
            assert local["reused_tokens"] < local["prompt_tokens"] // 2, local
