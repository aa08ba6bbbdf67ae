"""The inline-completion round trip over the network transports of `gateway-ls serve`.

TCP is driven by pygls' own client (Content-Length framed JSON-RPC); WebSocket by a bare
`websockets` client sending one JSON-RPC message per frame, as browser-based editors do, so the
test also pins the framing: no Content-Length headers on a WebSocket.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from lsprotocol import types
from pygls.lsp.client import LanguageClient
from websockets.asyncio.client import ClientConnection, connect

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from bench.harness.processes import free_port
from tests.support.lsp_session import endpoint_toml, server_env

CONFIG = "[routing]\ninline_deadline_ms = 5000\nhedge_after_ms = 4000\n[local]\nenabled = false\n"
DOCUMENT = "def add(a, b):\n    \n\nprint(add(1, 2))\n"
CURSOR = (1, 4)
EXPECTED = "return a + b"
CONNECT_TIMEOUT_S = 30

T = TypeVar("T")


@pytest.fixture
def endpoint() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(Behaviour(text=EXPECTED + "\n"), name="fast") as server:
        yield server


@contextlib.contextmanager
def lsp_server(tmp_path: Path, endpoint: FakeLLMServer, transport: str) -> Iterator[int]:
    """`gateway-ls serve --tcp|--ws 127.0.0.1:PORT` as a subprocess; yields the port."""
    config_path = tmp_path / "config.toml"
    config_path.write_text(CONFIG + endpoint_toml("fast", endpoint.base_url), encoding="utf-8")
    port = free_port()
    log_path = tmp_path / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lsp_server",
                "serve",
                "--config",
                str(config_path),
                f"--{transport}",
                f"127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=server_env(tmp_path),
        )
    try:
        yield port
        try:
            process.wait(timeout=15)  # `exit` after `shutdown` ends the server
        except subprocess.TimeoutExpired:
            pytest.fail(f"the server did not exit after `exit`:\n{log_path.read_text()}")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def retry_connect(attempt: Callable[[], Awaitable[T]]) -> T:
    """The server accepts one connection and stops when it ends: probe by connecting for real."""
    deadline = asyncio.get_running_loop().time() + CONNECT_TIMEOUT_S
    while True:
        try:
            return await attempt()
        except OSError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.1)


async def test_inline_completion_over_tcp(tmp_path: Path, endpoint: FakeLLMServer) -> None:
    with lsp_server(tmp_path, endpoint, "tcp") as port:
        client = LanguageClient("transport-test", "1")
        await retry_connect(lambda: client.start_tcp("127.0.0.1", port))
        uri = (tmp_path / "add.py").as_uri()
        initialized = await client.initialize_async(
            types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=None)
        )
        assert initialized.capabilities.inline_completion_provider is not None
        client.initialized(types.InitializedParams())
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="python", version=1, text=DOCUMENT
                )
            )
        )
        result = await client.text_document_inline_completion_async(
            types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(*CURSOR),
                context=types.InlineCompletionContext(
                    trigger_kind=types.InlineCompletionTriggerKind.Invoked
                ),
            )
        )
        assert isinstance(result, types.InlineCompletionList) and result.items
        assert result.items[0].insert_text == EXPECTED
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()
    assert_upstream_saw_the_cursor(endpoint)


class JsonPerFrameSession:
    """JSON-RPC over a WebSocket, one message per frame; server requests get a null result."""

    def __init__(self, websocket: ClientConnection) -> None:
        self.websocket = websocket
        self.ids = itertools.count(1)

    async def request(self, method: str, params: Any) -> Any:
        request_id = next(self.ids)
        await self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            frame = await asyncio.wait_for(self.websocket.recv(), timeout=30)
            message = json.loads(frame)  # fails if the server framed it with headers
            if "method" in message and "id" in message:  # a request from the server
                await self._send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            elif message.get("id") == request_id:
                assert "error" not in message, message
                return message["result"]

    async def notify(self, method: str, params: Any) -> None:
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def _send(self, message: dict[str, Any]) -> None:
        await self.websocket.send(json.dumps(message))


@contextlib.asynccontextmanager
async def websocket_session(port: int) -> AsyncIterator[JsonPerFrameSession]:
    websocket: ClientConnection = await retry_connect(lambda: connect(f"ws://127.0.0.1:{port}"))
    async with websocket:
        yield JsonPerFrameSession(websocket)


async def test_inline_completion_over_websocket(tmp_path: Path, endpoint: FakeLLMServer) -> None:
    with lsp_server(tmp_path, endpoint, "ws") as port:
        async with websocket_session(port) as session:
            uri = (tmp_path / "add.py").as_uri()
            initialized = await session.request(
                "initialize", {"processId": None, "rootUri": None, "capabilities": {}}
            )
            assert "inlineCompletionProvider" in initialized["capabilities"]
            await session.notify("initialized", {})
            await session.notify(
                "textDocument/didOpen",
                {
                    "textDocument": {
                        "uri": uri,
                        "languageId": "python",
                        "version": 1,
                        "text": DOCUMENT,
                    }
                },
            )
            result = await session.request(
                "textDocument/inlineCompletion",
                {
                    "textDocument": {"uri": uri},
                    "position": {"line": CURSOR[0], "character": CURSOR[1]},
                    "context": {"triggerKind": 1},
                },
            )
            assert result["items"][0]["insertText"] == EXPECTED
            assert await session.request("shutdown", None) is None
            await session.notify("exit", None)
    assert_upstream_saw_the_cursor(endpoint)


def assert_upstream_saw_the_cursor(endpoint: FakeLLMServer) -> None:
    bodies = [r.json for r in endpoint.requests if r.path.endswith("/completions") and r.json]
    assert bodies, "the endpoint was never asked"
    assert bodies[-1]["prompt"] == "def add(a, b):\n    "
    assert bodies[-1]["suffix"].startswith("\n\nprint(add(1, 2))")
