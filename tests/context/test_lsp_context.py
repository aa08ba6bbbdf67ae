"""Context beyond the file over LSP: the real server, a recording endpoint, other open files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_lsp import LanguageClient

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.lsp_session import (
    endpoint_toml,
    eventually,
    inline_completion,
    lsp_session,
    open_document,
    server_status,
)

ROUTING = "[routing]\ninline_deadline_ms = 5000\nhedge_after_ms = 4000\n[local]\nenabled = false\n"
WIDGETS = (
    "class Widget:\n    knobs: int = 0\n\n\n"
    "def frobnicate_widget(widget: Widget, *, force: float = 1.0) -> Widget:\n"
    '    """Turn a widget inside out, gently."""\n'
    "    widget.knobs += int(force)\n    return widget\n"
)
SIGNATURE = "def frobnicate_widget(widget: Widget, *, force: float = 1.0) -> Widget:"


async def context_status(client: LanguageClient) -> dict[str, Any]:
    context: dict[str, Any] = (await server_status(client))["context"]
    return context


async def settled(client: LanguageClient, **at_least: int) -> bool:
    """Wait until the store has gathered at least these counts and nothing is pending."""
    state: dict[str, Any] = {}

    async def gathered() -> bool:
        state.update(await context_status(client))
        return state["gathering"] == 0 and all(state[k] >= v for k, v in at_least.items())

    deadline = 30
    for _ in range(deadline * 10):
        if await gathered():
            return True
        await eventually(lambda: False, 0.1)
    return False


def cursor_at_end(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines) - 1, len(lines[-1])


async def test_another_open_file_reaches_the_prompt(tmp_path: Path) -> None:
    widgets = tmp_path / "widgets.py"
    main = tmp_path / "main.py"
    main_text = "part = Widget()\npart.knobs = 3\nresult = frob"
    with FakeLLMServer(Behaviour(text="nicate_widget(part)\n")) as endpoint:
        config = ROUTING + endpoint_toml("remote", endpoint.base_url)
        async with lsp_session(tmp_path, config_text=config) as client:
            open_document(client, widgets.as_uri(), WIDGETS)
            open_document(client, main.as_uri(), main_text)
            assert await settled(client, chunks=2)
            answer = await inline_completion(client, main.as_uri(), *cursor_at_end(main_text))
            assert answer is not None and answer.items
    prompt = endpoint.requests[-1].payload["prompt"]
    assert SIGNATURE in prompt
    assert prompt.index("# path: widgets.py") < prompt.index("# path: main.py")
    assert prompt.endswith("# path: main.py\n" + main_text)


async def test_an_imported_definition_reaches_the_prompt_unopened(tmp_path: Path) -> None:
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "widgets.py").write_text(WIDGETS)
    main = tmp_path / "main.py"
    main_text = "from shop.widgets import frobnicate_widget\n\n\nout = frobnicate_widget("
    with FakeLLMServer(Behaviour(text="part)\n")) as endpoint:
        config = ROUTING + endpoint_toml("remote", endpoint.base_url)
        async with lsp_session(tmp_path, config_text=config) as client:
            open_document(client, main.as_uri(), main_text)
            assert await settled(client, definitions=1)
            await inline_completion(client, main.as_uri(), *cursor_at_end(main_text))
    prompt = endpoint.requests[-1].payload["prompt"]
    assert "# path: shop/widgets.py\n" + SIGNATURE + '\n    """Turn a widget' in prompt


async def test_context_off_in_the_file_or_the_editor_sends_the_window_alone(
    tmp_path: Path,
) -> None:
    widgets = tmp_path / "widgets.py"
    main = tmp_path / "main.py"
    main_text = "part = Widget()\nresult = frobnicate_widget(part"
    with FakeLLMServer(Behaviour(text=")\n")) as endpoint:
        for config_extra, options in (
            ("context = false\n", None),
            ("", {"gatewayLs": {"routing": {"context": False}}}),
        ):
            endpoint.reset()
            config = ROUTING.replace("[routing]\n", "[routing]\n" + config_extra)
            config += endpoint_toml("remote", endpoint.base_url)
            async with lsp_session(
                tmp_path, config_text=config, initialization_options=options
            ) as client:
                open_document(client, widgets.as_uri(), WIDGETS)
                open_document(client, main.as_uri(), main_text)
                assert await settled(client)
                assert (await context_status(client))["chunks"] == 0
                await inline_completion(client, main.as_uri(), *cursor_at_end(main_text))
            assert endpoint.requests[-1].payload["prompt"] == main_text


async def test_the_editor_cannot_turn_context_on_against_the_file(tmp_path: Path) -> None:
    options = {"gatewayLs": {"routing": {"context": True}}}
    config = ROUTING.replace("[routing]\n", "[routing]\ncontext = false\n")
    async with lsp_session(tmp_path, config_text=config, initialization_options=options) as client:
        assert (await context_status(client))["enabled"] is False
