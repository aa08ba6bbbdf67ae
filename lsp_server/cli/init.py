"""`gateway-ls init`: a starting configuration, the first thing a new user needs.

One endpoint per provider asked for, with the roles it serves best, and the local model. A
provider's key is named as the environment variable that holds it, never written. An existing
file is never overwritten. The text is validated before it is written, so `doctor` reads what
`init` wrote.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lsp_server.cli.exit_codes import EXIT_FAILURE, EXIT_OK, UsageError
from lsp_server.config.loader import CONFIG_ENV_VAR, default_config_path, parse_config_text
from lsp_server.config.model import LOCAL_MODEL_AUTO, EndpointKind, Role
from lsp_server.config.providers import PRESETS


@dataclass(frozen=True, slots=True)
class StartingEndpoint:
    name: str
    model: str
    roles: tuple[Role, ...]
    base_url: str = ""  # where the kind has no default
    api_key_env: str = ""  # where the kind has no default variable
    fim: bool | None = None  # None: the kind's


# What each provider is best asked for, as a start: a fast FIM model for keystrokes, a
# reasoning model for refactors and agents.
STARTING_ENDPOINTS: dict[EndpointKind, StartingEndpoint] = {
    "inception": StartingEndpoint("mercury", "mercury-edit-2", ("inline", "edit")),
    "mistral": StartingEndpoint("codestral", "codestral-latest", ("inline",)),
    "deepseek": StartingEndpoint("deepseek", "deepseek-chat", ("inline",)),
    "anthropic": StartingEndpoint(
        "claude",
        "claude-opus-4-6",
        ("refactor", "agent"),
        base_url="https://api.anthropic.com",
        api_key_env="ANTHROPIC_API_KEY",
    ),
    "openai": StartingEndpoint(
        "openai",
        "gpt-5.1-codex",
        ("refactor", "agent"),
        base_url="https://api.openai.com/v1",
        api_key_env="OPENAI_API_KEY",
        fim=False,
    ),
    "ollama": StartingEndpoint("ollama", "qwen2.5-coder:1.5b", ("inline",)),
    "llamacpp": StartingEndpoint("llama-server", "llama-server", ("inline",)),
}


def _string(value: str) -> str:
    return json.dumps(value)  # a TOML basic string


def _endpoint_text(kind: EndpointKind, base_url: str | None) -> str:
    start, preset = STARTING_ENDPOINTS[kind], PRESETS[kind]
    lines = [
        "[[endpoints]]",
        f"name = {_string(start.name)}",
        f"kind = {_string(kind)}",
        f"model = {_string(start.model)}",
        f"roles = [{', '.join(_string(role) for role in start.roles)}]",
    ]
    url = base_url or start.base_url
    if url:
        lines.append(f"base_url = {_string(url)}")
    variable = start.api_key_env or preset.api_key_env
    if variable:
        lines.append(
            f"api_key_env = {_string(variable)}  # export it; the key is never written here"
        )
    if start.fim is not None:
        lines.append(f"fim = {'true' if start.fim else 'false'}")
    return "\n".join(lines) + "\n"


def starting_configuration(
    kinds: Sequence[EndpointKind], local: str, base_urls: Mapping[str, str]
) -> str:
    parts = [
        "# gateway-ls configuration, written by `gateway-ls init`. Every key is in the\n"
        "# documentation's configuration reference; check it with `gateway-ls doctor`.\n\n",
        f"[local]\nmodel = {_string(local)}\n",
    ]
    parts += [f"\n{_endpoint_text(kind, base_urls.get(kind))}" for kind in kinds]
    text = "".join(parts)
    parse_config_text(text, file=None)  # what init writes, doctor accepts
    return text


def init_target(cli_path: str | None) -> Path:
    """Where the server will look first: `--config PATH`, `$GATEWAY_LS_CONFIG`, the user's."""
    if cli_path:
        return Path(cli_path).expanduser()
    env_path = os.environ.get(CONFIG_ENV_VAR)
    return Path(env_path).expanduser() if env_path else default_config_path()


def parse_base_urls(items: Sequence[str], kinds: Sequence[str]) -> dict[str, str]:
    urls: dict[str, str] = {}
    for item in items:
        kind, sep, url = item.partition("=")
        if not sep or kind not in kinds:
            raise UsageError(
                f"--base-url takes KIND=URL for a kind given with --provider, got {item!r}"
            )
        urls[kind] = url
    return urls


def write_starting_configuration(
    path: Path, kinds: Sequence[EndpointKind], local: str | None, base_urls: Sequence[str]
) -> int:
    if len(set(kinds)) != len(kinds):
        raise UsageError("each --provider once")
    text = starting_configuration(
        kinds, local or LOCAL_MODEL_AUTO, parse_base_urls(base_urls, kinds)
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("x", encoding="utf-8") as file:  # never over an existing file
            file.write(text)
    except FileExistsError:
        print(
            f"gateway-ls init: {path} already exists; it was left as it is "
            "(edit it, or give --config another path)",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    except OSError as error:
        print(f"gateway-ls init: cannot write {path}: {error.strerror or error}", file=sys.stderr)
        return EXIT_FAILURE
    print(f"wrote {path}")
    variables = [
        v
        for kind in kinds
        if (v := STARTING_ENDPOINTS[kind].api_key_env or PRESETS[kind].api_key_env)
    ]
    if variables:
        print("set the keys in the environment the server starts in: " + ", ".join(variables))
    found_without_flag = path == init_target(None)
    print("then check it: gateway-ls doctor" + ("" if found_without_flag else f" --config {path}"))
    return EXIT_OK
