"""Loading, validating and merging the configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from lsp_server.config.loader import (
    OLLAMA_DEFAULT_BASE_URL,
    ConfigError,
    config_to_dict,
    find_config_file,
    load_config_file,
    merge_overrides,
    missing_api_keys,
    parse_config_text,
)
from lsp_server.config.model import Config, EndpointConfig, LocalConfig, Price, RoutingConfig

pytestmark = pytest.mark.unit

README_EXAMPLE = """\
[routing]
inline_deadline_ms = 350      # budget for one keystroke-level request, end to end
hedge_after_ms = 120          # no first token by then: also ask the next-best endpoint
offline = "auto"              # "auto" (detect), "always" (never leave the machine), "never"
sensitive_globs = ["**/.env", "**/.env.*", "**/*.pem", "**/*.key", "**/secrets/**"]
redact_secrets = true         # secrets found in a prompt force the local model

[local]
model_path = ""               # a .gguf; empty: the bundled default model
n_ctx = 4096
n_threads = 0                 # 0: all cores
enabled = true

[[endpoints]]
name = "mercury"
kind = "openai"               # "openai" (any OpenAI-compatible API) | "anthropic" | "ollama"
base_url = "https://api.inceptionlabs.ai/v1"
model = "mercury-2"
api_key_env = "INCEPTION_API_KEY"   # the key is read from this variable
roles = ["inline"]            # "inline" | "refactor" (one endpoint may have both)
fim = true                    # true: /v1/completions with prompt+suffix
max_tokens = 64
timeout_ms = 2000
price_per_mtok = { input = 0.25, output = 0.75 }

[[endpoints]]
name = "claude"
kind = "anthropic"
base_url = "https://api.anthropic.com"
model = "claude-opus-4-6"
api_key_env = "ANTHROPIC_API_KEY"
roles = ["refactor"]
"""

ENDPOINT = """\
[[endpoints]]
name = "{name}"
kind = "openai"
base_url = "http://127.0.0.1:8000/v1"
model = "m"
"""


def parse_error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_config_text(text, file="config.toml")
    return caught.value


def test_design_example_loads_exactly(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(README_EXAMPLE)

    config = load_config_file(path)

    assert config.source == path
    assert config.routing == RoutingConfig(
        inline_deadline_ms=350,
        hedge_after_ms=120,
        offline="auto",
        sensitive_globs=("**/.env", "**/.env.*", "**/*.pem", "**/*.key", "**/secrets/**"),
        redact_secrets=True,
    )
    assert config.local == LocalConfig(model_path="", n_ctx=4096, n_threads=0, enabled=True)
    assert config.endpoints == (
        EndpointConfig(
            name="mercury",
            kind="openai",
            base_url="https://api.inceptionlabs.ai/v1",
            model="mercury-2",
            api_key_env="INCEPTION_API_KEY",
            roles=("inline",),
            fim=True,
            max_tokens=64,
            timeout_ms=2000,
            price_per_mtok=Price(input=0.25, output=0.75),
        ),
        EndpointConfig(
            name="claude",
            kind="anthropic",
            base_url="https://api.anthropic.com",
            model="claude-opus-4-6",
            api_key_env="ANTHROPIC_API_KEY",
            roles=("refactor",),
            fim=False,
            max_tokens=4096,  # the default of an endpoint without the inline role
        ),
    )


def test_empty_text_gives_defaults() -> None:
    assert parse_config_text("", file="config.toml") == Config()


def test_explicit_path_must_exist(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.toml")
    with pytest.raises(ConfigError) as caught:
        find_config_file(missing)
    assert caught.value.file == missing
    assert "no such file" in str(caught.value)


def test_env_path_must_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_LS_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match="GATEWAY_LS_CONFIG"):
        find_config_file(None)


def test_lookup_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("GATEWAY_LS_CONFIG", raising=False)
    default = tmp_path / "xdg" / "gateway-ls" / "config.toml"
    default.parent.mkdir(parents=True)
    default.write_text("")
    from_env = tmp_path / "env.toml"
    from_env.write_text("")
    from_cli = tmp_path / "cli.toml"
    from_cli.write_text("")

    assert find_config_file(None) == default
    monkeypatch.setenv("GATEWAY_LS_CONFIG", str(from_env))
    assert find_config_file(None) == from_env
    assert find_config_file(str(from_cli)) == from_cli


def test_no_file_anywhere_is_valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("GATEWAY_LS_CONFIG", raising=False)
    assert find_config_file(None) is None


def test_invalid_toml_names_the_line() -> None:
    error = parse_error('[routing]\ninline_deadline_ms = 350\noffline = "auto\n')
    assert error.line == 3
    assert error.file == "config.toml"
    assert str(error).startswith("config.toml:3: invalid TOML")


def test_unknown_key_has_line_and_suggestion() -> None:
    error = parse_error(ENDPOINT.format(name="a") + "timout_ms = 100\n")
    assert (error.line, error.key) == (6, "endpoints[0].timout_ms")
    assert 'did you mean "timeout_ms"' in error.message


def test_unknown_section() -> None:
    error = parse_error("[routng]\noffline = 'always'\n")
    assert (error.line, error.key) == (1, "routng")
    assert 'did you mean "routing"' in error.message


def test_wrong_type_message_format() -> None:
    text = ENDPOINT.format(name="a") + ENDPOINT.format(name="b") + 'timeout_ms = "fast"\n'
    error = parse_error(text)
    assert str(error) == 'config.toml:11: endpoints[1].timeout_ms: expected an integer, got "fast"'


def test_bool_is_not_an_integer() -> None:
    error = parse_error("[local]\nn_ctx = true\n")
    assert (error.line, error.key) == (2, "local.n_ctx")
    assert "expected an integer, got true" in error.message


def test_bad_enum() -> None:
    error = parse_error('[routing]\n\noffline = "sometimes"\n')
    assert (error.line, error.key) == (3, "routing.offline")
    assert '"auto", "always", "never"' in error.message


def test_bad_kind_and_role() -> None:
    error = parse_error(ENDPOINT.format(name="a").replace('"openai"', '"gemini"'))
    assert (error.line, error.key) == (3, "endpoints[0].kind")
    error = parse_error(ENDPOINT.format(name="a") + 'roles = ["inline", "chat"]\n')
    assert (error.line, error.key) == (6, "endpoints[0].roles[1]")


def test_value_in_inline_table_is_located() -> None:
    text = ENDPOINT.format(name="a") + 'price_per_mtok = { input = 1, output = "x" }\n'
    error = parse_error(text)
    assert (error.line, error.key) == (6, "endpoints[0].price_per_mtok.output")


def test_ranges() -> None:
    assert parse_error("[routing]\ninline_deadline_ms = 0\n").key == "routing.inline_deadline_ms"
    error = parse_error("[routing]\ninline_deadline_ms = 100\nhedge_after_ms = 100\n")
    assert (error.line, error.key) == (3, "routing.hedge_after_ms")
    error = parse_error(ENDPOINT.format(name="a").replace("http://127.0.0.1:8000", "ftp://x"))
    assert (error.line, error.key) == (4, "endpoints[0].base_url")


def test_duplicate_endpoint_name() -> None:
    error = parse_error(ENDPOINT.format(name="a") + "\n" + ENDPOINT.format(name="a"))
    assert (error.line, error.key) == (8, "endpoints[1].name")
    assert "duplicate" in error.message


def test_missing_required_key_points_at_the_table() -> None:
    text = "[routing]\n\n" + ENDPOINT.format(name="a").replace('model = "m"\n', "")
    error = parse_error(text)
    assert (error.line, error.key) == (3, "endpoints[0].model")
    assert "missing required key" in error.message


def test_ollama_defaults() -> None:
    config = parse_config_text(
        '[[endpoints]]\nname = "o"\nkind = "ollama"\nmodel = "qwen2.5-coder"\n', file=None
    )
    assert config.endpoints[0].base_url == OLLAMA_DEFAULT_BASE_URL
    assert config.endpoints[0].fim is False


@pytest.mark.parametrize(
    "line",
    [
        'api_key = "abc"',
        'base_url = "https://api.example.com/v1?k=sk-abcdefghijklmnopqrstuvwx"',
        'api_key_env = "sk-abcdefghijklmnopqrstuvwx"',
        'base_url = "https://user:secret@api.example.com/v1"',
    ],
)
def test_literal_api_key_is_refused_without_echo(line: str) -> None:
    text = ENDPOINT.format(name="a").replace('base_url = "http://127.0.0.1:8000/v1"\n', "")
    error = parse_error(text + line + "\n")
    assert error.line == 5
    assert "api_key_env" in error.message
    assert "abcdefgh" not in str(error)
    assert "secret@" not in str(error)


def test_missing_api_key_variable_loads_and_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GATEWAY_LS_TEST_KEY", raising=False)
    monkeypatch.setenv("GATEWAY_LS_TEST_PRESENT", "value")
    text = (
        ENDPOINT.format(name="a")
        + 'api_key_env = "GATEWAY_LS_TEST_KEY"\n'
        + ENDPOINT.format(name="b")
        + 'api_key_env = "GATEWAY_LS_TEST_PRESENT"\n'
        + ENDPOINT.format(name="c")
    )
    config = parse_config_text(text, file=None)
    assert missing_api_keys(config) == [("a", "GATEWAY_LS_TEST_KEY")]


def test_config_to_dict_holds_variable_names_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INCEPTION_API_KEY", "the-actual-key-value")
    config = parse_config_text(README_EXAMPLE, file=None)
    as_dict = config_to_dict(config)
    assert as_dict["endpoints"][0]["api_key_env"] == "INCEPTION_API_KEY"
    assert as_dict["endpoints"][0]["price_per_mtok"] == {"input": 0.25, "output": 0.75}
    assert "the-actual-key-value" not in repr(as_dict)


def test_relative_model_path_is_relative_to_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[local]\nmodel_path = "models/tiny.gguf"\n')
    assert load_config_file(path).local.model_path == str(tmp_path / "models" / "tiny.gguf")


def test_overrides_merge_section_by_section() -> None:
    base = parse_config_text(README_EXAMPLE, file=None)
    overrides = {
        "routing": {"offline": "always", "hedge_after_ms": None},
        "local": {"n_threads": 2},
    }
    merged = merge_overrides(base, overrides, origin="initializationOptions")
    assert merged.routing.offline == "always"
    assert merged.routing.hedge_after_ms == 120
    assert merged.routing.inline_deadline_ms == 350
    assert merged.local.n_threads == 2
    assert merged.local.n_ctx == 4096
    assert merged.endpoints == base.endpoints
    assert merge_overrides(base, {}, origin="initializationOptions") == base


def test_invalid_override_names_origin_and_key() -> None:
    base = Config()
    with pytest.raises(ConfigError) as caught:
        merge_overrides(base, {"routing": {"offline": "maybe"}}, origin="initializationOptions")
    error = caught.value
    assert (error.file, error.line, error.key) == ("initializationOptions", None, "routing.offline")
    assert str(error).startswith("initializationOptions: routing.offline: expected one of")

    with pytest.raises(ConfigError) as caught:
        merge_overrides(
            base,
            {"endpoints": [{"name": "x", "kind": "openai", "model": "m", "base_url": 3}]},
            origin="workspace/didChangeConfiguration",
        )
    assert caught.value.key == "endpoints"
    assert "only from the config file" in str(caught.value)

    with pytest.raises(ConfigError, match="did you mean"):
        merge_overrides(base, {"locl": {}}, origin="initializationOptions")


def test_agent_role_chat_cap_and_tool_call_hedging() -> None:
    text = (
        "[routing]\nhedge_tool_calls = true\n"
        + ENDPOINT.format(name="a")
        + 'roles = ["agent"]\nchat_max_tokens = 32000\n'
    )
    config = parse_config_text(text, file="config.toml")
    assert config.routing.hedge_tool_calls is True
    (endpoint,) = config.endpoints
    assert endpoint.roles == ("agent",)
    assert endpoint.chat_max_tokens == 32000
    default = parse_config_text(ENDPOINT.format(name="a"), file="config.toml")
    assert default.routing.hedge_tool_calls is False
    assert default.endpoints[0].chat_max_tokens == 8192
    error = parse_error(ENDPOINT.format(name="a") + "chat_max_tokens = 0\n")
    assert (error.line, error.key) == (6, "endpoints[0].chat_max_tokens")


def test_a_local_model_preset_is_named_by_the_file() -> None:
    config = parse_config_text('[local]\nmodel = "qwen2.5-coder-0.5b"\n', file=None)
    assert config.local.model == "qwen2.5-coder-0.5b"


def test_an_unknown_local_model_preset_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"local\.model.*qwen2\.5-coder-0\.5b") as error:
        parse_config_text('[local]\nmodel = "qwen2.5-coder-70b"\n', file="config.toml")
    assert error.value.line == 2


def test_a_preset_and_a_model_path_together_are_refused() -> None:
    with pytest.raises(ConfigError, match="not both"):
        parse_config_text(
            '[local]\nmodel = "gemma-3-270m"\nmodel_path = "x.gguf"\n', file="config.toml"
        )
