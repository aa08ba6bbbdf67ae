"""Context beyond the file in the form each kind of endpoint reads: path-comment blocks before
the prefix for FIM APIs, `input_extra` on llama.cpp's `/infill`, a section of the user message
for chat endpoints; each cut to the endpoint's own `context_tokens`, stable chunks first."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from bench.harness.permits import permit_for
from lsp_server.backends.base import CompletionRequest, ContextChunk
from lsp_server.backends.context_prompt import path_comment, path_comment_blocks
from lsp_server.backends.factory import remote_backend
from tests.support.provider_endpoints import KEY, collect, endpoint

DEFINITION = ContextChunk(
    "shop/widgets.py", "def frobnicate_widget(widget, *, force=1.0):\n    ...\n", order=5
)
OTHER_FILE = ContextChunk("shop/billing.py", "def invoice_total(lines):\n    ...\n", order=9)
# Best first, as the store ranks them; written stable first (by `order`).
REQUEST = CompletionRequest(
    prefix="w = frobnicate_widget(",
    suffix=")\n",
    language="python",
    path="file:///w/main.py",
    context=(OTHER_FILE, DEFINITION),
    workspace_path="main.py",
)
FIM_KINDS = ("openai", "inception", "mistral", "deepseek")


@pytest.fixture(scope="module")
def running_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(name="context", api_key=KEY) as server:
        yield server


@pytest.fixture
def server(running_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> FakeLLMServer:
    running_server.behaviour = Behaviour(text="w)\n", models=("m",))
    running_server.quiet()
    for variable in ("INCEPTION_API_KEY", "MISTRAL_API_KEY", "DEEPSEEK_API_KEY", "OPENAI_KEY"):
        monkeypatch.setenv(variable, KEY)
    monkeypatch.setenv("LLAMACPP_TEST_KEY", KEY)
    return running_server


def base_url(server: FakeLLMServer, kind: str) -> str:
    if kind == "anthropic":
        return server.root_url
    return server.base_url if kind == "openai" else server.provider_base_url(kind)


async def ask(
    server: FakeLLMServer, kind: str, extra: str = "", request: CompletionRequest = REQUEST
) -> dict[str, Any]:
    key = 'api_key_env = "OPENAI_KEY"\n' if kind == "openai" else ""
    backend = remote_backend(endpoint(kind, base_url(server, kind), key + extra))
    try:
        await collect(backend.complete(request, permit=permit_for(backend)))
    finally:
        await backend.aclose()
    return server.requests[-1].payload


@pytest.mark.parametrize("kind", FIM_KINDS)
async def test_fim_apis_get_path_comment_blocks_before_the_prefix(
    server: FakeLLMServer, kind: str
) -> None:
    sent = await ask(server, kind)
    assert sent["prompt"] == (
        "# path: shop/widgets.py\ndef frobnicate_widget(widget, *, force=1.0):\n    ...\n\n"
        "# path: shop/billing.py\ndef invoice_total(lines):\n    ...\n\n"
        "# path: main.py\nw = frobnicate_widget("
    )
    assert sent["suffix"] == ")\n"


async def test_each_endpoint_keeps_what_fits_its_own_budget(server: FakeLLMServer) -> None:
    sent = await ask(server, "openai", f"context_tokens = {OTHER_FILE.tokens}\n")
    assert "invoice_total" in sent["prompt"] and "frobnicate_widget(widget" not in sent["prompt"]
    sent = await ask(server, "openai", "context_tokens = 0\n")
    assert sent["prompt"] == REQUEST.prefix


async def test_llamacpp_infill_gets_input_extra(server: FakeLLMServer) -> None:
    sent = await ask(server, "llamacpp", "context_tokens = 1024\n")
    assert sent["input_extra"] == [
        {"filename": "shop/widgets.py", "text": DEFINITION.text},
        {"filename": "shop/billing.py", "text": OTHER_FILE.text},
    ]
    assert sent["input_prefix"] == REQUEST.prefix


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_chat_endpoints_get_a_section_of_the_user_message(
    server: FakeLLMServer, kind: str
) -> None:
    extra = "fim = false\n" if kind == "openai" else 'api_key_env = "OPENAI_KEY"\n'
    sent = await ask(server, kind, extra)
    user = next(m for m in sent["messages"] if m["role"] == "user")["content"]
    user = user if isinstance(user, str) else "".join(part["text"] for part in user)
    assert user.startswith("Other code of the repository")
    assert user.index("shop/widgets.py:") < user.index("shop/billing.py:") < user.index("File:")


def test_comment_syntax_follows_the_language() -> None:
    assert path_comment("rust", "a.rs") == "// path: a.rs\n"
    assert path_comment("lua", "a.lua") == "-- path: a.lua\n"
    assert path_comment("html", "a.html") == "<!-- path: a.html -->\n"
    assert path_comment_blocks([], "python", "main.py") == ""
