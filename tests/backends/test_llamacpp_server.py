"""A real llama.cpp server as a remote endpoint: llama-cpp-python's OpenAI-compatible server
serving the bundled model, started by the test. Reached as `kind = "llamacpp"` (no `/infill`
there, so the backend moves to `/v1/completions` with prompt + suffix), from an editor over LSP,
from the official `openai` client through the gateway, and for a refactor.

Few real generations (two cores are shared): each asks for a handful of tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from lsprotocol import types

from tests.support.config_text import LOCAL_OFF
from tests.support.edit_client import record_applied_edits
from tests.support.gateway_process import running_gateway
from tests.support.lsp_session import inline_completion, lsp_session, open_document, server_status
from tests.support.ports import free_port
from tests.support.processes import stop_process

pytestmark = pytest.mark.model

START_TIMEOUT_S = 120
REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE = "def add(a, b):\n    return a +\n\n\nprint(add(1, 2))\n"


@pytest.fixture(scope="module")
def llama_server(
    bundled_model_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """`python -m llama_cpp.server` (through `tests.support.llama_server`) on a free loopback
    port; its root URL."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [
        sys.executable, "-m", "tests.support.llama_server", "--model", str(bundled_model_path),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "1",
    ]  # fmt: skip
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"llama_cpp.server exited:\n{log_path.read_text(errors='replace')}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{root}/v1/models", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not start:\n{log_path.read_text()}")
            time.sleep(0.2)
        yield root
    finally:
        stop_process(process)


def llama_endpoint(root: str, roles: str = '["inline", "refactor"]', max_tokens: int = 8) -> str:
    return (
        f'[[endpoints]]\nname = "llama"\nkind = "llamacpp"\nbase_url = "{root}"\n'
        f'model = "gemma"\nroles = {roles}\nmax_tokens = {max_tokens}\ntimeout_ms = 60000\n'
    )


GENEROUS = "[routing]\ninline_deadline_ms = 60000\nhedge_after_ms = 59000\n"


async def test_inline_suggestion_over_lsp(tmp_path: Path, llama_server: str) -> None:
    config = GENEROUS + LOCAL_OFF + llama_endpoint(llama_server, '["inline"]')
    async with lsp_session(tmp_path, config_text=config) as client:
        uri = (tmp_path / "add.py").as_uri()
        open_document(client, uri, SOURCE)
        result = await asyncio.wait_for(inline_completion(client, uri, 1, 16), 90)
        status = await server_status(client)
    (decision,) = [d for d in status["decisions"] if d["kind"] == "inline"]
    assert decision["endpoint"] == "llama" and decision["tokens"] > 0, decision
    assert result is None or all(item.insert_text for item in result.items)


def test_gateway_with_the_openai_client(tmp_path: Path, llama_server: str) -> None:
    import openai

    config = GENEROUS + LOCAL_OFF + llama_endpoint(llama_server)
    with running_gateway(tmp_path, config) as gateway:
        client = gateway.client()
        raw = client.completions.with_raw_response.create(
            model="llama", prompt="def add(a, b):\n    return a +", suffix="\n", max_tokens=4
        )
        completion = raw.parse()
        assert raw.headers["x-gateway-ls-endpoint"] == "llama"
        assert completion.usage is not None and 0 < completion.usage.completion_tokens <= 4
        assert completion.choices[0].finish_reason in ("stop", "length")
        chat = client.chat.completions.create(
            model="gateway-ls",
            messages=[{"role": "user", "content": "Say hello."}],
            max_tokens=4,
        )
        assert chat.model == "llama" and chat.choices[0].message.content is not None
        with pytest.raises(openai.NotFoundError):
            client.completions.create(model="gemma", prompt="x")


async def test_refactor_is_answered_within_its_bounds(tmp_path: Path, llama_server: str) -> None:
    """The real model's answer goes through the refactor flow, bounded by the endpoint's
    max_tokens rather than the deadline. The bundled 270M model gives the selection back
    unchanged or rambles to its cap; an answer that changes it arrives as one
    `workspace/applyEdit`."""
    config = (
        # The deadline is far: 256 tokens on a loaded two-core machine take tens of seconds.
        "[routing]\nrefactor_deadline_ms = 150000\n"
        + LOCAL_OFF
        + llama_endpoint(llama_server, '["refactor"]', max_tokens=256)
    )
    text = "def double(x):\n    result = x * 2\n    return result\n"
    async with lsp_session(tmp_path, config_text=config) as client:
        applied = record_applied_edits(client)
        uri = (tmp_path / "double.py").as_uri()
        open_document(client, uri, text)
        selection = {"start": {"line": 1, "character": 0}, "end": {"line": 3, "character": 0}}
        argument = {"uri": uri, "range": selection, "instruction": "Return x * 2 directly."}
        result = await asyncio.wait_for(
            client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="gatewayLs.refactor", arguments=[argument])
            ),
            180,
        )
    assert isinstance(result, dict), result
    if result["applied"]:
        assert result["endpoint"] == "llama" and len(applied) == 1, result
    else:  # given back unchanged, or cut at max_tokens: said at once, and nothing changed
        assert not applied, result
        assert result.get("endpoint") == "llama" or result["error"].startswith("llama "), result
        assert "deadline" not in result["error"], result
