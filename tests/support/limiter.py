"""A `Limiter` in the test's own process, over one priced endpoint, and what a request asks."""

from __future__ import annotations

from lsp_server.config.loader import parse_config_text
from lsp_server.limits.limiter import Demand, Limiter

ENDPOINT = """
[[endpoints]]
name = "paid"
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "m"
chat_max_tokens = 1000
price_per_mtok = { input = 10.0, output = 20.0 }
"""


def limiter_for(limits: str, gateway: str = "") -> Limiter:
    config = parse_config_text(f"[gateway]\n{gateway}\n{ENDPOINT}\n{limits}", file="c.toml")
    return Limiter(lambda: config)


def demand(client: str = "CI", *, chars: int = 0, max_tokens: int | None = 100) -> Demand:
    return Demand(client, chars, max_tokens, "auto")
