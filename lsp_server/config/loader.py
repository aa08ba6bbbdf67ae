"""Finding, reading and parsing the configuration, and merging editor overrides.

TOML syntax is tomllib's job. Everything after that is checked against the dataclasses in
`config` (`config/validation.py`), so a mistake is reported once, at load time, with the file,
line (`config/toml_positions.py`) and dotted key (`endpoints[1].timeout_ms`, indices counted from
0) instead of surfacing later as a confusing runtime failure. A relative `local.model_path` or
`gateway.token_file` in a file is taken relative to that file's directory; `~` is expanded.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import platformdirs

from lsp_server.config.checks import describe
from lsp_server.config.model import Config
from lsp_server.config.providers import PRESETS
from lsp_server.config.toml_positions import dotted, key_lines, line_of, split_toml_error
from lsp_server.config.validation import (
    FILE_ONLY_SECTIONS,
    SECTION_TYPES,
    Invalid,
    build_config,
    expect_table,
)

CONFIG_ENV_VAR = "GATEWAY_LS_CONFIG"
# A configuration is a few kilobytes; anything near this is not one.
MAX_CONFIG_BYTES = 1024 * 1024
APP_NAME = "gateway-ls"
OLLAMA_DEFAULT_BASE_URL = PRESETS["ollama"].base_url


class ConfigError(Exception):
    """A configuration problem, located as precisely as the source allows."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        key: str | None = None,
    ) -> None:
        super().__init__(message)
        self.file = file
        self.line = line
        self.key = key
        self.message = message

    def __str__(self) -> str:
        where = self.file or ""
        if self.file and self.line is not None:
            where = f"{self.file}:{self.line}"
        parts = [p for p in (where, self.key, self.message) if p]
        return ": ".join(parts)


def default_config_path() -> Path:
    return platformdirs.user_config_path(APP_NAME) / "config.toml"


def find_config_file(cli_path: str | None) -> Path | None:
    """`--config PATH`, then `$GATEWAY_LS_CONFIG`, then the user config dir; None if no file."""
    if cli_path:
        return _existing_file(cli_path, "given with --config")
    env_path = os.environ.get(CONFIG_ENV_VAR)
    if env_path:
        return _existing_file(env_path, f"named by ${CONFIG_ENV_VAR}")
    default = default_config_path()
    return default if default.is_file() else None


def _existing_file(path_text: str, how: str) -> Path:
    path = Path(path_text).expanduser()
    if path.is_dir():
        raise ConfigError(f"is a directory, not a config file ({how})", file=path_text)
    if not path.exists():
        raise ConfigError(f"no such file ({how})", file=path_text)
    return path


def load_config_file(path: Path) -> Config:
    return parse_config_file_text(read_config_text(path), path)


def read_config_text(path: Path) -> str:
    """The text of a config file: a regular file of at most `MAX_CONFIG_BYTES`.

    Opened without blocking and checked before reading, so a FIFO (which would wait for a
    writer) or a device such as /dev/zero (which never ends) is an error, not a hang.
    """
    file = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", file=file) from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(
                "cannot read: not a regular file (a directory, pipe or device)", file=file
            )
        data = os.read(fd, MAX_CONFIG_BYTES + 1)
        while len(data) <= MAX_CONFIG_BYTES and (more := os.read(fd, MAX_CONFIG_BYTES + 1)):
            data += more
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", file=file) from exc
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"larger than {MAX_CONFIG_BYTES // 1024} KB: not a config", file=file)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError("not valid UTF-8 text", file=file) from exc


def parse_config_file_text(text: str, path: Path) -> Config:
    """`text`, read from `path`: parsed, with paths in it taken relative to the file."""
    config = parse_config_text(text, file=str(path))
    local, gateway = config.local, config.gateway
    if local.model_path:
        local = dataclasses.replace(local, model_path=_beside(path, local.model_path))
    if gateway.token_file:
        gateway = dataclasses.replace(gateway, token_file=_beside(path, gateway.token_file))
    return dataclasses.replace(config, local=local, gateway=gateway, source=path)


def _beside(config_path: Path, named: str) -> str:
    """A path written in the file: `~` expanded, a relative one taken from the file's directory."""
    resolved = Path(named).expanduser()
    if not resolved.is_absolute():
        resolved = config_path.parent / resolved
    return str(resolved)


def parse_config_text(text: str, *, file: str | None) -> Config:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message, line = split_toml_error(str(exc), text)
        raise ConfigError(f"invalid TOML: {message}", file=file, line=line) from exc
    lines = key_lines(text)
    try:
        return build_config(document)
    except Invalid as problem:
        raise ConfigError(
            problem.message, file=file, line=line_of(problem.path, lines), key=dotted(problem.path)
        ) from None


def merge_overrides(base: Config, overrides: Mapping[str, Any], *, origin: str) -> Config:
    """Editor settings (already screened, see `editor_settings`) over `base`, key by key.

    `null` values mean "not set" (editors send them for settings the user left at default).
    Endpoints and the gateway section never come from an editor.
    """
    if not isinstance(overrides, Mapping):
        raise ConfigError(f"expected an object, got {describe(overrides)}", file=origin)
    merged = _sections_dict(base)
    try:
        for section, value in _without_nulls(overrides).items():
            if section in FILE_ONLY_SECTIONS:
                raise Invalid((section,), "comes only from the config file")
            if section in SECTION_TYPES:
                merged[section] = {**merged[section], **expect_table(value, (section,))}
            else:  # refused as unknown below
                merged[section] = value
        config = build_config(merged)
    except Invalid as problem:
        raise ConfigError(problem.message, file=origin, key=dotted(problem.path)) from None
    return dataclasses.replace(config, source=base.source)


def missing_api_keys(config: Config) -> list[tuple[str, str]]:
    """(endpoint name, variable name) for each endpoint whose key variable is unset or empty."""
    return [
        (e.name, e.api_key_env)
        for e in config.endpoints
        if e.api_key_env and not os.environ.get(e.api_key_env)
    ]


def config_to_dict(config: Config) -> dict[str, Any]:
    """A JSON-ready view for status and doctor output; holds variable names, never key values."""
    return {"source": str(config.source) if config.source else None, **_sections_dict(config)}


def _sections_dict(config: Config) -> dict[str, Any]:
    def plain(value: Any) -> Any:
        if dataclasses.is_dataclass(value):
            fields = ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value))
            return {name: plain(v) for name, v in fields if v is not None}  # None: absent
        if isinstance(value, tuple):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    return {
        "routing": plain(config.routing),
        "local": plain(config.local),
        "endpoints": [plain(e) for e in config.endpoints],
        "gateway": plain(config.gateway),
    }


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value
