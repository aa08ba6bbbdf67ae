"""The real `gateway-ls serve` over stdio, driven byte by byte.

pytest-lsp's client matches responses to requests and hides what does not fit: a duplicate
response, an answer to a frame it never sent. The storm and fuzz tests need to see every message
the server writes, and to write frames no well-behaved client would, so this driver keeps the
whole inbox and lets a test put raw bytes on the server's stdin. Well-formed messages are
`json.dumps` bodies; the server's output is read with pygls' own stream reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import sys
import threading
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

from pygls.io_ import run_async

from tests.support.lsp_session import server_env

REQUEST_CANCELLED = -32800
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INVALID_REQUEST = -32600


def frame(body: bytes) -> bytes:
    """A well-formed base-protocol frame around `body`."""
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class _Inbox:
    """The protocol half pygls' reader hands each decoded message to."""

    def __init__(self, client: RawLspClient) -> None:
        self._client = client

    def structure_message(self, data: dict[str, Any]) -> dict[str, Any]:
        return data

    def handle_message(self, message: Any) -> None:
        self._client._received(message)


class RawLspClient:
    """One server process; every message it writes is kept in `messages`, in order."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.messages: list[dict[str, Any]] = []
        self._responses: dict[Any, list[dict[str, Any]]] = defaultdict(list)
        self._waiters: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._stop = threading.Event()
        self._reader: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def start_reading(self) -> None:
        assert self.process.stdout is not None
        self._reader = asyncio.ensure_future(self._read(self.process.stdout))

    async def _read(self, stdout: asyncio.StreamReader) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            # pygls asks for a whole JsonRPCProtocol; its reader calls only what _Inbox has.
            await run_async(self._stop, stdout, _Inbox(self))  # type: ignore[arg-type]

    def _received(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        self.messages.append(message)
        if "method" in message:
            if "id" in message:  # a request from the server: agree to whatever it asks
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            return
        msg_id = message.get("id")
        self._responses[msg_id].append(message)
        waiter = self._waiters.pop(msg_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(message)

    # -- writing ---------------------------------------------------------------------------

    def write_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)

    def send(self, message: Mapping[str, Any]) -> None:
        self.write_raw(frame(json.dumps(message).encode("utf-8")))

    async def drain(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.drain()

    def next_id(self) -> int:
        return next(self._ids)

    def send_request(
        self, method: str, params: Any = None, *, msg_id: Any = None
    ) -> asyncio.Future[dict[str, Any]]:
        """Send a request; the future holds the first response with its id."""
        msg_id = self.next_id() if msg_id is None else msg_id
        waiter = asyncio.get_running_loop().create_future()
        self._waiters[msg_id] = waiter
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return waiter

    async def request(
        self, method: str, params: Any = None, *, timeout_s: float = 30
    ) -> dict[str, Any]:
        """The response message (result or error) to one request."""
        waiter = self.send_request(method, params)
        await self.drain()
        return await asyncio.wait_for(waiter, timeout_s)

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def cancel(self, msg_id: Any) -> None:
        self.notify("$/cancelRequest", {"id": msg_id})

    # -- reading ---------------------------------------------------------------------------

    def responses(self, msg_id: Any) -> list[dict[str, Any]]:
        """Every response the server wrote for `msg_id` (exactly one is the contract)."""
        return list(self._responses.get(msg_id, ()))

    def response_ids(self) -> list[Any]:
        return list(self._responses)

    def notifications(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("method") == method and "id" not in m]

    async def wait_for(self, predicate: Callable[[], bool], timeout_s: float = 30) -> bool:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not predicate():
            if asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    # -- the session -----------------------------------------------------------------------

    async def initialize(self, root_uri: str) -> dict[str, Any]:
        capabilities = {
            "general": {"positionEncodings": ["utf-16"]},
            "textDocument": {
                "synchronization": {"dynamicRegistration": False},
                "inlineCompletion": {"dynamicRegistration": False},
            },
            "window": {"workDoneProgress": True},
        }
        response = await self.request(
            "initialize",
            {"processId": os.getpid(), "rootUri": root_uri, "capabilities": capabilities},
        )
        self.notify("initialized", {})
        await self.drain()
        return response

    async def status(self) -> dict[str, Any]:
        response = await self.request(
            "workspace/executeCommand", {"command": "gatewayLs.status", "arguments": []}
        )
        assert "result" in response, response
        status: dict[str, Any] = response["result"]
        return status

    def open_document(self, uri: str, text: str, *, language: str = "python") -> None:
        self.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": language, "version": 1, "text": text}},
        )

    async def close(self) -> int:
        """Shut down politely, then make sure the process is gone; its exit code."""
        with contextlib.suppress(Exception):
            if self.process.returncode is None:
                await self.request("shutdown", timeout_s=10)
                self.notify("exit")
                await self.drain()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.process.wait(), 10)
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        self._stop.set()
        if self._reader is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._reader, 5)
        assert self.process.returncode is not None
        return self.process.returncode


@contextlib.asynccontextmanager
async def raw_lsp_server(tmp_path: Path, *, config_text: str) -> AsyncIterator[RawLspClient]:
    """An initialized server with `config_text` as its configuration; stderr goes to a file."""
    config_path = tmp_path / "config.toml"
    config_path.write_text(config_text, encoding="utf-8")
    with (tmp_path / "server-stderr.log").open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "lsp_server",
            "serve",
            "--config",
            str(config_path),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=server_env(tmp_path),
            limit=64 * 1024 * 1024,
        )
    client = RawLspClient(process)
    client.start_reading()
    try:
        response = await client.initialize(tmp_path.as_uri())
        assert "result" in response, response
        yield client
    finally:
        await client.close()
