"""A language-server session as the benchmarks drive one: `gateway-ls serve` (or another
server) over stdio under pygls' client, optionally with the lean JSON-RPC reading an editor's
native parser gives, and the inline request timed through it and straight to the endpoint."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import cattrs
import psutil
from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.protocol import JsonRPCResponseMessage, LanguageServerProtocol, default_converter

from bench.harness.permits import permit_for
from lsp_server.backends.base import CompletionRequest
from lsp_server.backends.openai_compat import OpenAICompatibleBackend
from lsp_server.lsp.protocol import DispatchByClass, JsonCodecWriting
from lsp_server.lsp.stdio_transport import read_messages


def capabilities() -> types.ClientCapabilities:
    return types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(
            inline_completion=types.InlineCompletionClientCapabilities(),
            synchronization=types.TextDocumentSyncClientCapabilities(),
        ),
    )


@asynccontextmanager
async def running_server(
    config_path: Path, workdir: Path, *, lean: bool = False
) -> AsyncIterator[LanguageClient]:
    command = ("-m", "lsp_server", "serve", "--config", str(config_path))
    async with running_client(command, workdir, lean=lean) as client:
        yield client


def json_results_converter() -> cattrs.Converter:
    """pygls' converter, but the result of a method lsprotocol does not know (the next edit's
    `textDocument/copilotInlineEdit`) stays JSON, as an editor reads it: pygls would build a
    namedtuple class for each of its objects, about half a millisecond a next edit, which the
    bench would count as the server's."""
    converter: cattrs.Converter = default_converter()
    converter.register_structure_hook(JsonRPCResponseMessage, lambda message, cls: cls(**message))
    return converter


class LeanClientProtocol(JsonCodecWriting, DispatchByClass, LanguageServerProtocol):
    """pygls' client protocol writing with orjson (`json_codec`) and telling messages apart by
    class, as the server does."""


async def start_lean_io(client: LanguageClient, *args: str, env: dict[str, str]) -> None:
    """pygls' `start_io`, reading with the server's own message loop (`read_messages`, bodies
    parsed by orjson): an editor parses JSON-RPC in C (Neovim) or its JavaScript engine's
    native parser (VS Code), not a pure-Python object hook."""
    pipe = asyncio.subprocess.PIPE
    server = await asyncio.create_subprocess_exec(
        *args, stdin=pipe, stdout=pipe, stderr=pipe, env=env
    )
    assert server.stdin is not None and server.stdout is not None
    client.protocol.set_writer(server.stdin)
    reading = read_messages(client, server.stdout, client._stop_event)
    client._server = server
    client._async_tasks.extend(
        [asyncio.create_task(reading), asyncio.create_task(client._server_exit())]
    )


@asynccontextmanager
async def running_client(
    command: tuple[str, ...], workdir: Path, *, lean: bool = False
) -> AsyncIterator[LanguageClient]:
    """A client of `python COMMAND` over stdio, shut down properly at the end; `lean`: the
    JSON-RPC messages are written and parsed with orjson (`start_lean_io`)."""
    protocol = LeanClientProtocol if lean else LanguageServerProtocol
    client = LanguageClient(
        "bench", "1", protocol_cls=protocol, converter_factory=json_results_converter
    )
    env = {
        **{k: v for k, v in os.environ.items() if k != "GATEWAY_LS_CONFIG"},
        "XDG_CONFIG_HOME": str(workdir / "xdg-config"),
        "XDG_STATE_HOME": str(workdir / "xdg-state"),
    }
    if lean:
        await start_lean_io(client, sys.executable, *command, env=env)
    else:
        await client.start_io(sys.executable, *command, env=env)
    try:
        yield client
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()


async def initialize(client: LanguageClient, root: Path) -> None:
    await client.initialize_async(
        types.InitializeParams(capabilities=capabilities(), root_uri=root.as_uri())
    )
    client.initialized(types.InitializedParams())


def open_document(client: LanguageClient, uri: str, text: str) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=text
            )
        )
    )


def server_process(client: LanguageClient) -> psutil.Process:
    return psutil.Process(client._server.pid)  # type: ignore[union-attr]


async def direct_ms(backend: OpenAICompatibleBackend, prefix: str, cpu_ms: list[float]) -> float:
    """Wall time of one direct request; its CPU time in this process goes to `cpu_ms`."""
    started, cpu_started = time.perf_counter(), time.process_time()
    answer = backend.complete(CompletionRequest(prefix, "\n"), permit=permit_for(backend))
    parts = [chunk async for chunk in answer]
    elapsed = (time.perf_counter() - started) * 1000
    cpu_ms.append((time.process_time() - cpu_started) * 1000)
    if not parts:
        raise RuntimeError("the endpoint answered nothing")
    return elapsed


async def through_server_ms(
    client: LanguageClient, uri: str, line: int, character: int | None = None
) -> float:
    """An inline suggestion at `character` of `line` (by default after `value_N = `)."""
    column = len(f"value_{line} = ") if character is None else character
    started = time.perf_counter()
    result = await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=column),
            context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Automatic
            ),
        )
    )
    elapsed = (time.perf_counter() - started) * 1000
    items = result.items if isinstance(result, types.InlineCompletionList) else result
    if not items:
        raise RuntimeError(f"no suggestion on line {line}: the server did not route it")
    return elapsed
