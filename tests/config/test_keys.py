"""The one declaration of the configuration's keys (`key(...)` on each field of `config.model`)
is what the validator and the editor screen act on."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from lsp_server.config.editor_settings import EDITOR_ACCESS, screen_overrides
from lsp_server.config.keys import declared_fields
from lsp_server.config.loader import parse_config_text
from lsp_server.config.model import (
    Config,
    EndpointConfig,
    GatewayConfig,
    Limits,
    LocalConfig,
    Price,
    RoutingConfig,
)
from lsp_server.config.validation import Invalid, build_config

pytestmark = pytest.mark.unit

DECLARED = (RoutingConfig, LocalConfig, EndpointConfig, Price, GatewayConfig, Limits)


def test_every_field_of_the_configuration_is_declared() -> None:
    for cls in DECLARED:
        names = [field.name for field, info in declared_fields(cls) if info.meaning.strip()]
        assert names == [field.name for field in dataclasses.fields(cls)], cls.__name__


def test_a_declared_check_is_what_the_validator_applies() -> None:
    for field, info in declared_fields(RoutingConfig):
        if info.check is None or field.type not in ("int", "float"):
            continue
        with pytest.raises(Invalid) as refused:
            build_config({"routing": {field.name: -1}})
        assert refused.value.path == ("routing", field.name)


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("routing", "redact_secrets", False),
        ("routing", "context", True),
        ("local", "context_tokens", 4096),
    ],
)
def test_a_stricter_key_is_refused_when_it_loosens(section: str, key: str, value: Any) -> None:
    file_config = parse_config_text(
        "[routing]\ncontext = false\n[local]\ncontext_tokens = 128\n", file=None
    )
    assert EDITOR_ACCESS[(section, key)] == "stricter"
    screened = screen_overrides(file_config, {section: {key: value}})
    assert [r.key for r in screened.refused] == [f"{section}.{key}"]


def test_free_keys_pass_and_file_keys_are_refused() -> None:
    for (section, key), access in EDITOR_ACCESS.items():
        default = getattr(getattr(Config(), section), key)
        if access == "stricter" or default is None:
            continue
        screened = screen_overrides(Config(), {section: {key: default}})
        refused = [r.key for r in screened.refused]
        assert refused == ([] if access == "free" else [f"{section}.{key}"]), (section, key)
