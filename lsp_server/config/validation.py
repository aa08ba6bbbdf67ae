"""Strict validation of a parsed configuration against the dataclasses in `config.model`: each
value against its field's type, then its declared check (`key(check=...)`).

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
from collections.abc import Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from lsp_server.config.checks import describe
from lsp_server.config.keys import declared_fields
from lsp_server.config.model import (
    CHAT_MAX_TOKENS,
    LOCAL_MODEL_AUTO,
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
# Keys that take one string or an array of strings; one string is read as an array of one.
_ONE_OR_MANY = frozenset({("gateway", "token_env")})


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
    checks = {field.name: info.check for field, info in declared_fields(cls)}
    for key, value in values.items():
        check = checks[key]
        problem = check.test(value) if check else None
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
