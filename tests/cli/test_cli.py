"""The command line as a person runs it: the real `gateway-ls` process, output and exit codes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from lsprotocol import types

from tests.support.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.lsp_session import (
    endpoint_toml,
    inline_completion,
    lsp_session,
    open_document,
    server_env,
)

LOCAL_OFF = "[local]\nenabled = false\n"


def gateway_ls(tmp_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lsp_server", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=server_env(tmp_path),
        check=False,
    )


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_bad_configuration_exits_2_naming_file_line_and_key(tmp_path: Path) -> None:
    config = write_config(tmp_path, '[routing]\ninline_deadline_ms = 350\noffline = "sometimes"\n')
    result = gateway_ls(tmp_path, "--config", str(config), "doctor", "--no-local")
    assert result.returncode == 2
    assert f"{config}:3: routing.offline" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_config_file_and_bad_usage_exit_2(tmp_path: Path) -> None:
    missing = gateway_ls(tmp_path, "--config", str(tmp_path / "nope.toml"), "doctor")
    assert missing.returncode == 2 and "nope.toml" in missing.stderr
    assert gateway_ls(tmp_path).returncode == 2  # no command
    assert gateway_ls(tmp_path, "complete", "no-line-or-column").returncode == 2
    assert gateway_ls(tmp_path, "serve", "--tcp", "host:notaport").returncode == 2


def test_complete_prints_one_suggestion(tmp_path: Path) -> None:
    source = tmp_path / "add.py"
    source.write_text("def add(a, b):\n    \n", encoding="utf-8")
    with FakeLLMServer(Behaviour(text="return a + b\n")) as endpoint:
        config = write_config(tmp_path, LOCAL_OFF + endpoint_toml("fake", endpoint.base_url))
        result = gateway_ls(tmp_path, "--config", str(config), "complete", f"{source}:2:5")
        assert result.returncode == 0, result.stderr
        assert result.stdout == "return a + b\n"
        assert "fake" in result.stderr  # which endpoint answered, on stderr
        assert endpoint.requests[-1].json["prompt"] == "def add(a, b):\n    "


def test_complete_with_nothing_reachable_fails_cleanly(tmp_path: Path) -> None:
    source = tmp_path / "a.py"
    source.write_text("x = \n", encoding="utf-8")
    config = write_config(tmp_path, LOCAL_OFF + endpoint_toml("gone", "http://127.0.0.1:9/v1"))
    result = gateway_ls(
        tmp_path, "--config", str(config), "complete", f"{source}:1:5", "--deadline-ms", "3000"
    )
    assert result.returncode == 0  # an empty suggestion is an answer
    assert result.stdout.strip() == ""
    assert "Traceback" not in result.stderr


def test_doctor_prints_a_table_of_endpoints(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(models=("fake-model",))) as endpoint:
        config = write_config(
            tmp_path,
            LOCAL_OFF
            + endpoint_toml("up", endpoint.base_url)
            + endpoint_toml("down", "http://127.0.0.1:9/v1")
            + endpoint_toml("keyless", endpoint.base_url, extra='api_key_env = "GATEWAY_LS_UNSET"'),
        )
        result = gateway_ls(tmp_path, "--config", str(config), "doctor")
    assert result.returncode == 0  # at least one endpoint works
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    assert "ok" in rows["up"] and "yes" in rows["up"]  # reachable, and the model is listed
    assert "unreachable" in rows["down"]
    assert "GATEWAY_LS_UNSET" in rows["keyless"]
    assert "warning: keyless" in result.stdout


def test_doctor_with_nothing_working_exits_1(tmp_path: Path) -> None:
    config = write_config(tmp_path, LOCAL_OFF + endpoint_toml("down", "http://127.0.0.1:9/v1"))
    assert gateway_ls(tmp_path, "--config", str(config), "doctor").returncode == 1


async def test_stats_reads_a_running_server(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text="pass\n")) as endpoint:
        config = LOCAL_OFF + endpoint_toml("fast", endpoint.base_url)
        async with lsp_session(tmp_path, config_text=config) as client:
            uri = (tmp_path / "s.py").as_uri()
            open_document(client, uri, "def f():\n    \n")
            await inline_completion(client, uri, 1, 4)
            await client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="gatewayLs.status")
            )
            for _ in range(50):  # the server publishes its status every two seconds
                result = await asyncio.to_thread(gateway_ls, tmp_path, "stats")
                if result.returncode == 0 and "config-order" in result.stdout:
                    break
                await asyncio.sleep(0.2)
            assert result.returncode == 0, result.stderr
            assert "fast" in result.stdout and "healthy" in result.stdout
            assert "last decisions" in result.stdout
    after = gateway_ls(tmp_path, "stats")  # the server has exited: its file is gone
    assert after.returncode == 1 and "no running gateway-ls server" in after.stderr


async def test_serve_accepts_the_flags_lsp_clients_append(tmp_path: Path) -> None:
    """vscode-languageclient starts `serve --stdio --clientProcessId=N`; it must answer."""
    with FakeLLMServer(Behaviour(text="pass\n")) as endpoint:
        config = LOCAL_OFF + endpoint_toml("fast", endpoint.base_url)
        flags = ("--stdio", "--clientProcessId=1")
        async with lsp_session(tmp_path, config_text=config, extra_args=flags) as client:
            uri = (tmp_path / "s.py").as_uri()
            open_document(client, uri, "def f():\n    \n")
            result = await inline_completion(client, uri, 1, 4)
            assert result is not None and result.items[0].insert_text == "pass"
