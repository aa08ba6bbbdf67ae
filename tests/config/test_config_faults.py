"""A configuration that goes bad under a running server: the last good one stays in force.

The file is deleted, made unreadable, replaced with invalid TOML or caught half-written; the
editor sends an invalid setting. Each time the person is told once (`window/showMessage`), the
old endpoint keeps serving, and nothing crashes. A valid change still takes effect.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from lsprotocol import types
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
from tests.support.report import ServerLog, ServerMemory, report_scenario

ROUTING = (
    "[routing]\ninline_deadline_ms = 5000\nhedge_after_ms = 4000\n\n[local]\nenabled = false\n"
)
WATCH_POLLS_S = 2.5  # long enough for the watcher (one poll a second) to look twice more
_documents = itertools.count()


def config_text(name: str, server: FakeLLMServer) -> str:
    return ROUTING + endpoint_toml(name, server.base_url)


def errors(client: LanguageClient) -> list[str]:
    return [m.message for m in client.messages if m.type == types.MessageType.Error]


async def served_by(client: LanguageClient, tmp_path: Path) -> str | None:
    """Ask for a suggestion in a fresh document; the endpoint that answered it."""
    uri = (tmp_path / f"doc{next(_documents)}.py").as_uri()
    open_document(client, uri, "value = \n")
    result = await inline_completion(client, uri, 0, 8)
    assert result is not None and result.items, "the keystroke was not served"
    decisions = [d for d in (await server_status(client))["decisions"] if d["uri"] == uri]
    endpoint: str | None = decisions[-1]["endpoint"]
    return endpoint


async def until(predicate: Callable[[], Awaitable[bool]], timeout_s: float = 10.0) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await predicate():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


async def told_once(client: LanguageClient, before: int, *needles: str) -> str:
    """Exactly one new error message, naming every needle, and no repeat while polls go on."""
    assert await eventually(lambda: len(errors(client)) > before), "nobody was told"
    await asyncio.sleep(WATCH_POLLS_S)
    new = errors(client)[before:]
    assert len(new) == 1, new
    for needle in needles:
        assert needle in new[0], new[0]
    return new[0]


async def test_deleted_file_and_invalid_toml_keep_the_last_good_config(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    log = ServerLog(capfd)
    path = tmp_path / "config.toml"
    with FakeLLMServer(Behaviour(text="from_old()\n")) as old:
        async with lsp_session(tmp_path, config_text=config_text("old", old)) as client:
            log.follow(client)
            memory = ServerMemory()
            assert await served_by(client, tmp_path) == "old"

            path.unlink()
            await told_once(client, 0, str(path), "deleted")
            assert await served_by(client, tmp_path) == "old"

            path.write_text(ROUTING + '[[endpoints]]\nname = "broken\n', encoding="utf-8")
            await told_once(client, 1, f"{path}:", "invalid TOML")
            assert await served_by(client, tmp_path) == "old"

            path.write_text(config_text("old", old), encoding="utf-8")  # repaired: silence
            await asyncio.sleep(WATCH_POLLS_S)
            assert len(errors(client)) == 2
            assert await served_by(client, tmp_path) == "old"
            growth = memory.growth_mb()
    assert "Traceback" not in log.text
    report_scenario(
        "config-deleted-and-invalid", requests=4, failures_survived=2, memory_growth_mb=growth
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
async def test_unreadable_file_keeps_the_last_good_config(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    with FakeLLMServer(Behaviour(text="from_old()\n")) as old:
        async with lsp_session(tmp_path, config_text=config_text("old", old)) as client:
            memory = ServerMemory()
            path.chmod(0)
            try:
                await told_once(client, 0, str(path), "cannot read")
                assert await served_by(client, tmp_path) == "old"
            finally:
                path.chmod(0o600)
            growth = memory.growth_mb()
    report_scenario("config-unreadable", requests=1, failures_survived=1, memory_growth_mb=growth)


async def test_a_file_caught_half_written_is_read_once_complete(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    with (
        FakeLLMServer(Behaviour(text="from_a()\n")) as first,
        FakeLLMServer(Behaviour(text="from_b()\n")) as second,
    ):
        async with lsp_session(tmp_path, config_text=config_text("start", first)) as client:
            memory = ServerMemory()
            assert await served_by(client, tmp_path) == "start"
            # Several rounds, so some land while the watcher looks at the unfinished file.
            rounds = [(f"round{i}", (second, first)[i % 2]) for i in range(3)]
            for name, server in rounds:
                complete = config_text(name, server)
                cut = complete.index(server.base_url) + 10  # inside the URL string
                path.write_text(complete[:cut], encoding="utf-8")
                await asyncio.sleep(0.1)  # well inside the watcher's settle window
                path.write_text(complete, encoding="utf-8")

                async def switched(name: str = name) -> bool:
                    return [e["name"] for e in (await server_status(client))["endpoints"]] == [name]

                assert await until(switched), f"{name} never took effect"
                assert await served_by(client, tmp_path) == name
            assert errors(client) == []
            growth = memory.growth_mb()
    report_scenario(
        "config-half-written", requests=4, failures_survived=len(rounds), memory_growth_mb=growth
    )


async def test_invalid_editor_setting_is_refused_and_a_valid_one_applies(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    log = ServerLog(capfd)
    with FakeLLMServer(Behaviour(text="from_old()\n")) as old:
        async with lsp_session(tmp_path, config_text=config_text("old", old)) as client:
            log.follow(client)
            memory = ServerMemory()
            client.workspace_did_change_configuration(
                types.DidChangeConfigurationParams(
                    settings={"gatewayLs": {"routing": {"offline": "sometimes"}}}
                )
            )
            await told_once(client, 0, "routing.offline", "sometimes")
            assert (await server_status(client))["offline"] == "auto"
            assert await served_by(client, tmp_path) == "old"

            client.workspace_did_change_configuration(
                types.DidChangeConfigurationParams(
                    settings={"gatewayLs": {"routing": {"offline": "never"}}}
                )
            )

            async def applied() -> bool:
                offline: str = (await server_status(client))["offline"]
                return offline == "never"

            assert await until(applied)
            assert len(errors(client)) == 1
            assert await served_by(client, tmp_path) == "old"
            growth = memory.growth_mb()
    assert "Traceback" not in log.text
    report_scenario(
        "config-invalid-setting", requests=2, failures_survived=1, memory_growth_mb=growth
    )
