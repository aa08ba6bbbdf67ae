"""The reference pages are generated from the code, and the VS Code extension's settings agree
with the keys an editor may set."""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from pathlib import Path
from typing import Any, Literal

import pytest

from docgen.command_line import command_line_page
from docgen.configuration import configuration_page, type_words
from docgen.lsp_methods import lsp_page, registrations
from docgen.markdown import cell
from docgen.reasons import reasons_page
from lsp_server.cli.main import build_parser
from lsp_server.config.editor_settings import EDITOR_ACCESS
from lsp_server.config.keys import declared_fields, key
from lsp_server.config.model import Config, LocalConfig, RoutingConfig
from lsp_server.reasons import Reason

PACKAGE_JSON = Path(__file__).resolve().parents[2] / "clients" / "vscode" / "package.json"
# The extension's own settings: how it starts the server and what it shows, not configuration
# keys the server reads.
EXTENSION_ONLY = frozenset(
    {
        "gatewayLs.serverPath",
        "gatewayLs.pythonPath",
        "gatewayLs.configPath",
        "gatewayLs.completionItems",
        "gatewayLs.nextEdit.enabled",
        "gatewayLs.nextEdit.delayMs",
        "gatewayLs.trace.server",
    }
)
_SECTIONS: dict[str, type] = {"routing": RoutingConfig, "local": LocalConfig}


@pytest.mark.unit
def test_every_declared_key_is_in_the_reference() -> None:
    page = configuration_page()
    for cls in (RoutingConfig, LocalConfig):
        for field, info in declared_fields(cls):
            row = next(line for line in page.splitlines() if line.startswith(f"| `{field.name}`"))
            assert info.meaning.split("(")[0].strip() in row


@pytest.mark.unit
def test_a_key_added_to_the_declaration_is_in_the_reference() -> None:
    boldness = Literal["low", "medium", "high"]
    extended = dataclasses.make_dataclass(
        "RoutingConfig",
        [
            (
                "refactor_boldness",
                boldness,
                dataclasses.field(
                    default="medium",
                    metadata=key("how far a refactor may stray", editor="free"),
                ),
            )
        ],
        bases=(RoutingConfig,),
        frozen=True,
    )
    page = configuration_page((("[routing]", extended),))
    assert (
        '| `refactor_boldness` | "low" \\| "medium" \\| "high" | `"medium"` |  | yes | '
        "how far a refactor may stray |"
    ) in page


def _config_key(setting: str) -> tuple[str, str] | None:
    """`gatewayLs.routing.inlineDeadlineMs` -> ("routing", "inline_deadline_ms")."""
    parts = setting.split(".")
    if len(parts) != 3 or parts[0] != "gatewayLs" or parts[1] not in _SECTIONS:
        return None
    return parts[1], re.sub(r"(?<!^)(?=[A-Z])", "_", parts[2]).lower()


def _type_fits(json_type: str, declared: str) -> bool:
    if json_type == "string":
        return declared == "string" or declared.startswith('"')  # a string or one of some
    return declared.startswith(json_type)  # integer, number, boolean, array


def _plain_default(section: str, name: str) -> bool:
    """The field's own default is the whole story (not "half the cores" and the like)."""
    return not next(
        info.default for field, info in declared_fields(_SECTIONS[section]) if field.name == name
    )


def disagreements(settings: dict[str, Any]) -> list[str]:
    """What the extension's settings say that the declaration does not."""
    found = []
    for setting, schema in settings.items():
        if setting in EXTENSION_ONLY:
            continue
        place = _config_key(setting)
        if place is None or place not in EDITOR_ACCESS:
            found.append(f"{setting}: no configuration key")
            continue
        section, name = place
        if EDITOR_ACCESS[place] == "file":
            found.append(f"{setting}: {section}.{name} comes from the config file only")
        declared = type_words(typing.get_type_hints(_SECTIONS[section])[name])
        json_types = schema.get("type", [])
        json_types = [json_types] if isinstance(json_types, str) else json_types
        if not all(_type_fits(t, declared) for t in json_types if t != "null"):
            found.append(f"{setting}: type {json_types}, the key is {declared}")
        default = getattr(getattr(Config(), section), name)
        plain = isinstance(default, bool | int | float | str) and _plain_default(section, name)
        if plain and "default" in schema and schema["default"] != default:
            found.append(f"{setting}: default {schema['default']!r}, the key's {default!r}")
    return found


def _package_settings() -> dict[str, Any]:
    package = json.loads(PACKAGE_JSON.read_text(encoding="utf-8"))
    configuration = package["contributes"]["configuration"]
    sections = configuration if isinstance(configuration, list) else [configuration]
    return {name: schema for section in sections for name, schema in section["properties"].items()}


@pytest.mark.unit
def test_the_extension_settings_agree_with_the_editor_settable_keys() -> None:
    assert disagreements(_package_settings()) == []


@pytest.mark.unit
def test_an_extension_setting_with_no_key_is_a_disagreement() -> None:
    settings = {
        **_package_settings(),
        "gatewayLs.routing.noSuchKey": {"type": "string", "default": "medium"},
        "gatewayLs.local.modelPath": {"type": "string", "default": ""},
        "gatewayLs.routing.inlineDeadlineMs": {"type": "integer", "default": 900},
    }
    assert disagreements(settings) == [
        "gatewayLs.routing.inlineDeadlineMs: default 900, the key's 350",
        "gatewayLs.routing.noSuchKey: no configuration key",
        "gatewayLs.local.modelPath: local.model_path comes from the config file only",
    ]


@pytest.mark.unit
def test_the_command_line_reference_has_every_command_and_option() -> None:
    page = command_line_page()
    for command in ("serve", "gateway", "complete", "doctor", "stats", "model", "model pull"):
        assert f"## `gateway-ls {command}`" in page
    assert "`--next-edit`" in page and "`--recalibrate`" in page
    assert "clientProcessId" not in page  # suppressed from help, so from the reference too
    assert f"\n{build_parser().description}\n" in page


def test_the_lsp_reference_has_every_registration() -> None:
    features, commands = registrations()
    page = lsp_page(features, commands)
    for name in (*features, *commands):
        assert f"| `{name}` |" in page
    assert "| `textDocument/inlineCompletion` | LSP | Ghost text" in page


@pytest.mark.unit
def test_a_registration_without_a_docstring_is_refused() -> None:
    def undocumented(ls: object, params: object) -> None:
        return None

    with pytest.raises(ValueError, match="gatewayLs/undocumented"):
        lsp_page({"gatewayLs/undocumented": undocumented}, {})


@pytest.mark.unit
def test_the_reasons_reference_has_every_reason() -> None:
    page = reasons_page()
    for reason in Reason:
        assert f"| `{reason.value}` | {cell(reason.meaning)} |" in page
