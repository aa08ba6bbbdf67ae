"""Config files that are not files, and a config rewritten in place under a running server.

`--config` naming a device or a FIFO is a clear error with exit code 2 at once (no gigabytes
read, no wait for a writer). A file emptied by a non-atomic rewrite is never applied as "all
defaults" (which would switch endpoints off and start loading the bundled model): the last good
configuration stays until the new text is complete.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lsprotocol import types

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.lsp_session import endpoint_toml, lsp_session, server_env, server_status
from tests.support.report import ServerMemory, report_scenario

COMMAND_TIMEOUT_S = 30
ROUTING = "[routing]\ninline_deadline_ms = 3000\n\n[local]\nenabled = false\n\n"
WATCH_POLLS_S = 3.0  # the watcher polls once a second and lets a change settle


def run_with_config(tmp_path: Path, config: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    finished = subprocess.run(
        [sys.executable, "-m", "lsp_server", "--config", config, "doctor", "--no-local"],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        env=server_env(tmp_path),
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return finished, time.monotonic() - started


@pytest.mark.parametrize("kind", ["device", "fifo", "oversized"])
def test_a_config_that_is_not_a_small_regular_file_is_refused_with_exit_2(
    tmp_path: Path, kind: str
) -> None:
    if kind == "device":
        config = "/dev/zero"
    elif kind == "fifo":
        config = str(tmp_path / "config.fifo")
        os.mkfifo(config)
    else:
        config = str(tmp_path / "config.toml")
        Path(config).write_text("# padding\n" * 200_000)
    finished, elapsed = run_with_config(tmp_path, config)
    assert finished.returncode == 2, finished.stderr
    assert config in finished.stderr
    reason = "larger than" if kind == "oversized" else "not a regular file"
    assert reason in finished.stderr, finished.stderr
    assert "Traceback" not in finished.stderr
    report_scenario(f"config-{kind}", requests=1, failures_survived=1, memory_growth_mb=None)
    assert elapsed < COMMAND_TIMEOUT_S


async def test_a_file_emptied_mid_edit_is_never_applied(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    with (
        FakeLLMServer(Behaviour(text="old()\n")) as old,
        FakeLLMServer(Behaviour(text="new()\n")) as new,
    ):
        async with lsp_session(
            tmp_path, config_text=ROUTING + endpoint_toml("old", old.base_url)
        ) as client:
            memory = ServerMemory()
            await server_status(client)  # started, and watching the file
            path.write_text("")  # an editor's non-atomic save: truncated, then slowly written
            seen: list[tuple[list[str], bool]] = []
            for _ in range(int(WATCH_POLLS_S / 0.25)):
                await asyncio.sleep(0.25)
                report = await server_status(client)
                names = [e["name"] for e in report["endpoints"]]
                seen.append((names, report["local"]["enabled"]))
            assert all(sample == (["old"], False) for sample in seen), seen

            path.write_text(ROUTING + endpoint_toml("new", new.base_url))

            async def switched() -> bool:
                return [e["name"] for e in (await server_status(client))["endpoints"]] == ["new"]

            deadline = asyncio.get_running_loop().time() + 10
            while not await switched():
                assert asyncio.get_running_loop().time() < deadline, "the new file never applied"
                await asyncio.sleep(0.1)
            errors = [m.message for m in client.messages if m.type == types.MessageType.Error]
            assert any("empty" in message for message in errors), errors
            growth = memory.growth_mb()
    report_scenario(
        "config-emptied-mid-edit",
        requests=len(seen) + 1,
        failures_survived=1,
        memory_growth_mb=growth,
    )
