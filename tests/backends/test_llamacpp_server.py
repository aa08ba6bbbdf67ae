"""llama.cpp's own server as a remote endpoint (`kind = "llamacpp"`): the real `llama-server`
(`bench.harness.llama_server`) serving the Qwen2.5-Coder 0.5B preset, whose vocabulary has the
fill-in-the-middle and repository tokens `/infill` needs (the bundled Gemma has none). Reached
from an editor over LSP, through `/infill` with the open files as `input_extra`; from the
official `openai` client through the gateway (a streamed chat relayed as llama-server wrote
it); for a refactor; and for next edits in the raw
`sweep` and `zeta` prompts at its `/v1/completions`. The prompt llama.cpp built and the model
read is taken from the server's `/slots`.

An OpenAI-only llama.cpp server (llama-cpp-python's, serving the bundled model: no `/infill`)
is asked through `/v1/completions` instead.

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
from pytest_lsp import LanguageClient

from bench.harness.llama_server import last_generated, last_prompt, running_llama_server
from bench.harness.processes import free_port
from bench.harness.processes import stop as stop_process
from lsp_server.backends.bundled_model import ensure_preset_model
from lsp_server.backends.model_presets import QWEN_CODER_0_5B
from tests.support.config_text import LOCAL_OFF
from tests.support.edit_client import record_applied_edits
from tests.support.gateway_process import running_gateway
from tests.support.lsp_session import inline_completion, lsp_session, open_document, server_status
from tests.support.mercury_session import SOURCE as SCALE_SOURCE
from tests.support.mercury_session import next_edit, rename_in_signature
from tests.support.real_tools import require_llama_server, require_preset

pytestmark = pytest.mark.model

START_TIMEOUT_S = 120
REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE = "def add(a, b):\n    return a +\n\n\nprint(add(1, 2))\n"


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`llama-server` with the 0.5B preset on a free loopback port; its root URL."""
    require_llama_server()
    require_preset(QWEN_CODER_0_5B)
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    with running_llama_server(ensure_preset_model(QWEN_CODER_0_5B), log_path) as root:
        yield root


@pytest.fixture(scope="module")
def openai_only_server(
    bundled_model_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """`python -m llama_cpp.server` (through `tests.support.llama_cpp_python_server`) on a free
    loopback port; its root URL."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama-cpp-python-server") / "server.log"
    command = [
        sys.executable, "-m", "tests.support.llama_cpp_python_server",
        "--model", str(bundled_model_path),
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


def llama_endpoint(
    root: str, roles: str = '["inline", "refactor"]', max_tokens: int = 8, extra: str = ""
) -> str:
    return (
        f'[[endpoints]]\nname = "llama"\nkind = "llamacpp"\nbase_url = "{root}"\n'
        f'model = "qwen"\nroles = {roles}\nmax_tokens = {max_tokens}\ntimeout_ms = 60000\n{extra}'
    )


GENEROUS = "[routing]\ninline_deadline_ms = 60000\nhedge_after_ms = 59000\n"


async def answers_an_inline_request(tmp_path: Path, root: str) -> None:
    """A keystroke over LSP in `SOURCE`, answered by the llama.cpp server at `root`."""
    config = GENEROUS + LOCAL_OFF + llama_endpoint(root, '["inline"]')
    async with lsp_session(tmp_path, config_text=config) as client:
        uri = (tmp_path / "add.py").as_uri()
        open_document(client, uri, SOURCE)
        result = await asyncio.wait_for(inline_completion(client, uri, 1, 16), 90)
        status = await server_status(client)
    (decision,) = [d for d in status["decisions"] if d["kind"] == "inline"]
    assert decision["endpoint"] == "llama" and decision["tokens"] > 0, decision
    assert result is None or all(item.insert_text for item in result.items)


async def test_inline_suggestion_over_lsp_is_asked_at_infill(
    tmp_path: Path, llama_server: str
) -> None:
    """The prefix and suffix reach the model wrapped in its own FIM tokens, which llama.cpp
    writes only for `/infill` (its `/v1/completions` ignores a suffix)."""
    await answers_an_inline_request(tmp_path, llama_server)
    prompt = last_prompt(llama_server)
    assert "<|fim_prefix|>def add(a, b):\n    return a +" in prompt, prompt
    assert "<|fim_suffix|>" in prompt and "print(add(1, 2))" in prompt, prompt
    assert prompt.rstrip().endswith("<|fim_middle|>"), prompt


async def test_open_files_reach_the_model_as_input_extra(tmp_path: Path, llama_server: str) -> None:
    """Context beyond the file (a definition the file imports from an open tab) goes in
    `input_extra`, which llama.cpp writes in the model's repository-level format, where the
    endpoint gives it a budget (the kind's own is 0)."""
    budget = "context_tokens = 1024\n"
    config = GENEROUS + LOCAL_OFF + llama_endpoint(llama_server, '["inline"]', extra=budget)
    geometry = "def area_of_circle(radius):\n    return 3.14159 * radius * radius\n"
    main = "from geometry import area_of_circle\n\nprint(area_of_circle(\n"
    async with lsp_session(tmp_path, config_text=config) as client:
        (tmp_path / "geometry.py").write_text(geometry)
        (tmp_path / "main.py").write_text(main)
        open_document(client, (tmp_path / "geometry.py").as_uri(), geometry)
        uri = (tmp_path / "main.py").as_uri()
        open_document(client, uri, main)
        await _gathered(client)
        await asyncio.wait_for(inline_completion(client, uri, 2, 19), 90)
    prompt = last_prompt(llama_server)
    assert prompt.startswith("<|repo_name|>"), prompt
    assert "<|file_sep|>geometry.py\ndef area_of_circle(radius)" in prompt, prompt
    assert prompt.index("<|file_sep|>geometry.py") < prompt.index("<|fim_prefix|>"), prompt


async def _gathered(client: LanguageClient, timeout_s: float = 30.0) -> None:
    """Until the server has read what the open documents give (as a person reads first)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not (await server_status(client)).get("context", {}).get("gathering"):
            return
        await asyncio.sleep(0.02)


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
        assert "<|fim_prefix|>def add(a, b):" in last_prompt(llama_server)
        chat = client.chat.completions.create(
            model="gateway-ls",
            messages=[{"role": "user", "content": "Say hello."}],
            max_tokens=4,
        )
        assert chat.model == "llama" and chat.choices[0].message.content is not None
        # Streamed, llama-server's own events are relayed: its id on every chunk, the endpoint
        # as `model`, and its usage event, which the client asked for, last.
        chunks = list(
            client.chat.completions.create(
                model="gateway-ls",
                messages=[{"role": "user", "content": "Say hello."}],
                max_tokens=4,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        assert {c.model for c in chunks} == {"llama"} and len({c.id for c in chunks}) == 1
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        usage = chunks[-1].usage
        assert usage is not None and 0 < usage.completion_tokens <= 4
        with pytest.raises(openai.NotFoundError):
            client.completions.create(model="gemma", prompt="x")


async def test_refactor_is_answered_within_its_bounds(tmp_path: Path, llama_server: str) -> None:
    """The real model's answer goes through the refactor flow, bounded by the endpoint's
    max_tokens rather than the deadline. A small model may give the selection back unchanged or
    ramble to its cap; an answer that changes it arrives as one `workspace/applyEdit`."""
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


@pytest.mark.parametrize(
    ("edit_format", "marker"),
    [("sweep", "<|file_sep|>updated/scale.py:1:"), ("zeta", "### Response:\n")],
)
async def test_next_edit_in_a_raw_format_at_v1_completions(
    tmp_path: Path, llama_server: str, edit_format: str, marker: str
) -> None:
    """The format's raw prompt reaches the model as written (llama-server's `/v1/completions`
    adds nothing; the format's special tokens are read as such), and the edits proposed are the
    model's answer, read back, inside the document's version they were asked for. (The 0.5B is
    no next-edit model: the protocol is tested, not whether the edit is the right one.)"""
    config = (
        "[routing]\nedit_deadline_ms = 120000\n"
        + LOCAL_OFF
        + llama_endpoint(llama_server, '["edit"]', 96, f'edit_format = "{edit_format}"\n')
    )
    async with lsp_session(tmp_path, config_text=config) as client:
        uri = (tmp_path / "scale.py").as_uri()
        open_document(client, uri, SCALE_SOURCE)
        await server_status(client)
        rename_in_signature(client, uri)
        result = await asyncio.wait_for(next_edit(client, uri, 4, 0, 16), 150)
        status = await server_status(client)
    (decision,) = [d for d in status["decisions"] if d["kind"] == "edit"]
    assert decision["endpoint"] == "llama" and decision["tokens"] > 0, decision
    prompt = last_prompt(llama_server)
    assert marker in prompt and "def scale(amount" in prompt, prompt
    answer = last_generated(llama_server)
    lines = SCALE_SOURCE.count("\n")
    for edit in result["edits"]:
        assert edit["textDocument"] == {"uri": uri, "version": 4}, edit
        assert 0 <= edit["range"]["start"]["line"] <= edit["range"]["end"]["line"] <= lines, edit
        assert edit["text"].strip() in answer, (edit, answer)


async def test_an_openai_only_server_is_asked_at_v1_completions(
    tmp_path: Path, openai_only_server: str
) -> None:
    """No `/infill` there (404): the backend asks `/v1/completions` with prompt and suffix."""
    await answers_an_inline_request(tmp_path, openai_only_server)
