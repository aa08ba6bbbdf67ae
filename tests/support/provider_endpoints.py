"""Endpoints configured as a user writes them, and a reader of a backend's stream."""

from __future__ import annotations

from collections.abc import AsyncIterator

from lsp_server.config.loader import parse_config_text
from lsp_server.config.model import EndpointConfig

KEY = "test-key-0123"


def endpoint(kind: str, base_url: str | None = None, extra: str = "") -> EndpointConfig:
    """An endpoint as a user writes it: name, kind, model, and the base URL only to point it
    at the test server."""
    lines = ["[[endpoints]]", 'name = "e"', f'kind = "{kind}"', 'model = "m"']
    if base_url is not None:
        lines.append(f'base_url = "{base_url}"')
    if kind == "llamacpp" and base_url is not None:
        lines.append('api_key_env = "LLAMACPP_TEST_KEY"')
    text = "\n".join(lines) + "\n" + extra
    return parse_config_text(text, file="config.toml").endpoints[0]


async def collect(stream: AsyncIterator[str]) -> str:
    return "".join([piece async for piece in stream])
