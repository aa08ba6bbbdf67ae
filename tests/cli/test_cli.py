"""The command line as a person runs it: the real `gateway-ls` process, output and exit codes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.config_text import LOCAL_OFF
from tests.support.lsp_session import (
    endpoint_toml,
    inline_completion,
    lsp_session,
    open_document,
    server_env,
)
from tests.support.mercury_upstream import finish_the_rename, user_content


def gateway_ls(
    tmp_path: Path, *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lsp_server", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=server_env(tmp_path, env),
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
        assert endpoint.requests[-1].payload["prompt"] == "def add(a, b):\n    "


def test_complete_reads_the_definitions_the_file_imports(tmp_path: Path) -> None:
    (tmp_path / "geometry.py").write_text(
        'def hypotenuse(a: float, b: float) -> float:\n    """The long side."""\n'
        "    return (a * a + b * b) ** 0.5\n"
    )
    source = tmp_path / "use.py"
    source.write_text("from geometry import hypotenuse\n\nside = hyp\n", encoding="utf-8")
    with FakeLLMServer(Behaviour(text="otenuse(3, 4)\n")) as endpoint:
        config = write_config(tmp_path, LOCAL_OFF + endpoint_toml("fake", endpoint.base_url))
        result = gateway_ls(tmp_path, "--config", str(config), "complete", f"{source}:3:11")
        assert result.returncode == 0, result.stderr
    prompt = endpoint.requests[-1].payload["prompt"]
    assert prompt.startswith(
        "# path: geometry.py\ndef hypotenuse(a: float, b: float) -> float:\n"
        '    """The long side."""\n\n# path: use.py\n'
    )


def test_complete_next_edit_prints_the_edit_as_a_unified_diff(tmp_path: Path) -> None:
    source = tmp_path / "scale.py"
    source.write_text(
        "def scale(amount, factor):\n    result = value * factor\n    return result\n",
        encoding="utf-8",
    )
    with FakeLLMServer(Behaviour(text=finish_the_rename("value", "amount"))) as mercury:
        config = write_config(
            tmp_path,
            LOCAL_OFF + '[[endpoints]]\nname = "mercury"\nkind = "inception"\n'
            f'base_url = "{mercury.provider_base_url("inception")}"\n'
            'model = "mercury-edit-2"\nroles = ["edit"]\n',
        )
        result = gateway_ls(
            tmp_path,
            "--config",
            str(config),
            "complete",
            "--next-edit",
            f"{source}:1:17",
            env={"INCEPTION_API_KEY": "test-key"},
        )
        asked = user_content(mercury.requests[-1].payload)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"--- a/{source}\n+++ b/{source}\n@@ -1,3 +1,3 @@\n def scale(amount, factor):\n"
        "-    result = value * factor\n+    result = amount * factor\n     return result\n"
    )
    assert "mercury" in result.stderr  # which endpoint answered, on stderr
    assert "<|code_to_edit|>" in asked and "<|cursor|>" in asked


def test_complete_with_nothing_reachable_exits_1_with_the_reason(tmp_path: Path) -> None:
    source = tmp_path / "a.py"
    source.write_text("x = \n", encoding="utf-8")
    config = write_config(tmp_path, LOCAL_OFF + endpoint_toml("gone", "http://127.0.0.1:9/v1"))
    result = gateway_ls(
        tmp_path, "--config", str(config), "complete", f"{source}:1:5", "--deadline-ms", "3000"
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert "nothing answered" in result.stderr and "gone: network" in result.stderr
    assert "Traceback" not in result.stderr


def test_complete_endpoint_pins_one_and_never_calls_config_order_fastest(
    tmp_path: Path,
) -> None:
    source = tmp_path / "add.py"
    source.write_text("def add(a, b):\n    \n", encoding="utf-8")
    with (
        FakeLLMServer(Behaviour(text="return a + b\n")) as first,
        FakeLLMServer(Behaviour(text="return b + a\n")) as second,
    ):
        no_hedge = "[routing]\ninline_deadline_ms = 20000\nhedge_after_ms = 19000\n"
        config = write_config(
            tmp_path,
            no_hedge
            + LOCAL_OFF
            + endpoint_toml("first", first.base_url)
            + endpoint_toml("second", second.base_url),
        )
        where = f"{source}:2:5"
        pinned = gateway_ls(
            tmp_path, "--config", str(config), "complete", where, "--endpoint", "second"
        )
        assert pinned.returncode == 0, pinned.stderr
        assert pinned.stdout == "return b + a\n" and first.requests == []
        assert "second (pinned" in pinned.stderr
        # The pinned run's measurement is kept for the next run; without it nothing is known.
        (tmp_path / "xdg-state" / "gateway-ls" / "latency-stats.json").unlink()
        routed = gateway_ls(tmp_path, "--config", str(config), "complete", where)
        assert routed.returncode == 0, routed.stderr
        assert "fastest" not in routed.stderr and "no latency measured yet" in routed.stderr
        unknown = gateway_ls(
            tmp_path, "--config", str(config), "complete", where, "--endpoint", "x"
        )
        assert unknown.returncode == 2 and "first, second" in unknown.stderr


def test_doctor_makes_the_routers_call_and_fails_when_any_endpoint_fails(tmp_path: Path) -> None:
    with (
        FakeLLMServer(Behaviour(models=("fake-model",))) as endpoint,
        FakeLLMServer(Behaviour(fault="status:404", models=("fake-model",))) as listing_only,
    ):
        config = write_config(
            tmp_path,
            LOCAL_OFF
            + endpoint_toml("up", endpoint.base_url)
            + endpoint_toml("chatty", endpoint.base_url, fim=False)
            + endpoint_toml("down", "http://127.0.0.1:9/v1")
            + endpoint_toml("keyless", endpoint.base_url, extra='api_key_env = "GATEWAY_LS_UNSET"')
            + endpoint_toml("nocomplete", listing_only.base_url)
            + endpoint_toml("nov1", endpoint.root_url),
        )
        result = gateway_ls(tmp_path, "--config", str(config), "doctor")
        calls = [(r.path, r.payload) for r in endpoint.requests if r.method == "POST"]
    assert result.returncode == 1
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    assert "FIM /completions" in rows["up"] and " ok " in rows["up"] and "yes" in rows["up"]
    assert "chat /chat/completions" in rows["chatty"] and " ok " in rows["chatty"]
    assert "failed: network" in rows["down"]
    assert "GATEWAY_LS_UNSET" in rows["keyless"]
    assert "warning: keyless" in result.stdout
    assert "failed: not_found" in rows["nocomplete"] and "yes" in rows["nocomplete"]
    assert "hint: nocomplete: wrong model or path" in result.stdout
    assert "hint: nov1: base_url usually ends in /v1" in result.stdout
    # One token, a fixed probe text: nothing of the user's.
    assert {body["max_tokens"] for _, body in calls} == {1}
    assert all("add(a, b)" in str(body) or "ok" in str(body) for _, body in calls)


def test_doctor_exits_0_when_every_endpoint_answers(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(models=("fake-model",))) as endpoint:
        config = write_config(tmp_path, LOCAL_OFF + endpoint_toml("up", endpoint.base_url))
        assert gateway_ls(tmp_path, "--config", str(config), "doctor").returncode == 0


def test_doctor_json_is_what_an_editor_reads(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        LOCAL_OFF
        + endpoint_toml("down", "http://127.0.0.1:9/v1", extra='api_key_env = "GATEWAY_LS_UNSET"'),
    )
    result = gateway_ls(tmp_path, "--config", str(config), "doctor", "--json")
    assert result.returncode == 1
    found = json.loads(result.stdout)
    assert found["configuration"] == str(config)
    assert found["warnings"] == ["down: environment variable GATEWAY_LS_UNSET is not set"]
    (down,) = found["endpoints"]
    assert (down["name"], down["ok"]) == ("down", False)
    assert down["hint"] == "export GATEWAY_LS_UNSET with the key of this endpoint"


def test_doctor_under_offline_always_calls_no_remote_and_says_why(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(models=("fake-model",))) as endpoint:
        config = write_config(
            tmp_path,
            '[routing]\noffline = "always"\n' + LOCAL_OFF + endpoint_toml("up", endpoint.base_url),
        )
        result = gateway_ls(tmp_path, "--config", str(config), "doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    assert endpoint.requests == [] and endpoint.model_list_requests == 0
    row = next(line for line in result.stdout.splitlines() if line.startswith("up "))
    assert "not called: offline" in row
    assert 'offline = "always": nothing leaves this machine' in result.stdout


async def test_stats_reads_a_running_server(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text="pass\n")) as endpoint:
        # A far deadline: the keystroke comes as the server starts, and must be routed.
        routing = "[routing]\ninline_deadline_ms = 20000\nhedge_after_ms = 19000\n"
        config = routing + LOCAL_OFF + endpoint_toml("fast", endpoint.base_url)
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
            assert "last decisions" in result.stdout and "config-order" in result.stdout
    after = gateway_ls(tmp_path, "stats")  # the server has exited: its file is gone
    assert after.returncode == 1 and "no running gateway-ls server" in after.stderr


async def test_serve_accepts_the_flags_lsp_clients_append(tmp_path: Path) -> None:
    """vscode-languageclient starts `serve --stdio --clientProcessId=N`; it must answer."""
    with FakeLLMServer(Behaviour(text="pass\n")) as endpoint:
        # A far deadline: the first keystroke comes as the server starts, on a loaded machine.
        routing = "[routing]\ninline_deadline_ms = 20000\nhedge_after_ms = 19000\n"
        config = routing + LOCAL_OFF + endpoint_toml("fast", endpoint.base_url)
        flags = ("--stdio", "--clientProcessId=1")
        async with lsp_session(tmp_path, config_text=config, extra_args=flags) as client:
            uri = (tmp_path / "s.py").as_uri()
            open_document(client, uri, "def f():\n    \n")
            result = await inline_completion(client, uri, 1, 4)
            assert result is not None and result.items[0].insert_text == "pass"


@pytest.mark.model
def test_complete_on_a_sensitive_file_waits_for_the_local_model(
    tmp_path: Path, bundled_model_path: Path
) -> None:
    """A remote is configured, but a `.env` file stays on this machine: the command loads the
    local model and lets it answer instead of giving up at the keystroke deadline."""
    source = tmp_path / ".env"
    source.write_text("DEBUG=true\nLOG_LEVEL=\n", encoding="utf-8")
    with FakeLLMServer(Behaviour(text="info\n")) as endpoint:
        config = write_config(
            tmp_path,
            f'[local]\nmodel_path = "{bundled_model_path}"\nn_threads = 1\n'
            + endpoint_toml("remote", endpoint.base_url),
        )
        result = gateway_ls(
            tmp_path, "--config", str(config), "complete", f"{source}:2:11", timeout=120
        )
        assert endpoint.requests == []
    assert result.returncode == 0, result.stderr
    assert "local (sensitive" in result.stderr
