"""`[gateway.default_limits]`, `[gateway.clients.NAME]` and the settings around them: absent
keys mean no limit, bad values are errors naming file, line and key, and editors never set them."""

from __future__ import annotations

from typing import Any

import pytest

from lsp_server.config.loader import ConfigError, merge_overrides, parse_config_text
from lsp_server.config.model import Limits

pytestmark = pytest.mark.unit

TEAM = """\
[gateway]
budget_when_state_down = "open"
metrics_public = true

[gateway.default_limits]
rpm = 600
tpm = 2_000_000

[gateway.clients.CI_TOKEN]
rpm = 60
tpm = 200_000
max_concurrent = 4
budget_usd = 20
budget_period = "month"
"""


def test_limits_load_per_client_with_defaults_for_the_rest() -> None:
    gateway = parse_config_text(TEAM, file="config.toml").gateway
    assert gateway.limits_of("CI_TOKEN") == Limits(60, 200_000, 4, 20.0, "month")
    assert gateway.limits_of("ALICE_TOKEN") == Limits(rpm=600, tpm=2_000_000)
    assert gateway.budget_when_state_down == "open" and gateway.metrics_public


def test_absent_keys_mean_no_limit() -> None:
    gateway = parse_config_text("", file="config.toml").gateway
    assert gateway.limits_of("anyone") == Limits(None, None, None, None, "day")
    assert gateway.budget_when_state_down == "closed" and not gateway.metrics_public


@pytest.mark.parametrize(
    ("line", "key", "message"),
    [
        ("rpm = 0", "gateway.clients.CI_TOKEN.rpm", "must be greater than 0"),
        ('rpm = "60"', "gateway.clients.CI_TOKEN.rpm", "expected an integer"),
        ("tpm = 1.5", "gateway.clients.CI_TOKEN.tpm", "expected an integer"),
        (
            "max_concurrent = -1",
            "gateway.clients.CI_TOKEN.max_concurrent",
            "must be greater than 0",
        ),
        ("budget_usd = -5", "gateway.clients.CI_TOKEN.budget_usd", "must not be negative"),
        ('budget_period = "week"', "gateway.clients.CI_TOKEN.budget_period", '"day", "month"'),
        ("rmp = 60", "gateway.clients.CI_TOKEN.rmp", 'did you mean "rpm"'),
    ],
)
def test_a_bad_limit_names_file_line_and_key(line: str, key: str, message: str) -> None:
    text = f"[gateway]\nport = 11435\n\n[gateway.clients.CI_TOKEN]\nrpm = 10\n{line}\n"
    if line.startswith("rpm"):
        text = text.replace("rpm = 10\n", "")
    with pytest.raises(ConfigError) as caught:
        parse_config_text(text, file="team.toml")
    problem = caught.value
    assert (problem.file, problem.key) == ("team.toml", key)
    assert problem.line == text.splitlines().index(line) + 1
    assert message in problem.message


def test_default_limits_are_checked_too() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config_text("[gateway.default_limits]\nrpm = 0\n", file="c.toml")
    assert (caught.value.key, caught.value.line) == ("gateway.default_limits.rpm", 2)


def test_a_client_name_must_be_a_token_name() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config_text('[gateway.clients."not a name"]\nrpm = 1\n', file="c.toml")
    assert caught.value.key == "gateway.clients.not a name"
    assert "token variable" in caught.value.message


@pytest.mark.parametrize(
    "settings",
    [
        {"gateway": {"clients": {"ME": {"rpm": 100000}}}},
        {"gateway": {"default_limits": {"budget_usd": 1000}}},
        {"gateway": {"metrics_public": True}},
    ],
)
def test_editor_settings_never_set_limits(settings: dict[str, Any]) -> None:
    base = parse_config_text(TEAM, file="config.toml")
    with pytest.raises(ConfigError) as caught:
        merge_overrides(base, settings, origin="editor settings")
    assert "only from the config file" in caught.value.message


def test_editor_settings_keep_the_file_limits() -> None:
    base = parse_config_text(TEAM, file="config.toml")
    merged = merge_overrides(base, {"routing": {"hedge_after_ms": 100}}, origin="editor")
    assert merged.gateway == base.gateway
