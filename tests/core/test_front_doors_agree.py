"""One input through the three front doors (the LSP over stdio, the gateway over HTTP, and
`gateway-ls complete`) gets the same routing decision and the same cleaned text: they are
adapters over one core."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from lsp_server.reasons import Reason
from tests.support.gateway_process import running_gateway
from tests.support.lsp_session import (
    inline_completion,
    lsp_session,
    open_document,
    server_env,
    server_status,
)

PREFIX = "def add(a, b):\n    "
SUFFIX = "\n\nprint(add(1, 2))\n"
# What the model writes needs cleaning: it repeats the code after the cursor.
RAW = "return a + b\n\nprint(add(1, 2))\n"
CLEANED = "return a + b"
CONFIG = (
    '[routing]\ninline_deadline_ms = 10000\nhedge_after_ms = 9000\noffline = "never"\n'
    "[local]\nenabled = false\n"
    '[[endpoints]]\nname = "fast"\nkind = "openai"\nbase_url = "{url}"\n'
    'model = "fake-model"\nroles = ["inline"]\n'
)


async def test_lsp_gateway_and_complete_agree(tmp_path: Path) -> None:
    source = tmp_path / "add.py"
    source.write_text(PREFIX + SUFFIX, encoding="utf-8")
    with FakeLLMServer(Behaviour(text=RAW), name="fast") as upstream:
        config = CONFIG.format(url=upstream.base_url)
        lsp = await _through_lsp(tmp_path / "lsp", source, config)
        gateway = _through_gateway(tmp_path / "gateway", source, config)
        complete = _through_complete(tmp_path / "complete", source, config)
    expected = (CLEANED, "fast", Reason.CONFIG_ORDER.value)
    assert lsp == expected
    assert gateway == expected
    assert complete == expected


async def _through_lsp(home: Path, source: Path, config: str) -> tuple[str, str, str]:
    home.mkdir()
    async with lsp_session(home, config_text=config) as client:
        uri = source.as_uri()
        open_document(client, uri, source.read_text(encoding="utf-8"))
        result = await inline_completion(client, uri, 1, 4)
        status = await server_status(client)
    assert result is not None and result.items
    decision = status["decisions"][-1]
    text = result.items[0].insert_text
    assert isinstance(text, str)
    return text, decision["endpoint"], decision["reason"]


def _through_gateway(home: Path, source: Path, config: str) -> tuple[str, str, str]:
    with running_gateway(home, config) as gateway:
        response = httpx.post(
            f"{gateway.base_url}/completions",
            json={"model": "auto", "prompt": PREFIX, "suffix": SUFFIX},
            headers={"X-Gateway-LS-Path": str(source)},
            timeout=30,
        )
    assert response.status_code == 200, response.text
    text = response.json()["choices"][0]["text"]
    return text, response.headers["X-Gateway-LS-Endpoint"], response.headers["X-Gateway-LS-Reason"]


def _through_complete(home: Path, source: Path, config: str) -> tuple[str, str, str]:
    home.mkdir()
    config_path = home / "config.toml"
    config_path.write_text(config, encoding="utf-8")
    command = [sys.executable, "-m", "lsp_server", "--config", str(config_path), "complete"]
    run = subprocess.run(
        [*command, f"{source}:2:5"],
        capture_output=True,
        text=True,
        env=server_env(home),
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    # stderr: "gateway-ls: ENDPOINT (WHY, N ms)"; the first decision names its reason in words.
    endpoint = run.stderr.split("gateway-ls: ", 1)[1].split(" (", 1)[0]
    reason = next(
        r.value for r in Reason if r.meaning in run.stderr or f"({r.value}," in run.stderr
    )
    return run.stdout.rstrip("\n"), endpoint, reason
