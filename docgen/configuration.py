"""The configuration reference: every key of `config.model`, from its field and its `key(...)`."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Sequence
from typing import Any

from docgen.markdown import GENERATED, code, table
from lsp_server.config.keys import EditorAccess, declared_fields
from lsp_server.config.model import (
    EndpointConfig,
    GatewayConfig,
    Limits,
    LocalConfig,
    Price,
    RoutingConfig,
)

# Where each dataclass's keys sit in the file.
SECTIONS: tuple[tuple[str, type], ...] = (
    ("[routing]", RoutingConfig),
    ("[local]", LocalConfig),
    ("[[endpoints]]", EndpointConfig),
    ("[endpoints.price_per_mtok]", Price),
    ("[gateway]", GatewayConfig),
    ("[gateway.default_limits] and [gateway.clients.NAME]", Limits),
)
_EDITOR = {"free": "yes", "stricter": "only stricter", "file": "no"}


def type_words(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " | ".join(f'"{choice}"' for choice in typing.get_args(annotation))
    if origin is tuple:
        return f"array of {type_words(typing.get_args(annotation)[0])}"
    if origin is types.UnionType:
        present = [a for a in typing.get_args(annotation) if a is not type(None)]
        return " or ".join(type_words(a) for a in present)
    if origin is dict:
        return "tables by name"
    names = {int: "integer", float: "number", bool: "boolean", str: "string"}
    return names.get(annotation, "table")


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return str(value)


def default_words(field: dataclasses.Field[Any], words: str) -> str:
    if words:
        return words
    if field.default is not dataclasses.MISSING:
        return "unset" if field.default is None else code(toml_value(field.default))
    return "required"


def editor_words(access: EditorAccess) -> str:
    return _EDITOR[access]


def section_table(cls: type) -> str:
    hints = typing.get_type_hints(cls)
    rows = [
        (
            code(field.name),
            type_words(hints[field.name]),
            default_words(field, info.default),
            info.check.bounds if info.check else "",
            editor_words(info.editor),
            info.meaning,
        )
        for field, info in declared_fields(cls)
    ]
    return table(("key", "type", "default", "range", "editor may set", "meaning"), rows)


def configuration_page(sections: Sequence[tuple[str, type]] = SECTIONS) -> str:
    parts = [
        "# Configuration keys\n\n",
        GENERATED,
        "\nEvery key of the configuration file. *editor may set*: whether an editor's settings "
        "(`gatewayLs` in `initializationOptions` and `workspace/didChangeConfiguration`) may set "
        "it: *only stricter* keys are taken from an editor only where they tighten privacy. "
        "See [Configuration](../configuration.md).\n",
    ]
    for heading, cls in sections:
        parts.append(f"\n## `{heading}`\n\n")
        parts.append(section_table(cls))
    return "".join(parts)
