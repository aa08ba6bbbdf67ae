"""The `[gateway]` section: client tokens (one variable, several, a token file) and shared state."""

from __future__ import annotations

from pathlib import Path

import pytest

from lsp_server.config.loader import ConfigError, load_config_file, parse_config_text
from lsp_server.config.model import GatewayConfig

pytestmark = pytest.mark.unit


def gateway(text: str) -> GatewayConfig:
    return parse_config_text("[gateway]\n" + text, file="config.toml").gateway


def error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_config_text("[gateway]\n" + text, file="config.toml")
    return caught.value


def test_token_env_takes_one_name_or_several() -> None:
    assert gateway('token_env = "GATEWAY_TOKEN"\n').token_env == ("GATEWAY_TOKEN",)
    assert gateway('token_env = ["ALICE", "BOB"]\n').token_env == ("ALICE", "BOB")
    assert gateway('token_env = ""\n').token_env == ()
    assert gateway("").token_env == ()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('token_env = ["ALICE", "not a name"]', "name of an environment variable"),
        ('token_env = ["ALICE", ""]', "must not be empty"),
        ("token_env = 3", "expected an array"),
    ],
)
def test_token_env_names_must_be_variables(line: str, message: str) -> None:
    problem = error(line + "\n")
    assert problem.line == 2 and problem.key == "gateway.token_env"
    assert message in problem.message


def test_a_relative_token_file_is_relative_to_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[gateway]\ntoken_file = "tokens"\n')
    assert load_config_file(path).gateway.token_file == str(tmp_path / "tokens")


@pytest.mark.parametrize(
    "url", ["redis://127.0.0.1:6379/0", "rediss://cache.internal:6380/2", "redis://h", ""]
)
def test_state_urls_that_load(url: str) -> None:
    assert gateway(f'state_url = "{url}"\nstate_password_env = "REDIS_PASSWORD"\n').state_url == url


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1:6379", "expected a redis:// or rediss:// URL"),
        ("redis://", "expected a redis:// or rediss:// URL"),
        ("redis://h:6379/zero", "database after the host must be a number"),
        ("redis://h:99999/0", "expected a redis:// or rediss:// URL"),
    ],
)
def test_bad_state_urls_are_located(url: str, message: str) -> None:
    problem = error(f'state_url = "{url}"\n')
    assert (problem.file, problem.line, problem.key) == ("config.toml", 2, "gateway.state_url")
    assert message in problem.message


def test_a_password_in_the_state_url_is_refused_without_echo() -> None:
    problem = error('state_url = "redis://:hunter2-redis@cache:6379/0"\n')
    assert problem.key == "gateway.state_url"
    assert "state_password_env" in problem.message
    assert "hunter2" not in str(problem)


def test_state_password_env_must_name_a_variable() -> None:
    problem = error('state_password_env = "redis password"\n')
    assert problem.key == "gateway.state_password_env"


def test_a_literal_password_key_is_refused() -> None:
    problem = error('password = "hunter2"\n')
    assert problem.key == "gateway.password"
    assert "hunter2" not in str(problem)


def test_the_team_gateway_example_loads() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "team-gateway" / "config.toml"
    config = load_config_file(example)
    assert config.gateway.state_url.startswith("redis://")
    assert config.gateway.token_file == str(example.parent / "tokens")
    assert config.gateway.state_password_env == "REDIS_PASSWORD"
