"""Refactors that never run empty, never write the prompt's markers, and ask for bounded answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsprotocol import types

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from lsp_server.config.loader import parse_config_text
from lsp_server.config.model import LOCAL_CHAT_MAX_TOKENS as LOCAL_MAX_TOKENS
from lsp_server.refactor.prompt import READY_INSTRUCTIONS, SELECTION_END, SELECTION_START
from lsp_server.refactor.service import LOCAL_MIN_TOKENS, local_answer_budget
from tests.support.config_text import LOCAL_OFF
from tests.support.edit_client import record_applied_edits
from tests.support.lsp_session import endpoint_toml, eventually, lsp_session, open_document
from tests.support.refactor_session import (
    AREA_BODY,
    CIRCLE,
    REFACTORED,
    assert_refactored,
    chat_prompt,
    messages_of,
    refactor,
    refactor_config,
)

ANSWER = "```python\nreturn math.pi * self.r ** 2\n```\n"


def chat_bodies(server: FakeLLMServer) -> list[dict[str, Any]]:
    return [r.json for r in server.requests if r.json and "messages" in r.json]


async def test_no_instruction_asks_with_the_ready_instructions(tmp_path: Path) -> None:
    asked: list[types.ShowMessageRequestParams] = []
    title, instruction = READY_INSTRUCTIONS[2]
    with FakeLLMServer(Behaviour(text=ANSWER)) as endpoint:
        async with lsp_session(tmp_path, config_text=refactor_config(("r", endpoint))) as client:
            # pygls' `feature` decorator is unannotated.
            @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)  # type: ignore[untyped-decorator]
            def choose(params: types.ShowMessageRequestParams) -> types.MessageActionItem:
                asked.append(params)
                return types.MessageActionItem(title=title)

            applied = record_applied_edits(client)
            uri = (tmp_path / "circle.py").as_uri()
            open_document(client, uri, CIRCLE)
            result = await refactor(client, uri, instruction="")
            assert result["applied"] is True, result
            assert [a.title for a in asked[0].actions or []] == [t for t, _ in READY_INSTRUCTIONS]
            assert instruction in chat_prompt(endpoint)
            assert_refactored(applied[0], uri, CIRCLE, REFACTORED)


async def test_a_dismissed_question_runs_nothing(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text=ANSWER)) as endpoint:
        async with lsp_session(tmp_path, config_text=refactor_config(("r", endpoint))) as client:
            # pygls' `feature` decorator is unannotated.
            @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)  # type: ignore[untyped-decorator]
            def dismiss(params: types.ShowMessageRequestParams) -> None:
                return None

            uri = (tmp_path / "circle.py").as_uri()
            open_document(client, uri, CIRCLE)
            result = await refactor(client, uri, instruction="")
            assert result == {"applied": False, "error": "no instruction chosen"}
            assert chat_bodies(endpoint) == []


async def test_prompt_markers_in_the_answer_never_reach_the_file(tmp_path: Path) -> None:
    echoed = (
        "```python\n    def area(self):\n"
        f"{SELECTION_START}        return math.pi * self.r ** 2\n{SELECTION_END}\n```\n"
    )
    with FakeLLMServer(Behaviour(text=echoed)) as endpoint:
        async with lsp_session(tmp_path, config_text=refactor_config(("r", endpoint))) as client:
            applied = record_applied_edits(client)
            uri = (tmp_path / "circle.py").as_uri()
            open_document(client, uri, CIRCLE)
            result = await refactor(client, uri)
            assert result["applied"] is True, result
            assert_refactored(applied[0], uri, CIRCLE, REFACTORED)


async def test_the_endpoint_max_tokens_bounds_a_refactor_and_a_cut_answer_is_named(
    tmp_path: Path,
) -> None:
    # The test server cuts at max_tokens (four characters a token), mid-expression here.
    cut_short = "```python\nreturn math.pi * (self.r" + " * self.r" * 20 + ")\n```\n"
    with FakeLLMServer(Behaviour(text=cut_short, chunk_chars=1)) as endpoint:
        config = LOCAL_OFF + endpoint_toml(
            "small", endpoint.base_url, fim=False, roles='["refactor"]', extra="max_tokens = 16"
        )
        async with lsp_session(tmp_path, config_text=config) as client:
            uri = (tmp_path / "circle.py").as_uri()
            open_document(client, uri, CIRCLE)
            result = await refactor(client, uri, selection=AREA_BODY)
            assert result["applied"] is False
            assert chat_bodies(endpoint)[-1]["max_tokens"] == 16
            assert await eventually(lambda: bool(messages_of(client, types.MessageType.Error)))
            (message,) = messages_of(client, types.MessageType.Error)
            assert "16 tokens" in message and "nothing was changed" in message


def test_a_refactor_only_endpoint_defaults_to_a_refactor_sized_answer() -> None:
    text = (
        endpoint_toml("reasoner", "http://127.0.0.1:9/v1", roles='["refactor"]')
        + endpoint_toml("fast", "http://127.0.0.1:9/v1")
        + endpoint_toml("both", "http://127.0.0.1:9/v1", roles='["inline", "refactor"]')
    )
    config = parse_config_text(text, file="t.toml")
    assert [e.max_tokens for e in config.endpoints] == [4096, 64, 64]


def test_the_local_answer_budget_follows_the_selection_within_bounds() -> None:
    assert local_answer_budget(10) == LOCAL_MIN_TOKENS
    assert LOCAL_MIN_TOKENS < local_answer_budget(600) < LOCAL_MAX_TOKENS
    assert local_answer_budget(100_000) == LOCAL_MAX_TOKENS
