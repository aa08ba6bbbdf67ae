"""The checks a configuration value must pass beyond its type, each with its range in words.

`config.model` names one on each field that needs it (`key(check=...)`); the validator applies
it and the configuration reference prints its range.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from lsp_server.config.keys import Check

_ENV_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
STATE_URL_SCHEMES = ("redis", "rediss")
# More context than this is not context for a keystroke: it is a second file.
MAX_CONTEXT_TOKENS = 32_768


def describe(value: Any) -> str:
    """A value as an error message shows it: short, and a string in quotes."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f'"{shown}"'
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list | tuple):
        return "an array"
    return type(value).__name__


def _positive(value: int | float) -> str | None:
    return None if value > 0 else f"must be greater than 0, got {value}"


def _not_negative(value: int | float) -> str | None:
    return None if value >= 0 else f"must not be negative, got {value}"


def _context_tokens(value: int) -> str | None:
    if 0 <= value <= MAX_CONTEXT_TOKENS:
        return None
    return f"must be between 0 (no context) and {MAX_CONTEXT_TOKENS}, got {value}"


def _ratio(value: float) -> str | None:
    return None if 0 <= value <= 1 else f"must be between 0 and 1, got {value}"


def _port(value: int) -> str | None:
    return None if 0 <= value <= 65535 else f"must be a port number (0-65535), got {value}"


def _non_empty(value: str) -> str | None:
    return None if value.strip() else "must not be empty"


def _non_empty_items(values: tuple[str, ...]) -> str | None:
    return "must not contain empty strings" if any(not v.strip() for v in values) else None


def _env_var_name(value: str) -> str | None:
    if not value or _ENV_VAR_NAME.fullmatch(value):
        return None
    return "must be the name of an environment variable (letters, digits, underscores)"


def _env_var_names(values: tuple[str, ...]) -> str | None:
    return next((problem for v in values if (problem := _env_var_name(v) or _non_empty(v))), None)


def _state_url(value: str) -> str | None:
    if not value:
        return None
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        parts, port = None, None
    schemes = " or ".join(f"{s}://" for s in STATE_URL_SCHEMES)
    if parts is None or parts.scheme not in STATE_URL_SCHEMES or not parts.hostname:
        return f"expected a {schemes} URL (redis://host:6379/0), got {describe(value)}"
    database = parts.path.strip("/")
    if database and not database.isdigit():
        return f"the database after the host must be a number (redis://host:{port or 6379}/0)"
    return None


def _http_url(value: str) -> str | None:
    try:
        parts = urlsplit(value)
    except ValueError:
        parts = None
    if parts and parts.scheme in ("http", "https") and parts.hostname:
        return None
    return f"expected an http:// or https:// URL, got {describe(value)}"


def _url_path(value: str) -> str | None:
    if not value:
        return None
    if not value.startswith("/") or "://" in value or any(c in value for c in "?#\\ "):
        return f'expected a path under base_url such as "/fim/completions", got {describe(value)}'
    return None


def _roles(values: tuple[str, ...]) -> str | None:
    if not values:
        return 'must name at least one role ("inline", "edit", "refactor", "agent")'
    if len(set(values)) != len(values):
        return "lists a role twice"
    return None


POSITIVE = Check(_positive, "> 0")
NOT_NEGATIVE = Check(_not_negative, ">= 0")
CONTEXT_TOKENS = Check(_context_tokens, f"0 to {MAX_CONTEXT_TOKENS}")
RATIO = Check(_ratio, "0 to 1")
PORT = Check(_port, "0 to 65535")
NON_EMPTY = Check(_non_empty, "not empty")
NON_EMPTY_ITEMS = Check(_non_empty_items, "no empty strings")
ENV_VAR_NAME = Check(_env_var_name, "an environment variable's name, or empty")
ENV_VAR_NAMES = Check(_env_var_names, "environment variables' names")
STATE_URL = Check(_state_url, "redis:// or rediss:// URL, or empty")
HTTP_URL = Check(_http_url, "http:// or https:// URL")
URL_PATH = Check(_url_path, "a path under base_url, or empty")
ROLES = Check(_roles, "at least one, none twice")
