"""Bearer tokens per client: several `token_env` variables and a token file, counted per client.

Unit tests for reading the tokens; end to end, a gateway process with three clients, called with
the official `openai` client, whose status (and `gateway-ls stats --url`) counts each client's
requests and the refused ones.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from lsp_server.config.loader import ConfigError
from lsp_server.config.model import GatewayConfig
from lsp_server.gateway.client_tokens import ClientTokens, load_client_tokens, read_token_file
from tests.support.gateway_process import running_gateway
from tests.support.lsp_session import endpoint_toml, server_env

ALICE = "alice-" + "t0k3n-7Hq2"
BOB = "bob-" + "t0k3n-Xp91"
CAROL = "carol-" + "t0k3n-Lm55"


def token_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tokens"
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_identify_names_the_client_and_refuses_near_misses() -> None:
    clients = ClientTokens([("ALICE_TOKEN", ALICE), ("bob", BOB)])
    assert clients.identify(ALICE.encode()) == "ALICE_TOKEN"
    assert clients.identify(BOB.encode()) == "bob"
    for wrong in (b"", ALICE[:-1].encode(), (ALICE + "x").encode(), BOB.upper().encode()):
        assert clients.identify(wrong) is None
    assert not ClientTokens([])


def test_tokens_come_from_each_variable_and_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("ALICE_TOKEN", ALICE)
    monkeypatch.setenv("BOB_TOKEN", BOB)
    monkeypatch.delenv("NOBODY_TOKEN", raising=False)
    path = token_file(tmp_path, f"# team tokens\ncarol {CAROL}  # laptop\n\n")
    config = GatewayConfig(
        token_env=("ALICE_TOKEN", "BOB_TOKEN", "NOBODY_TOKEN"), token_file=str(path)
    )
    with caplog.at_level(logging.WARNING):
        clients = load_client_tokens(config, source=None)
    assert clients.names == ("ALICE_TOKEN", "BOB_TOKEN", "carol")
    assert clients.identify(CAROL.encode()) == "carol"
    assert "NOBODY_TOKEN" in caplog.text
    for token in (ALICE, BOB, CAROL):
        assert token not in caplog.text


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (f"carol {CAROL}\nbob\n", 2),
        (f"carol {CAROL} extra\n", 1),
        (f"carol/laptop {CAROL}\n", 1),
    ],
)
def test_a_bad_token_file_line_is_located_without_echo(
    tmp_path: Path, text: str, line: int
) -> None:
    path = token_file(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        read_token_file(path, config_source=None)
    assert (caught.value.file, caught.value.line) == (str(path), line)
    assert CAROL not in str(caught.value)


def test_token_file_problems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="names no client"):
        read_token_file(token_file(tmp_path, "# nobody yet\n"), config_source=None)
    with pytest.raises(ConfigError, match="cannot read") as caught:
        load_client_tokens(GatewayConfig(token_file=str(tmp_path / "missing")), source=None)
    assert caught.value.key == "gateway.token_file"
    monkeypatch.setenv("ALICE_TOKEN", ALICE)
    same = token_file(tmp_path, f"alice-laptop {ALICE}\n")
    with pytest.raises(ConfigError, match="same token") as caught:
        load_client_tokens(
            GatewayConfig(token_env=("ALICE_TOKEN",), token_file=str(same)), source=None
        )
    assert ALICE not in str(caught.value)


def test_a_token_file_others_can_read_is_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = token_file(tmp_path, f"carol {CAROL}\n")
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING):
        read_token_file(path, config_source=None)
    assert "chmod 600" in caplog.text


def test_a_team_gateway_counts_requests_per_client(tmp_path: Path) -> None:
    path = token_file(tmp_path, f"carol {CAROL}\n")
    config = (
        '[gateway]\ntoken_env = ["ALICE_TOKEN", "BOB_TOKEN"]\n'
        f'token_file = "{path.name}"\n'
        "[local]\nenabled = false\n"
    )
    env = {"ALICE_TOKEN": ALICE, "BOB_TOKEN": BOB}
    with (
        FakeLLMServer(Behaviour(text="return a + b\n"), name="fast") as fast,
        running_gateway(tmp_path, config + endpoint_toml("fast", fast.base_url), env=env) as gw,
    ):
        sent = {ALICE: 3, BOB: 1, CAROL: 2}
        for token, count in sent.items():
            client = gw.client(api_key=token)
            for _ in range(count):
                client.completions.create(model="gateway-ls", prompt="def f():\n    ", max_tokens=8)
        with pytest.raises(openai.AuthenticationError):
            gw.client(api_key="not-a-token").completions.create(model="gateway-ls", prompt="x")
        status = httpx.get(
            f"{gw.base_url}/gateway-ls/status", headers={"Authorization": f"Bearer {BOB}"}
        ).json()
        counts = {c["name"]: c["requests"] for c in status["clients"]}
        assert counts == {"ALICE_TOKEN": 3, "BOB_TOKEN": 1, "carol": 2}
        assert status["refused"] == 1
        assert len(fast.requests) == 6
        printed = subprocess.run(
            [sys.executable, "-m", "lsp_server", "stats", "--url", gw.root_url,
             "--token-env", "CAROL_TOKEN"],
            capture_output=True, text=True, timeout=30,
            env=server_env(tmp_path, {"CAROL_TOKEN": CAROL}),
        )  # fmt: skip
        assert printed.returncode == 0, printed.stderr
        assert "carol" in printed.stdout and "ALICE_TOKEN" in printed.stdout
        for token in sent:
            assert token not in printed.stdout + gw.log()


def test_a_bad_token_file_stops_the_gateway_with_exit_2(tmp_path: Path) -> None:
    path = token_file(tmp_path, f"carol {CAROL} extra\n")
    config_path = tmp_path / "config.toml"
    config_path.write_text(f'[gateway]\ntoken_file = "{path}"\n[local]\nenabled = false\n')
    result = subprocess.run(
        [sys.executable, "-m", "lsp_server", "gateway", "--config", str(config_path)],
        capture_output=True,
        text=True,
        timeout=30,
        env=server_env(tmp_path),
    )
    assert result.returncode == 2
    assert f"{path}:1" in result.stderr
    assert CAROL not in result.stderr
    assert os.stat(path).st_mode & 0o077 == 0
