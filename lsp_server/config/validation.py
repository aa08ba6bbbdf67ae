"""Strict validation of a parsed configuration against the dataclasses in `config.model`.

Every problem is an `Invalid` carrying the dotted key path; the loader turns it into a
`ConfigError` with the file and line.

Defaults beyond the dataclasses come from the endpoint's kind (`config/providers.py`): its
`base_url` and key variable may be omitted where the kind has one (`ollama`, `inception`,
`mistral`, `deepseek`, `llamacpp`), `fim` follows the kind (`ollama`: false), and an `anthropic`
endpoint refuses `fim = true` (Anthropic has no fill-in-the-middle API), and `context_tokens`
follows the kind (`llamacpp`: 0). `gateway.token_env`
takes one variable name or an array of them. An endpoint without the `inline` role defaults to
`max_tokens = 4096` (a refactor answer), others to 64.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from lsp_server.config.model import (
    CHAT_MAX_TOKENS,
    LOCAL_MODEL_AUTO,
    LOCAL_MODEL_PRESETS,
    Config,
    EndpointConfig,
    GatewayConfig,
    Limits,
    LocalConfig,
    Price,
    RoutingConfig,
)
from lsp_server.config.model_names import RESERVED_ENDPOINT_NAMES
from lsp_server.config.providers import PRESETS
from lsp_server.config.toml_positions import KeyPath, dotted

T = TypeVar("T")


class Invalid(Exception):
    def __init__(self, path: KeyPath, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


SECTION_TYPES: dict[str, type] = {
    "routing": RoutingConfig,
    "local": LocalConfig,
    "gateway": GatewayConfig,
}
_TOP_LEVEL_KEYS = (*SECTION_TYPES, "endpoints")
FILE_ONLY_SECTIONS = ("endpoints", "gateway")
_REQUIRED_ENDPOINT_KEYS = ("name", "kind", "model")
# Keys a user might reach for to paste a credential into the file.
_SECRET_KEY_NAMES = frozenset(
    {"api_key", "apikey", "key", "token", "api_token", "access_token", "secret", "password"}
)
_SECRET_VALUE = re.compile(
    r"\b(sk-[A-Za-z0-9_\-]{16,}|gh[pousr]_[A-Za-z0-9]{30,}|xox[abpr]-[A-Za-z0-9\-]{10,}"
    r"|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_\-]{35})"
)
# A gateway client's name: its token variable, or its name in the token file.
CLIENT_NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
_ENV_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Keys that take one string or an array of strings; one string is read as an array of one.
_ONE_OR_MANY = frozenset({("gateway", "token_env")})
STATE_URL_SCHEMES = ("redis", "rediss")


def build_config(document: Mapping[str, Any]) -> Config:
    _refuse_secrets(document, ())
    _reject_unknown(document, _TOP_LEVEL_KEYS, ())
    sections: dict[str, Any] = {
        name: _build_section(cls, expect_table(document.get(name, {}), (name,)), (name,))
        for name, cls in SECTION_TYPES.items()
    }
    endpoints = document.get("endpoints", [])
    if not isinstance(endpoints, list):
        raise Invalid(("endpoints",), f"expected an array of tables, got {describe(endpoints)}")
    built = tuple(
        _build_endpoint(expect_table(raw, ("endpoints", i)), ("endpoints", i))
        for i, raw in enumerate(endpoints)
    )
    _check_unique_names(built)
    routing: RoutingConfig = sections["routing"]
    if routing.hedge_after_ms >= routing.inline_deadline_ms:
        raise Invalid(
            ("routing", "hedge_after_ms"),
            f"must be less than routing.inline_deadline_ms ({routing.inline_deadline_ms}); "
            "to turn hedging off set routing.max_hedge_ratio = 0",
        )
    local: LocalConfig = sections["local"]
    if local.model not in ("", LOCAL_MODEL_AUTO) and local.model_path:
        raise Invalid(
            ("local", "model"),
            "set either local.model (a preset) or local.model_path (a .gguf file), not both",
        )
    return Config(routing=routing, local=local, endpoints=built, gateway=sections["gateway"])


def _build_endpoint(raw: Mapping[str, Any], path: KeyPath) -> EndpointConfig:
    values = dict(raw)
    _reject_unknown(values, tuple(_field_types(EndpointConfig)), path)
    for key in _REQUIRED_ENDPOINT_KEYS:
        if key not in values:
            raise Invalid((*path, key), "missing required key")
    kind = _check_value(values["kind"], _field_types(EndpointConfig)["kind"], (*path, "kind"))
    preset = PRESETS[kind]
    if "base_url" not in values:
        if preset.base_url is None:
            raise Invalid((*path, "base_url"), "missing required key")
        values["base_url"] = preset.base_url
    if preset.api_key_env:
        values.setdefault("api_key_env", preset.api_key_env)
    values.setdefault("fim", preset.fim)
    values.setdefault("context_tokens", preset.context_tokens)
    roles = values.get("roles", ("inline",))
    if isinstance(roles, list | tuple) and "inline" not in roles:
        # A refactor answer is a whole rewritten selection, not a few keystrokes' worth.
        values.setdefault("max_tokens", CHAT_MAX_TOKENS)
    if preset.fim_path is None and values["fim"] is True:
        raise Invalid(
            (*path, "fim"), f"{kind} endpoints have no fill-in-the-middle API; use fim = false"
        )
    return _build_section(EndpointConfig, values, path)


def _build_section(cls: type[T], raw: Mapping[str, Any], path: KeyPath) -> T:
    types_by_name = _field_types(cls)
    _reject_unknown(raw, tuple(types_by_name), path)
    section = path[0]
    values = {
        key: _check_value(_one_or_many(str(section), key, value), types_by_name[key], (*path, key))
        for key, value in raw.items()
    }
    for key, value in values.items():
        rule = _RULES.get((str(section), key))
        problem = rule(value) if rule else None
        if problem:
            raise Invalid((*path, key), problem)
    return cls(**values)


def _one_or_many(section: str, key: str, value: Any) -> Any:
    if (section, key) in _ONE_OR_MANY and isinstance(value, str):
        return [value] if value else []
    return value


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name != "source"}


def _check_value(value: Any, expected: Any, path: KeyPath) -> Any:
    """`value` converted to the field's type (lists to tuples, tables to Price) or Invalid."""
    origin = typing.get_origin(expected)
    if expected is bool:
        if isinstance(value, bool):
            return value
        raise Invalid(path, f"expected true or false, got {describe(value)}")
    if expected is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise Invalid(path, f"expected an integer, got {describe(value)}")
    if expected is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise Invalid(path, f"expected a number, got {describe(value)}")
    if expected is str:
        if isinstance(value, str):
            return value
        raise Invalid(path, f"expected a string, got {describe(value)}")
    if origin is typing.Literal:
        allowed = typing.get_args(expected)
        if value in allowed and isinstance(value, str):
            return value
        choices = ", ".join(f'"{a}"' for a in allowed)
        raise Invalid(path, f"expected one of {choices}, got {describe(value)}")
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise Invalid(path, f"expected an array, got {describe(value)}")
        item_type = typing.get_args(expected)[0]
        return tuple(_check_value(item, item_type, (*path, i)) for i, item in enumerate(value))
    if origin is types.UnionType and type(None) in typing.get_args(expected):
        # TOML has no null: an optional key is either absent (None) or of the other type.
        (present,) = (a for a in typing.get_args(expected) if a is not type(None))
        return _check_value(value, present, path)
    if expected is Price or expected is Limits:
        return _build_section(expected, expect_table(value, path), path)
    if origin is dict:
        return {
            name: _check_value(item, typing.get_args(expected)[1], (*path, name))
            for name, item in _client_tables(expect_table(value, path), path).items()
        }
    raise TypeError(f"no validation for {expected!r}")  # a new field type in config.py


def _client_tables(tables: Mapping[str, Any], path: KeyPath) -> Mapping[str, Any]:
    for name in tables:
        if not CLIENT_NAME.fullmatch(name):
            raise Invalid(
                (*path, name),
                "a client is named by its token variable or its name in the token file: "
                "letters, digits and _ . @ -, at most 64",
            )
    return tables


def expect_table(value: Any, path: KeyPath) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    raise Invalid(path, f"expected a table, got {describe(value)}")


def _reject_unknown(raw: Mapping[str, Any], allowed: tuple[str, ...], path: KeyPath) -> None:
    for key in raw:
        if key not in allowed:
            raise Invalid((*path, key), _unknown_key_message(key, allowed))


def _unknown_key_message(key: str, allowed: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    hint = f'; did you mean "{close[0]}"?' if close else f"; known keys: {', '.join(allowed)}"
    return f"unknown key{hint}"


def _refuse_secrets(value: Any, path: KeyPath) -> None:
    """Credentials never belong in the configuration: refuse them without echoing them."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if str(key).lower() in _SECRET_KEY_NAMES:
                raise Invalid(
                    (*path, key),
                    "credentials are never written in the configuration: export the key in an "
                    f"environment variable and name that variable with {_env_key_for(path)}",
                )
            _refuse_secrets(item, (*path, key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _refuse_secrets(item, (*path, i))
    elif isinstance(value, str) and (_SECRET_VALUE.search(value) or _has_url_password(value)):
        raise Invalid(
            path,
            "this value looks like a credential, which is never written in the configuration: "
            "export the key in an environment variable and name that variable with "
            f"{_env_key_for(path)}",
        )


def _env_key_for(path: KeyPath) -> str:
    """The setting that names the variable a credential at `path` belongs in."""
    if path[:2] == ("gateway", "state_url"):
        return "state_password_env"
    return "token_env" if path[:1] == ("gateway",) else "api_key_env"


def _has_url_password(value: str) -> bool:
    if not value.startswith(("http://", "https://", "redis://", "rediss://")):
        return False
    try:
        return urlsplit(value).password is not None
    except ValueError:
        return False


def _check_unique_names(endpoints: tuple[EndpointConfig, ...]) -> None:
    seen: dict[str, int] = {}
    for i, endpoint in enumerate(endpoints):
        if endpoint.name in RESERVED_ENDPOINT_NAMES:
            raise Invalid(
                ("endpoints", i, "name"),
                f'"{endpoint.name}" is reserved (it names the in-process model); choose another',
            )
        if endpoint.name in seen:
            first = dotted(("endpoints", seen[endpoint.name]))
            raise Invalid(
                ("endpoints", i, "name"),
                f'duplicate endpoint name "{endpoint.name}" (also {first})',
            )
        seen[endpoint.name] = i


def describe(value: Any) -> str:
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


def _local_model_preset(value: str) -> str | None:
    if not value or value == LOCAL_MODEL_AUTO or value in LOCAL_MODEL_PRESETS:
        return None
    known = ", ".join(f'"{name}"' for name in (LOCAL_MODEL_AUTO, *LOCAL_MODEL_PRESETS))
    return f"unknown local model preset {describe(value)}; known: {known}"


def _positive(value: int | float) -> str | None:
    return None if value > 0 else f"must be greater than 0, got {value}"


def _not_negative(value: int | float) -> str | None:
    return None if value >= 0 else f"must not be negative, got {value}"


# More context than this is not context for a keystroke: it is a second file.
MAX_CONTEXT_TOKENS = 32_768


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


# Keyed by (top-level section, field); the price table's fields count as the endpoint's.
_RULES: dict[tuple[str, str], Callable[[Any], str | None]] = {
    ("routing", "inline_deadline_ms"): _positive,
    ("routing", "hedge_after_ms"): _positive,
    ("routing", "refactor_deadline_ms"): _positive,
    ("routing", "edit_deadline_ms"): _positive,
    ("routing", "max_hedge_ratio"): _ratio,
    ("routing", "sensitive_globs"): _non_empty_items,
    ("local", "model"): _local_model_preset,
    ("local", "n_ctx"): _positive,
    ("local", "n_threads"): _not_negative,
    ("local", "max_tokens"): _positive,
    ("local", "window_tokens"): _not_negative,
    ("local", "deadline_ms"): _positive,
    ("local", "context_tokens"): _context_tokens,
    ("gateway", "host"): _non_empty,
    ("gateway", "port"): _port,
    ("gateway", "token_env"): _env_var_names,
    ("gateway", "state_url"): _state_url,
    ("gateway", "state_password_env"): _env_var_name,
    ("gateway", "header_timeout_ms"): _positive,
    ("gateway", "body_timeout_ms"): _positive,
    ("gateway", "max_connections"): _positive,
    ("gateway", "max_half_open_per_ip"): _positive,
    ("gateway", "rpm"): _positive,
    ("gateway", "tpm"): _positive,
    ("gateway", "max_concurrent"): _positive,
    ("gateway", "budget_usd"): _not_negative,
    ("endpoints", "name"): _non_empty,
    ("endpoints", "model"): _non_empty,
    ("endpoints", "base_url"): _http_url,
    ("endpoints", "api_key_env"): _env_var_name,
    ("endpoints", "roles"): _roles,
    ("endpoints", "fim_path"): _url_path,
    ("endpoints", "chat_path"): _url_path,
    ("endpoints", "responses_path"): _url_path,
    ("endpoints", "edit_path"): _url_path,
    ("endpoints", "max_tokens"): _positive,
    ("endpoints", "chat_max_tokens"): _positive,
    ("endpoints", "timeout_ms"): _positive,
    ("endpoints", "context_tokens"): _context_tokens,
    ("endpoints", "input"): _not_negative,
    ("endpoints", "output"): _not_negative,
}
