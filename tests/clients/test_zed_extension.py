"""The Zed extension: manifest, crate, settings snippets, and the server command it launches.

The Rust side cannot be built here, so its contract (ids, command line, settings key) is read from
the source text and checked against the manifest, the package and the real server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import sys
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_server.config.model import Config, GatewayConfig

REPO = Path(__file__).resolve().parents[2]
ZED = REPO / "clients" / "zed"
SNIPPETS = ZED / "snippets"

# The gateway routes the README lists for OpenAI-compatible clients that post completions.
GATEWAY_POST_PATHS = {"/v1/completions", "/v1/chat/completions"}
# Zed's `edit_predictions.open_ai_compatible_api` keys and `prompt_format` values.
ZED_OPENAI_COMPATIBLE_KEYS = {"api_url", "model", "prompt_format", "max_output_tokens"}
ZED_PROMPT_FORMATS = {
    "infer",
    "zeta",
    "zeta2",
    "code_llama",
    "star_coder",
    "deepseek_coder",
    "qwen",
    "code_gemma",
    "codestral",
    "glm",
}
HANDSHAKE_TIMEOUT_S = 60


def rust_str_const(source: str, name: str) -> str:
    match = re.search(rf'const {name}: &str = "([^"]*)";', source)
    assert match, f"lib.rs has no string constant {name}"
    return match.group(1)


def rust_str_slice_const(source: str, name: str) -> list[str]:
    match = re.search(rf"const {name}: &\[&str\] = &\[([^\]]*)\];", source)
    assert match, f"lib.rs has no string-slice constant {name}"
    return re.findall(r'"([^"]*)"', match.group(1))


def rust_joined_str_const(source: str, name: str) -> str:
    """A string constant that may be continued over lines with a trailing backslash."""
    match = re.search(rf'const {name}: &str = "((?:[^"\\]|\\.)*)";', source, re.DOTALL)
    assert match, f"lib.rs has no string constant {name}"
    return re.sub(r"\\\n\s*", "", match.group(1))


@pytest.fixture(scope="module")
def lib_rs() -> str:
    return (ZED / "src" / "lib.rs").read_text()


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    return tomllib.loads((ZED / "extension.toml").read_text())


def load_snippet(name: str) -> dict[str, Any]:
    snippet: dict[str, Any] = json.loads((SNIPPETS / name).read_text())
    return snippet


def test_manifest_declares_the_extension(manifest: dict[str, Any]) -> None:
    assert manifest["id"] == "gateway-ls"
    assert manifest["schema_version"] == 1
    for key in ("name", "version", "description", "repository"):
        assert manifest[key]
    assert manifest["authors"]


def test_manifest_language_server_is_the_one_lib_rs_configures(
    manifest: dict[str, Any], lib_rs: str
) -> None:
    servers = manifest["language_servers"]
    assert list(servers) == [rust_str_const(lib_rs, "LANGUAGE_SERVER_ID")]
    server = next(iter(servers.values()))
    assert server["name"]
    languages = server["languages"]
    assert len(languages) == len(set(languages))
    assert {"Python", "Rust", "Go", "TypeScript", "TSX", "JavaScript", "C", "C++"} <= set(languages)


def test_cargo_builds_a_cdylib_on_zed_extension_api() -> None:
    cargo = tomllib.loads((ZED / "Cargo.toml").read_text())
    assert cargo["lib"]["crate-type"] == ["cdylib"]
    assert re.fullmatch(r"0\.\d+\.\d+", cargo["dependencies"]["zed_extension_api"])


def test_lib_rs_launches_gateway_ls_serve(lib_rs: str) -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    binary = rust_str_const(lib_rs, "SERVER_BINARY")
    assert binary in project["scripts"]
    assert rust_str_slice_const(lib_rs, "SERVER_ARGS") == ["serve"]
    assert "worktree.which(SERVER_BINARY)" in lib_rs
    assert "zed::register_extension!" in lib_rs


def test_lib_rs_passes_settings_under_the_server_key(lib_rs: str) -> None:
    assert rust_str_const(lib_rs, "SETTINGS_KEY") == "gatewayLs"
    assert "fn language_server_initialization_options" in lib_rs
    assert "fn language_server_workspace_configuration" in lib_rs


def test_missing_server_error_says_how_to_install(lib_rs: str) -> None:
    message = rust_joined_str_const(lib_rs, "NOT_FOUND")
    assert "pipx install 'gateway-ls[local]'" in message
    assert "lsp.gateway-ls.binary.path" in message


def assert_known_config_keys(settings: dict[str, Any]) -> None:
    sections = {f.name: f for f in dataclasses.fields(Config) if f.name != "source"}
    defaults = Config()
    for section, values in settings.items():
        assert section in sections, f"unknown configuration section {section!r}"
        if isinstance(values, dict):
            known = {f.name for f in dataclasses.fields(getattr(defaults, section))}
            assert set(values) <= known, f"unknown keys in [{section}]: {set(values) - known}"


def test_lsp_snippet_configures_the_extensions_server(lib_rs: str) -> None:
    snippet = load_snippet("lsp-settings.json")
    server = snippet["lsp"][rust_str_const(lib_rs, "LANGUAGE_SERVER_ID")]
    arguments = server["binary"]["arguments"]
    assert arguments[0] == "serve"
    assert arguments[1:] in ([], ["--config", arguments[-1]])
    assert Path(server["binary"]["path"]).name == rust_str_const(lib_rs, "SERVER_BINARY")
    assert_known_config_keys(server["settings"])


def test_edit_predictions_snippet_points_at_the_gateway() -> None:
    snippet = load_snippet("edit-predictions.json")["edit_predictions"]
    assert snippet["provider"] == "open_ai_compatible_api"
    provider = snippet["open_ai_compatible_api"]
    assert set(provider) <= ZED_OPENAI_COMPATIBLE_KEYS
    assert provider["prompt_format"] in ZED_PROMPT_FORMATS
    assert provider["max_output_tokens"] > 0

    # Zed posts to `api_url` as given, so it is the route itself: base URL + route.
    url = urlsplit(provider["api_url"])
    gateway = GatewayConfig()
    assert (url.scheme, url.hostname, url.port) == ("http", gateway.host, gateway.port)
    assert gateway.port == 11435
    assert url.path.rsplit("/", 1)[0].endswith("/v1")
    assert url.path in GATEWAY_POST_PATHS


@pytest.mark.parametrize("snippet", sorted(p.name for p in SNIPPETS.glob("*.json")))
def test_readme_shows_each_snippet_verbatim(snippet: str) -> None:
    readme = (ZED / "README.md").read_text()
    blocks = re.findall(r"^```json\n(.*?)^```$", readme, re.DOTALL | re.MULTILINE)
    assert (SNIPPETS / snippet).read_text() in blocks


def installed_command(lib_rs: str) -> list[str]:
    """lib.rs's command line, with the binary resolved to this environment's install."""
    args = rust_str_slice_const(lib_rs, "SERVER_ARGS")
    script = Path(sys.executable).with_name(rust_str_const(lib_rs, "SERVER_BINARY"))
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-m", "lsp_server", *args]


async def test_the_command_line_starts_a_working_server(lib_rs: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GATEWAY_LS_CONFIG"}
    env["XDG_CONFIG_HOME"] = str(tmp_path)  # no user config file: defaults only
    client = await ClientServerConfig(
        server_command=installed_command(lib_rs), server_env=env
    ).start()
    assert isinstance(client, LanguageClient)
    try:
        # What the extension sends for `initialization_options: {"local": {"enabled": false}}`.
        params = types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            root_uri=tmp_path.as_uri(),
            initialization_options={"gatewayLs": {"local": {"enabled": False}}},
        )
        result = await asyncio.wait_for(client.initialize_session(params), HANDSHAKE_TIMEOUT_S)
        # Zed asks for suggestions through textDocument/completion.
        assert result.capabilities.completion_provider is not None
        await asyncio.wait_for(client.shutdown_session(), HANDSHAKE_TIMEOUT_S)
    finally:
        await client.stop()
