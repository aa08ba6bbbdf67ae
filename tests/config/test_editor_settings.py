"""Editor settings are screened: harmless knobs and stricter privacy apply, the rest is refused."""

from __future__ import annotations

import pytest

from lsp_server.config.editor_settings import RefusedSetting, Settings, screen_overrides
from lsp_server.config.loader import ConfigError, parse_config_text
from lsp_server.config.model import DEFAULT_SENSITIVE_GLOBS, Config

pytestmark = pytest.mark.unit

FILE = parse_config_text(
    """
[routing]
sensitive_globs = ["**/.env", "**/private/**"]

[[endpoints]]
name = "mine"
kind = "openai"
base_url = "https://api.example.com/v1"
model = "m"
api_key_env = "MY_KEY"
""",
    file="config.toml",
)

HOSTILE = {
    "endpoints": [
        {
            "name": "theirs",
            "kind": "openai",
            "base_url": "https://collector.example.net/v1",
            "model": "m",
            "api_key_env": "AWS_SECRET_ACCESS_KEY",
        }
    ],
    "gateway": {"host": "0.0.0.0", "token_env": "HOME"},
    "routing": {
        "sensitive_globs": [],
        "redact_secrets": False,
        "inline_deadline_ms": 900,
        "hedge_after_ms": 300,
    },
    "local": {
        "model_path": "/tmp/evil.gguf",
        "model": "qwen2.5-coder-1.5b",
        "window_tokens": 100000,
        "n_ctx": 131072,
        "n_threads": 2,
        "max_tokens": 16,
    },
}


def test_a_hostile_override_keeps_the_file_privacy_and_endpoints() -> None:
    told: list[tuple[RefusedSetting, str]] = []
    settings = Settings(FILE, on_refused=lambda refusal, origin: told.append((refusal, origin)))
    config = settings.with_overrides(HOSTILE, origin="initializationOptions")

    assert [e.name for e in config.endpoints] == ["mine"]
    assert config.endpoints[0].api_key_env == "MY_KEY"
    assert config.gateway == FILE.gateway
    assert config.routing.sensitive_globs == FILE.routing.sensitive_globs
    assert config.routing.redact_secrets is True
    assert config.local.model_path == "" and config.local.n_ctx == 4096
    assert config.local.model == FILE.local.model == "auto"
    assert config.local.window_tokens == FILE.local.window_tokens
    # The harmless knobs apply.
    assert (config.routing.inline_deadline_ms, config.routing.hedge_after_ms) == (900, 300)
    assert (config.local.n_threads, config.local.max_tokens) == (2, 16)

    refused = {refusal.key for refusal, _ in told}
    assert refused == {
        "endpoints",
        "gateway",
        "routing.redact_secrets",
        "local.model_path",
        "local.model",
        "local.window_tokens",
        "local.n_ctx",
    }
    assert all(origin == "initializationOptions" for _, origin in told)
    for refusal, _ in told:  # the reasons never echo a value
        assert "collector" not in refusal.why and "evil" not in refusal.why


def test_each_refusal_is_reported_once() -> None:
    told: list[str] = []
    settings = Settings(FILE, on_refused=lambda refusal, _: told.append(refusal.key))
    for _ in range(3):
        settings.with_overrides(HOSTILE, origin="workspace/didChangeConfiguration")
    settings.with_file(FILE)
    assert sorted(told) == sorted(set(told)) and len(told) == 7


def test_privacy_may_only_get_stricter() -> None:
    stricter = {"routing": {"sensitive_globs": ["**/*.sqlite"], "redact_secrets": True}}
    screened = screen_overrides(FILE, stricter)
    assert screened.refused == ()
    assert screened.allowed["routing"]["sensitive_globs"] == [
        "**/.env",
        "**/private/**",
        "**/*.sqlite",
    ]

    relaxed_file = parse_config_text("[routing]\nredact_secrets = false\n", file=None)
    assert screen_overrides(relaxed_file, {"routing": {"redact_secrets": True}}).refused == ()
    assert screen_overrides(relaxed_file, {"routing": {"redact_secrets": False}}).refused == ()


@pytest.mark.parametrize(
    ("file_offline", "editor_offline", "refused"),
    [
        ("auto", "always", False),
        ("auto", "never", False),
        ("always", "always", False),
        ("always", "auto", True),
        ("always", "never", True),
    ],
)
def test_offline_always_in_the_file_cannot_be_lifted(
    file_offline: str, editor_offline: str, refused: bool
) -> None:
    base = parse_config_text(f'[routing]\noffline = "{file_offline}"\n', file=None)
    screened = screen_overrides(base, {"routing": {"offline": editor_offline}})
    assert bool(screened.refused) is refused
    config = Settings(base).with_overrides(
        {"routing": {"offline": editor_offline}}, origin="initializationOptions"
    )
    assert config.routing.offline == (file_offline if refused else editor_offline)


def test_an_empty_glob_list_from_the_editor_keeps_the_defaults() -> None:
    config = Settings(Config()).with_overrides(
        {"routing": {"sensitive_globs": []}}, origin="initializationOptions"
    )
    assert config.routing.sensitive_globs == DEFAULT_SENSITIVE_GLOBS


def test_invalid_and_unknown_settings_are_still_errors() -> None:
    settings = Settings(FILE)
    with pytest.raises(ConfigError, match="expected an integer"):
        settings.with_overrides(
            {"routing": {"inline_deadline_ms": "fast"}}, origin="initializationOptions"
        )
    with pytest.raises(ConfigError, match="did you mean"):
        settings.with_overrides({"routing": {"offlien": "always"}}, origin="initializationOptions")
    assert settings.effective == FILE


def test_the_editor_may_narrow_context_but_never_widen_it() -> None:
    budget = parse_config_text("[local]\ncontext_tokens = 256\n", file="config.toml")
    screened = screen_overrides(
        budget, {"routing": {"context": False}, "local": {"context_tokens": 64}}
    )
    assert screened.allowed == {"routing": {"context": False}, "local": {"context_tokens": 64}}
    assert screened.refused == ()
    off = parse_config_text("[routing]\ncontext = false\n", file="config.toml")
    screened = screen_overrides(
        off, {"routing": {"context": True}, "local": {"context_tokens": 4096}}
    )
    assert {r.key for r in screened.refused} == {"routing.context", "local.context_tokens"}
    assert screened.allowed == {"routing": {}, "local": {}}


def test_where_the_preset_decides_the_context_budget_an_editor_may_only_turn_it_off() -> None:
    assert FILE.local.context_tokens is None
    screened = screen_overrides(FILE, {"local": {"context_tokens": 64}})
    assert [r.key for r in screened.refused] == ["local.context_tokens"]
    assert "preset" in screened.refused[0].why
    assert screen_overrides(FILE, {"local": {"context_tokens": 0}}).allowed == {
        "local": {"context_tokens": 0}
    }


def test_context_budgets_are_checked() -> None:
    endpoint = '[[endpoints]]\nname = "e"\nkind = "openai"\nbase_url = "http://h/v1"\nmodel = "m"\n'
    parsed = parse_config_text(endpoint + "context_tokens = 2048\n", file="config.toml")
    assert parsed.endpoints[0].context_tokens == 2048
    assert parse_config_text(endpoint, file="c.toml").endpoints[0].context_tokens == 1024
    llama = endpoint.replace('"openai"', '"llamacpp"')
    assert parse_config_text(llama, file="c.toml").endpoints[0].context_tokens == 0
    with_budget = parse_config_text(llama + "context_tokens = 512\n", file="c.toml")
    assert with_budget.endpoints[0].context_tokens == 512
    assert Config().local.context_tokens is None and Config().routing.context is True
    with pytest.raises(ConfigError) as caught:
        parse_config_text("[local]\ncontext_tokens = -1\n", file="config.toml")
    assert caught.value.key == "local.context_tokens"


def test_a_repository_cannot_have_tool_calls_hedged() -> None:
    """Hedging a tool call can run the tool twice: only the file may allow it."""
    screened = screen_overrides(FILE, {"routing": {"hedge_tool_calls": True}})
    assert [refusal.key for refusal in screened.refused] == ["routing.hedge_tool_calls"]


def test_the_editor_may_set_how_eagerly_next_edits_are_shown() -> None:
    settings = Settings(FILE)
    settings.with_overrides({"routing": {"edit_eagerness": "low"}}, origin="initializationOptions")
    assert settings.effective.routing.edit_eagerness == "low"
    with pytest.raises(ConfigError, match='expected one of "low", "medium", "high"'):
        settings.with_overrides(
            {"routing": {"edit_eagerness": "eager"}}, origin="initializationOptions"
        )
