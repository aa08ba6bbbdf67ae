"""`gateway-ls init` as a new user runs it: the real command, then `doctor` on what it wrote."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from lsp_server.cli.init import STARTING_ENDPOINTS, starting_configuration
from lsp_server.config.loader import parse_config_text
from tests.support.lsp_session import server_env


def gateway_ls(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lsp_server", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=server_env(tmp_path, env),
        check=False,
    )


def test_init_writes_a_configuration_that_doctor_accepts(tmp_path: Path) -> None:
    path = tmp_path / "new" / "config.toml"
    key = "sk-inception-test-key-not-to-be-written"
    with FakeLLMServer(Behaviour(models=("mercury-edit-2",))) as mercury:
        written = gateway_ls(
            tmp_path,
            "init",
            "--provider",
            "inception",
            "--local",
            "qwen2.5-coder-0.5b",
            "--base-url",
            f"inception={mercury.provider_base_url('inception')}",
            "--config",
            str(path),
            env={"INCEPTION_API_KEY": key},
        )
        assert written.returncode == 0, written.stderr
        assert f"wrote {path}" in written.stdout
        assert "INCEPTION_API_KEY" in written.stdout
        doctor = gateway_ls(
            tmp_path,
            "--config",
            str(path),
            "doctor",
            "--no-local",
            env={"INCEPTION_API_KEY": key},
        )
        asked = [r for r in mercury.requests if r.method == "POST"]
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert [r.path for r in asked] == ["/inception/v1/fim/completions"]
    text = path.read_text(encoding="utf-8")
    assert key not in text
    document = tomllib.loads(text)
    assert document["local"] == {"model": "qwen2.5-coder-0.5b"}
    (endpoint,) = document["endpoints"]
    assert endpoint["kind"] == "inception" and endpoint["api_key_env"] == "INCEPTION_API_KEY"


def test_init_never_overwrites_a_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("# mine\n", encoding="utf-8")
    refused = gateway_ls(tmp_path, "init", "--provider", "anthropic", "--config", str(path))
    assert refused.returncode == 1
    assert f"{path} already exists" in refused.stderr
    assert path.read_text(encoding="utf-8") == "# mine\n"


def test_init_writes_where_the_server_looks_without_a_flag(tmp_path: Path) -> None:
    written = gateway_ls(tmp_path, "init")
    path = tmp_path / "xdg-config" / "gateway-ls" / "config.toml"
    assert written.returncode == 0 and f"wrote {path}" in written.stdout
    assert "then check it: gateway-ls doctor\n" in written.stdout
    assert parse_config_text(path.read_text(encoding="utf-8"), file=None).endpoints == ()


def test_bad_init_usage_exits_2(tmp_path: Path) -> None:
    path = str(tmp_path / "c.toml")
    unknown = gateway_ls(tmp_path, "init", "--provider", "nope", "--config", path)
    assert unknown.returncode == 2 and "invalid choice" in unknown.stderr
    twice = gateway_ls(
        tmp_path, "init", "--provider", "mistral", "--provider", "mistral", "--config", path
    )
    assert twice.returncode == 2 and "each --provider once" in twice.stderr
    stray = gateway_ls(tmp_path, "init", "--base-url", "openai=http://x", "--config", path)
    assert stray.returncode == 2 and "KIND=URL" in stray.stderr
    assert not Path(path).exists()


@pytest.mark.unit
def test_every_provider_and_all_together_make_a_valid_configuration() -> None:
    kinds = list(STARTING_ENDPOINTS)
    config = parse_config_text(starting_configuration(kinds, "auto", {}), file=None)
    assert [e.kind for e in config.endpoints] == kinds
    keyed = {e.kind: e.api_key_env for e in config.endpoints if e.api_key_env}
    assert set(keyed) == set(kinds) - {"ollama", "llamacpp"}  # the two that run without a key
    assert keyed["anthropic"] == "ANTHROPIC_API_KEY"
