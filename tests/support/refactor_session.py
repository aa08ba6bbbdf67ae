"""The refactor the LSP tests ask for: a class, a selection, an instruction, and what the
refactored file must read."""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types
from pytest_lsp import LanguageClient

from bench.harness.fake_llm_server import FakeLLMServer
from tests.support.config_text import LOCAL_OFF
from tests.support.edit_client import apply_workspace_edit, text_edits_for
from tests.support.lsp_session import endpoint_toml

REFACTOR_ROLE = '["refactor"]'
CIRCLE = (
    "import math\n"
    "\n"
    "\n"
    "class Circle:\n"
    "    def __init__(self, r):\n"
    "        self.r = r\n"
    "\n"
    "    def area(self):\n"
    "        squared = self.r * self.r\n"
    "        return math.pi * squared\n"
    "\n"
    "    def describe(self):\n"
    "        return f'circle {self.r}'\n"
)


# The body of `area`, whole lines 8-9.
AREA_BODY = types.Range(
    start=types.Position(line=8, character=0), end=types.Position(line=10, character=0)
)
INSTRUCTION = "Inline the temporary variable."
REFACTORED = CIRCLE.replace(
    "        squared = self.r * self.r\n        return math.pi * squared\n",
    "        return math.pi * self.r ** 2\n",
)


def refactor_config(*endpoints: tuple[str, FakeLLMServer]) -> str:
    """OpenAI-compatible chat endpoints for refactors only, and no local model."""
    return LOCAL_OFF + "".join(
        endpoint_toml(name, server.base_url, fim=False, roles=REFACTOR_ROLE)
        for name, server in endpoints
    )


def range_json(selection: types.Range) -> dict[str, Any]:
    return {
        "start": {"line": selection.start.line, "character": selection.start.character},
        "end": {"line": selection.end.line, "character": selection.end.character},
    }


def refactor_params(
    uri: str, selection: types.Range = AREA_BODY, instruction: str = INSTRUCTION
) -> types.ExecuteCommandParams:
    argument = {"uri": uri, "range": range_json(selection), "instruction": instruction}
    return types.ExecuteCommandParams(command="gatewayLs.refactor", arguments=[argument])


async def refactor(client: LanguageClient, uri: str, **kwargs: Any) -> Any:
    return await asyncio.wait_for(
        client.workspace_execute_command_async(refactor_params(uri, **kwargs)), 30
    )


def chat_prompt(server: FakeLLMServer) -> str:
    """Everything the endpoint was told in its last generation request, system prompt too."""
    body = [r.json for r in server.requests if r.json and "messages" in r.json][-1]
    system: str = body.get("system", "")
    return system + "\n".join(str(m["content"]) for m in body["messages"])


def messages_of(client: LanguageClient, kind: types.MessageType) -> list[str]:
    return [m.message for m in client.messages if m.type == kind]


def assert_refactored(
    edit: types.ApplyWorkspaceEditParams, uri: str, before: str, expected: str
) -> None:
    """The edit turns `before` into `expected` with small edits, not a whole-file rewrite."""
    edits = text_edits_for(edit.edit, uri)
    assert edits
    assert apply_workspace_edit(before, edit.edit, uri) == expected
    for text_edit in edits:
        assert AREA_BODY.start.line <= text_edit.range.start.line
        assert text_edit.range.end.line <= AREA_BODY.end.line
        assert len(text_edit.new_text) < len(before) // 4
