"""An answer the deadline cuts shows its complete lines only: never half a word or half a call."""

from __future__ import annotations

from pathlib import Path

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.config_text import LOCAL_OFF
from tests.support.lsp_session import endpoint_toml, inline_completion, lsp_session, open_document

ROUTING = "[routing]\ninline_deadline_ms = 700\nmax_hedge_ratio = 0\n"


async def shown(tmp_path: Path, answer: str, text: str, line: int, character: int) -> list[str]:
    """What three keystrokes at `line`, `character` show, each in a document of its own."""
    # Three characters every 0.1 s: the deadline comes some twenty characters in.
    with FakeLLMServer(Behaviour(text=answer, chunk_chars=3, chunk_delay_s=0.1)) as endpoint:
        config = ROUTING + LOCAL_OFF + endpoint_toml("drip", endpoint.base_url)
        async with lsp_session(tmp_path, config_text=config) as client:
            answers: list[str] = []
            for keystroke in range(3):
                uri = (tmp_path / f"cut{keystroke}.py").as_uri()
                open_document(client, uri, text)
                result = await inline_completion(client, uri, line, character)
                assert result is not None
                item = result.items[0].insert_text if result.items else ""
                assert isinstance(item, str)
                answers.append(item)
    return answers


async def test_a_line_cut_by_the_deadline_is_not_shown(tmp_path: Path) -> None:
    answer = "a + b + c + d + e + f + g + h + i + j + k + l\n"
    text = "def f(a, b):\n    total = \n"
    assert await shown(tmp_path, answer, text, 1, 12) == ["", "", ""]


async def test_a_block_cut_by_the_deadline_keeps_its_complete_lines(tmp_path: Path) -> None:
    answer = "total = a + b\n    return total * multiplier_of_the_day\n"
    text = "def f(a, b):\n    \n\nprint(f(1, 2))\n"
    assert set(await shown(tmp_path, answer, text, 1, 4)) <= {"", "total = a + b"}
