"""What the language server adds on the keystroke path, its idle memory and its start-up time.

Overhead: the real `gateway-ls serve` runs over stdio against a zero-latency `FakeLLMServer` on
127.0.0.1, in a process of its own (sharing this process's interpreter lock would add thread
hand-offs to the direct path). Each round makes the same completion request twice: once
directly through the server's own HTTP backend (`OpenAICompatibleBackend`, so both paths make
the same HTTP exchange and stop reading at `[DONE]`) and once as
`textDocument/inlineCompletion` through the server. The difference is what the server, its
routing and the stdio JSON-RPC transport add. A third request goes to the floor
(`bench/floor_lsp_server.py`): a plain pygls server on the same transport that only makes the
same HTTP request, so what the client, pygls and the two pipe hops cost is told apart from
what gateway-ls's own layers cost. The three are interleaved so the machine's noise falls on
all alike.

Idle memory: the server's RSS after initialisation, once it has stopped growing, with the local
model disabled (never loaded).
Start-up: from spawning the process to the `initialize` response, median of several starts,
next to the floor every pygls server pays: starting Python and importing pygls and lsprotocol.

Run from the repository root: `python -m bench.bench_lsp_overhead [--requests 1000]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import cattrs
import httpx
import psutil
from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.protocol import JsonRPCResponseMessage, LanguageServerProtocol, default_converter

from lsp_server.backends.base import CompletionRequest
from lsp_server.backends.openai_compat import OpenAICompatibleBackend
from lsp_server.config.model import EndpointConfig
from lsp_server.lsp.protocol import DispatchByClass, JsonCodecWriting
from lsp_server.lsp.stdio_transport import read_messages

TEXT = "compute(a, b)\n"
LINES = 1000
ADDED_P50_TARGET_MS = 0.5
ADDED_P99_TARGET_MS = 2.0
RSS_TARGET_MB = 60.0
STARTUP_TARGET_MS = 300.0
STARTUP_OWN_TARGET_MS = 100.0  # over the floor, where Python and pygls alone take most of 300


def config_text(base_url: str) -> str:
    return (
        "[routing]\ninline_deadline_ms = 5000\nhedge_after_ms = 4000\n"
        "[local]\nenabled = false\n"
        f'[[endpoints]]\nname = "zero"\nkind = "openai"\nbase_url = "{base_url}"\n'
        'model = "fake-model"\nroles = ["inline"]\nfim = true\n'
    )


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
    converter = default_converter()
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
    client.protocol.set_writer(server.stdin)  # type: ignore[arg-type]
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


async def settled_rss_mb(process: psutil.Process, quiet_s: float = 1.0) -> float:
    """The RSS once it has not grown for `quiet_s`: what the server imports once `initialize`
    is answered (the HTTP stack, the core) counts as idle memory too."""
    deadline = time.monotonic() + 15
    rss, since = process.memory_info().rss, time.monotonic()
    while time.monotonic() - since < quiet_s and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        now = process.memory_info().rss
        if now > rss:
            rss, since = now, time.monotonic()
    return rss / 2**20


@contextmanager
def zero_latency_endpoint(cores: set[int] | None = None) -> Iterator[str]:
    """A `FakeLLMServer` in its own process, on `cores` if given; yields its OpenAI base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "bench.harness.fake_llm_server", "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--text", TEXT], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    if cores:
        os.sched_setaffinity(process.pid, cores)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{base_url}/models", timeout=1.0, trust_env=False)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the fake endpoint did not start") from None
                time.sleep(0.05)
        yield base_url
    finally:
        process.terminate()
        process.wait(timeout=10)


# --- overhead --------------------------------------------------------------------------------


async def direct_ms(backend: OpenAICompatibleBackend, prefix: str, cpu_ms: list[float]) -> float:
    """Wall time of one direct request; its CPU time in this process goes to `cpu_ms`."""
    started, cpu_started = time.perf_counter(), time.process_time()
    parts = [chunk async for chunk in backend.complete(CompletionRequest(prefix, "\n"))]
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
    if result is None or not result.items:
        raise RuntimeError(f"no suggestion on line {line}: the server did not route it")
    return elapsed


@dataclass
class Overhead:
    direct: list[float]
    served: list[float]
    floor: list[float]  # the same request through `floor_lsp_server`
    routed: list[float]
    rss_idle_mb: float
    rss_after_mb: float
    direct_cpu_ms: float  # per request, in this process
    server_cpu_ms: float  # per request, in the server's process


async def measure_overhead(requests: int, workdir: Path) -> Overhead:
    with zero_latency_endpoint() as base_url:
        config_path = workdir / "config.toml"
        config_path.write_text(config_text(base_url), encoding="utf-8")
        floor_command = ("-m", "bench.floor_lsp_server", base_url)
        async with (
            running_server(config_path, workdir) as client,
            running_client(floor_command, workdir) as floor_client,
        ):
            await initialize(client, workdir)
            await initialize(floor_client, workdir)
            rss_idle_mb = await settled_rss_mb(server_process(client))
            uri = (workdir / "keystrokes.py").as_uri()
            source = "".join(f"value_{i} = \n" for i in range(LINES))
            for each in (client, floor_client):
                open_document(each, uri, source)
            backend = OpenAICompatibleBackend(
                EndpointConfig(name="direct", kind="openai", base_url=base_url, model="fake-model")
            )
            direct, served, floor, direct_cpu = [], [], [], []
            server_cpu_before = sum(server_process(client).cpu_times()[:2])
            try:
                for index in range(requests):
                    line = index % LINES  # a new prefix every time: no cache hits
                    prefix = source[: source.index(f"value_{line} = ") + len(f"value_{line} = ")]
                    direct.append(await direct_ms(backend, prefix, direct_cpu))
                    served.append(await through_server_ms(client, uri, line))
                    floor.append(await through_server_ms(floor_client, uri, line))
            finally:
                await backend.aclose()
            server_cpu_s = sum(server_process(client).cpu_times()[:2]) - server_cpu_before
            rss_after_mb = server_process(client).memory_info().rss / 2**20
            status = await client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="gatewayLs.status")
            )
    routed = [d["latency_ms"] for d in status["decisions"]]
    return Overhead(
        direct,
        served,
        floor,
        routed,
        rss_idle_mb,
        rss_after_mb,
        direct_cpu_ms=statistics.fmean(direct_cpu),
        server_cpu_ms=server_cpu_s * 1000 / requests,
    )


# --- start-up --------------------------------------------------------------------------------


async def measure_startup(starts: int, workdir: Path) -> list[float]:
    config_path = workdir / "startup.toml"
    config_path.write_text(config_text("http://127.0.0.1:9/v1"), encoding="utf-8")
    times = []
    for _ in range(starts):
        started = time.perf_counter()
        async with running_server(config_path, workdir) as client:
            await client.initialize_async(
                types.InitializeParams(capabilities=capabilities(), root_uri=workdir.as_uri())
            )
            times.append((time.perf_counter() - started) * 1000)
    return times


def measure_import_floor(starts: int) -> list[float]:
    times = []
    for _ in range(starts):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", "import lsprotocol.types, pygls.lsp.server"], check=True
        )
        times.append((time.perf_counter() - started) * 1000)
    return times


# --- report ----------------------------------------------------------------------------------


def quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--starts", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gateway-ls-bench-") as tmp:
        workdir = Path(tmp)
        overhead = asyncio.run(measure_overhead(args.requests, workdir))
        startups = asyncio.run(measure_startup(args.starts, workdir))
        floor = measure_import_floor(args.starts)

    direct, served, routed = overhead.direct, overhead.served, overhead.routed
    rss_idle, rss_after = overhead.rss_idle_mb, overhead.rss_after_mb
    added_p50 = quantile(served, 0.5) - quantile(direct, 0.5)
    added_p99 = quantile(served, 0.99) - quantile(direct, 0.99)
    print(f"\nkeystroke path, {args.requests} requests against a zero-latency endpoint (ms)\n")
    print(f"{'':<34}{'p50':>9}{'p90':>9}{'p99':>9}")
    for label, samples in (
        ("direct (the HTTP backend alone)", direct),
        ("through gateway-ls over stdio", served),
        ("through the floor server", overhead.floor),
    ):
        print(
            f"{label:<34}{quantile(samples, 0.5):>9.2f}{quantile(samples, 0.9):>9.2f}"
            f"{quantile(samples, 0.99):>9.2f}"
        )
    added_p90 = quantile(served, 0.9) - quantile(direct, 0.9)
    print(f"{'added by the server':<34}{added_p50:>9.2f}{added_p90:>9.2f}{added_p99:>9.2f}")
    floor_added = [quantile(overhead.floor, q) - quantile(direct, q) for q in (0.5, 0.9, 0.99)]
    print(f"{'added by the floor server':<34}" + "".join(f"{v:>9.2f}" for v in floor_added))
    own = [quantile(served, q) - quantile(overhead.floor, q) for q in (0.5, 0.9, 0.99)]
    print(f"{'gateway-ls over the floor':<34}" + "".join(f"{v:>9.2f}" for v in own))
    print(
        f"\nof which inside the router (decision log, last {len(routed)} requests): p50 "
        f"{quantile(routed, 0.5):.2f} ms of routed time vs {quantile(direct, 0.5):.2f} ms direct; "
        "the rest is the LSP layer and the stdio JSON-RPC round trip"
    )
    print(
        f"CPU per request (steadier than wall time on a shared machine): the server "
        f"{overhead.server_cpu_ms:.2f} ms, the HTTP backend alone {overhead.direct_cpu_ms:.2f} ms; "
        f"the server's own {overhead.server_cpu_ms - overhead.direct_cpu_ms:.2f} ms"
    )
    print()
    print(
        f"added p50 <= {ADDED_P50_TARGET_MS} ms: {verdict(added_p50 <= ADDED_P50_TARGET_MS)}; "
        f"added p99 <= {ADDED_P99_TARGET_MS} ms: {verdict(added_p99 <= ADDED_P99_TARGET_MS)}; "
        f"the floor server alone adds {floor_added[0]:.2f} ms at p50"
    )
    print(
        f"idle RSS {rss_idle:.1f} MB (after the run {rss_after:.1f} MB); "
        f"target <= {RSS_TARGET_MB:.0f} MB: {verdict(rss_idle <= RSS_TARGET_MB)}"
    )
    median_start = statistics.median(startups)
    own_share = median_start - statistics.median(floor)
    print(
        f"start to initialize response: median {median_start:.0f} ms over {len(startups)} starts "
        f"(min {min(startups):.0f}, max {max(startups):.0f}); "
        f"target <= {STARTUP_TARGET_MS:.0f} ms: {verdict(median_start <= STARTUP_TARGET_MS)}"
    )
    print(
        f"  floor (start Python, import pygls + lsprotocol): median "
        f"{statistics.median(floor):.0f} ms; gateway-ls's own share: {own_share:.0f} ms; "
        f"target <= floor + {STARTUP_OWN_TARGET_MS:.0f} ms: "
        f"{verdict(own_share <= STARTUP_OWN_TARGET_MS)}"
    )


if __name__ == "__main__":
    main()
