"""What the language server adds to a next-edit prediction, beside the inline path.

The real `gateway-ls serve` runs over stdio against a zero-latency `FakeLLMServer` in a process
of its own (as in `bench_lsp_overhead`), configured with one endpoint that serves both roles:
inline completions at Mercury's FIM path and next edits at its edit path. Beside it runs the
floor (`bench/floor_lsp_server.py`): a plain pygls server on the same transport whose handlers
make the same HTTP requests and nothing else. Each round makes six requests, interleaved so
the machine's noise falls on all alike:

- inline, direct: the FIM request through the server's own HTTP backend;
- inline, through the floor and through gateway-ls: `textDocument/inlineCompletion`;
- next edit, direct: the Mercury edit request the server would send (the same prompt, built by
  the same code) through the same backend;
- next edit, through the floor and through gateway-ls: `textDocument/copilotInlineEdit`
  (gateway-ls: region, history, privacy over every part, routing, the answer turned into
  minimal edits, positions).

"Over the model call" is a served p50 minus the direct p50 of the same kind; "over the floor"
is gateway-ls's p50 minus the floor's, what gateway-ls itself adds to what any pygls server
pays over stdio. Wall time on a shared machine is noisy, so the CPU is measured too: each
server process's CPU per request, and the core's own in this process (the suggestion and
next-edit services on an endpoint that answers at once without a network, the same answer
bodies, the model call left out).

Each round is what an editor does (`--method typing`, the default): a keystroke at the end of
a line (a `didChange` to both servers, each round on another line, so the edit history fills
as it would), a pause (`--pause-ms`, 400 by default: the VS Code extension asks for a next
edit after 400 ms without typing), then the requests at the cursor the keystroke left.
`--method static` is the method before it: no change, no pause, a request on each line of an
unchanging document in turn (no history, nothing prepared ahead). The direct next-edit request
carries the history gateway-ls holds (the bench keeps the same `EditHistory`), so it is the
call gateway-ls makes; the floor's carries none.

The client is lean by default (`--client lean`): pygls' client writing and parsing JSON-RPC
with orjson as the server does, on uvloop (libuv, the event loop of VS Code and Neovim, which
parse JSON natively); `--client pygls` is pygls' own client (pure-Python JSON with an object
hook) on asyncio's loop, as before. The direct requests run on the same loop.

The model stand-in runs on a core of its own (`--endpoint-core own`, the default where there are
two cores or more), the servers, the client and the direct calls on the others. A model
endpoint is another machine: on loopback, sharing the cores, the stand-in writes its answer's
pieces slower to a server that wakes for each one and takes the core it writes from, which is a
cost of the bench, not of the path. `--endpoint-core shared` is the method before it.

Run from the repository root: `python -m bench.bench_next_edit_path [--requests 500]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from bench.harness.endpoints import zero_latency_endpoint
from bench.harness.lsp_session import (
    direct_ms,
    initialize,
    open_document,
    running_client,
    running_server,
    server_process,
    through_server_ms,
)
from bench.harness.percentile import percentile
from bench.harness.permits import permit_for
from bench.harness.verdict import verdict
from lsp_server.backends.base import Backend, ChatRequest, CompletionRequest, EditCall, Usage
from lsp_server.backends.openai_compat import OpenAICompatibleBackend
from lsp_server.config.model import Config, EndpointConfig, LocalConfig, RoutingConfig
from lsp_server.core.engine import Engine
from lsp_server.event_loop import run_on_fastest_loop
from lsp_server.nextedit.history import EditHistory
from lsp_server.nextedit.prompts import edit_call
from lsp_server.nextedit.region import editable_region
from lsp_server.nextedit.request import EditRequest
from lsp_server.nextedit.service import NextEditService
from lsp_server.permit import Permit

TEXT = "compute(a, b)\n"  # what the model endpoint answers
LINES = 400
ADDED_P50_TARGET_MS = 1.0
PREPARED_WITHIN_S = 0.005  # in process, with no pause: long enough for the preparation
QUANTILES = (0.5, 0.9, 0.99)
ROWS = {
    "inline direct": "inline: the model call alone",
    "inline floor": "inline: through the floor server",
    "inline served": "inline: through gateway-ls",
    "edit direct": "next edit: the model call alone",
    "edit floor": "next edit: through the floor server",
    "edit served": "next edit: through gateway-ls",
}


def config_text(inception_url: str) -> str:
    return (
        "[routing]\ninline_deadline_ms = 5000\nhedge_after_ms = 4000\nedit_deadline_ms = 5000\n"
        "[local]\nenabled = false\n"
        f'[[endpoints]]\nname = "zero"\nkind = "inception"\nbase_url = "{inception_url}"\n'
        'model = "mercury-edit-2"\nroles = ["inline", "edit"]\napi_key_env = "BENCH_KEY"\n'
    )


async def edit_through_server_ms(
    client: LanguageClient, uri: str, version: int, line: int, character: int
) -> float:
    started = time.perf_counter()
    result = await client.protocol.send_request_async(
        "textDocument/copilotInlineEdit",
        {
            "textDocument": {"uri": uri, "version": version},
            "position": {"line": line, "character": character},
        },
    )
    elapsed = (time.perf_counter() - started) * 1000
    if not result["edits"]:
        raise RuntimeError(f"no next edit on line {line}: the server did not route it")
    return elapsed


async def edit_direct_ms(backend: OpenAICompatibleBackend, request: EditRequest) -> float:
    started = time.perf_counter()
    answer = backend.edit(edit_call(request, backend.config), permit=permit_for(backend))
    parts = [chunk async for chunk in answer]
    elapsed = (time.perf_counter() - started) * 1000
    if not parts:
        raise RuntimeError("the endpoint answered nothing")
    return elapsed


class Typing:
    """The bench's document, `value_N = ` on each line, and the keystrokes typed into it."""

    def __init__(self) -> None:
        self.lines = [f"value_{i} = " for i in range(LINES)]
        self.version = 1

    @property
    def text(self) -> str:
        return "".join(f"{line}\n" for line in self.lines)

    def offset(self, line: int, character: int) -> int:
        return sum(len(text) + 1 for text in self.lines[:line]) + character

    def keystroke(self, uri: str, line: int) -> types.DidChangeTextDocumentParams:
        """A digit typed at the end of `line`; the cursor is then after it."""
        end = len(self.lines[line])
        self.lines[line] += str(line % 10)
        self.version += 1
        at = types.Position(line=line, character=end)
        return types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(start=at, end=at), text=str(line % 10)
                )
            ],
        )


@dataclass(frozen=True)
class Method:
    typing: bool  # a keystroke and a pause before each round's requests
    pause_s: float
    lean: bool


@dataclass
class Run:
    """What one run measured: the wall time of each kind of request, and each server's CPU."""

    samples: dict[str, list[float]]
    server_cpu_ms: dict[str, float]  # per round (one inline and one next edit), per process


def endpoint_cores(placement: str) -> set[int] | None:
    """With `own`, a core for the model stand-in, and this process (and the servers it starts
    after) moved off it; None when the cores are shared."""
    cores = sorted(os.sched_getaffinity(0))
    if placement != "own" or len(cores) < 2:
        return None
    os.sched_setaffinity(0, set(cores[:-1]))
    return {cores[-1]}


async def measure(
    requests: int, workdir: Path, method: Method, model_cores: set[int] | None
) -> Run:
    with zero_latency_endpoint(TEXT, model_cores) as base_url:
        inception_url = base_url.removesuffix("/v1") + "/inception/v1"
        config_path = workdir / "config.toml"
        config_path.write_text(config_text(inception_url), encoding="utf-8")
        os.environ["BENCH_KEY"] = "bench"  # the servers inherit it
        floor_command = ("-m", "bench.floor_lsp_server", inception_url, "inception")
        async with (
            running_server(config_path, workdir, lean=method.lean) as client,
            running_client(floor_command, workdir, lean=method.lean) as floor_client,
        ):
            await initialize(client, workdir)
            await initialize(floor_client, workdir)
            uri = (workdir / "edits.py").as_uri()
            document = Typing()
            for each in (client, floor_client):
                open_document(each, uri, document.text)
            history = EditHistory()  # what gateway-ls's holds: the direct request carries it
            history.opened(uri, document.text)
            config = EndpointConfig(
                name="direct",
                kind="inception",
                base_url=inception_url,
                model="mercury-edit-2",
                api_key_env="BENCH_KEY",
            )
            backend = OpenAICompatibleBackend(config)
            samples: dict[str, list[float]] = {label: [] for label in ROWS}
            cpu: list[float] = []
            processes = {
                "gateway-ls": server_process(client),
                "floor": server_process(floor_client),
            }
            cpu_before = {name: sum(p.cpu_times()[:2]) for name, p in processes.items()}
            try:
                for index in range(requests):
                    if method.typing:
                        line = index * 7 % LINES  # each round elsewhere: a new edit each time
                        change = document.keystroke(uri, line)
                        for each in (client, floor_client):
                            each.text_document_did_change(change)
                        history.changed(uri, "edits.py", document.text, line)
                        await asyncio.sleep(method.pause_s)
                    else:
                        line = index % LINES
                    character = len(document.lines[line])
                    source = document.text
                    offset = document.offset(line, character)
                    request = EditRequest(
                        uri=uri,
                        path="edits.py",
                        text=source,
                        cursor=offset,
                        region=editable_region(source, offset),
                        history=history.recent(),
                    )
                    at = (line, character)
                    edit_at = (document.version, *at)
                    samples["inline direct"].append(await direct_ms(backend, source[:offset], cpu))
                    samples["inline floor"].append(await through_server_ms(floor_client, uri, *at))
                    samples["inline served"].append(await through_server_ms(client, uri, *at))
                    samples["edit direct"].append(await edit_direct_ms(backend, request))
                    samples["edit floor"].append(
                        await edit_through_server_ms(floor_client, uri, *edit_at)
                    )
                    samples["edit served"].append(
                        await edit_through_server_ms(client, uri, *edit_at)
                    )
            finally:
                await backend.aclose()
            server_cpu_ms = {
                name: (sum(p.cpu_times()[:2]) - cpu_before[name]) * 1000 / requests
                for name, p in processes.items()
            }
    return Run(samples, server_cpu_ms)


class InstantBackend(Backend):
    """Answers at once, in process: what remains of a request's time is the core's own."""

    name = "instant"

    def __init__(self, config: EndpointConfig) -> None:
        self.config = config

    async def complete(
        self, request: CompletionRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        yield "compute(a, b)\n"

    async def chat(
        self, request: ChatRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        yield "compute(a, b)\n"

    async def edit(
        self, call: EditCall, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        yield "compute(a, b)\n"


async def core_cpu_ms(requests: int, typing: bool) -> dict[str, list[float]]:
    """CPU per request of the suggestion and next-edit services (assembly, privacy, routing,
    cleaning or minimal edits), the model call answering at once in process. Typing, a
    keystroke before each round; every other round the next edit is prepared first (its CPU
    apart), and the others assemble theirs on the request's path."""
    endpoint = EndpointConfig(
        name="instant",
        kind="inception",
        base_url="http://127.0.0.1:9/v1",
        model="m",
        roles=("inline", "edit"),
    )
    config = Config(
        routing=RoutingConfig(offline="never", context=False),
        local=LocalConfig(enabled=False),
        endpoints=(endpoint,),
    )
    engine = Engine(config, remote_factory=InstantBackend)
    next_edits = NextEditService(engine.router, engine.privacy, prepare_after_s=0.0)
    document = Typing()
    uri = "file:///bench/edits.py"
    next_edits.opened(uri, document.text)
    for line in (3, 40, 90):  # a history of three edits, as a prompt usually carries
        document.keystroke(uri, line)
        next_edits.changed(uri, document.text, line)
    cpu: dict[str, list[float]] = {"inline": [], "edit": []}
    if typing:
        cpu |= {"edit, prepared ahead": [], "the preparation, off the request's path": []}
    try:
        for index in range(requests):
            line = index * 7 % LINES if typing else index % LINES
            if typing:
                document.keystroke(uri, line)
                next_edits.changed(uri, document.text, line)
            source = document.text
            offset = document.offset(line, len(document.lines[line]))
            started = time.process_time()
            await engine.suggestions.suggest(uri=uri, text=source, offset=offset, language="python")
            cpu["inline"].append((time.process_time() - started) * 1000)
            kind = "edit"
            if typing and index % 2:
                started = time.process_time()
                next_edits.prepare(uri=uri, text=source, offset=offset, language="python")
                await asyncio.sleep(PREPARED_WITHIN_S)
                cpu["the preparation, off the request's path"].append(
                    (time.process_time() - started) * 1000
                )
                kind = "edit, prepared ahead"
            started = time.process_time()
            edit = await next_edits.predict(uri=uri, text=source, offset=offset, language="python")
            cpu[kind].append((time.process_time() - started) * 1000)
            if not edit.edits:
                raise RuntimeError("no next edit: the service did not route it")
            engine.cache.invalidate(uri)
    finally:
        next_edits.close()
        await engine.aclose()
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--method", choices=("typing", "static"), default="typing")
    parser.add_argument("--pause-ms", type=float, default=400.0)
    parser.add_argument("--client", choices=("lean", "pygls"), default="lean")
    parser.add_argument("--endpoint-core", choices=("own", "shared"), default="own")
    args = parser.parse_args()
    model_cores = endpoint_cores(args.endpoint_core)
    lean = args.client == "lean"
    method = Method(typing=args.method == "typing", pause_s=args.pause_ms / 1000, lean=lean)
    run_loop = run_on_fastest_loop if lean else asyncio.run
    with tempfile.TemporaryDirectory(prefix="gateway-ls-bench-") as tmp:
        run = run_loop(measure(args.requests, Path(tmp), method, model_cores))
    cpu = run_loop(core_cpu_ms(args.requests, method.typing))
    print(
        f"\nmethod {args.method}"
        + (f", a keystroke and {args.pause_ms:.0f} ms pause a round" if method.typing else "")
        + f"; client {args.client}"
        + (f"; the model stand-in on core {min(model_cores)}" if model_cores else "; cores shared")
    )
    samples = run.samples
    print(f"\n{args.requests} rounds against a zero-latency endpoint, interleaved (ms)\n")
    print(f"{'':<44}{'p50':>9}{'p90':>9}{'p99':>9}")
    for label, values in samples.items():
        print(f"{ROWS[label]:<44}" + "".join(f"{percentile(values, q):>9.2f}" for q in QUANTILES))

    def over(kind: str, upper: str, lower: str) -> list[float]:
        return [
            percentile(samples[f"{kind} {upper}"], q) - percentile(samples[f"{kind} {lower}"], q)
            for q in QUANTILES
        ]

    added = {}
    for kind, name in (("inline", "inline"), ("edit", "next edit")):
        added[kind] = over(kind, "served", "direct")
        rows = (
            (f"{name}: the floor over the model call", over(kind, "floor", "direct")),
            (f"{name}: gateway-ls over the model call", added[kind]),
            (f"{name}: gateway-ls over the floor", over(kind, "served", "floor")),
        )
        for label, values in rows:
            print(f"{label:<44}" + "".join(f"{v:>9.2f}" for v in values))
    edit_over_floor = over("edit", "served", "floor")[0]
    inline_over_floor = over("inline", "served", "floor")[0]
    edit_added = added["edit"][0]
    print(
        f"\nnext edit over the model call at p50: {edit_added:.2f} ms "
        f"(target <= {ADDED_P50_TARGET_MS} ms: {verdict(edit_added <= ADDED_P50_TARGET_MS)}); "
        f"over the floor: {edit_over_floor:.2f} ms "
        f"({verdict(edit_over_floor <= ADDED_P50_TARGET_MS)} over the floor), "
        f"{edit_over_floor - inline_over_floor:.2f} ms beyond the inline path's "
        f"{inline_over_floor:.2f} ms"
    )
    print(
        "CPU per round (an inline suggestion and a next edit), each server process: "
        + ", ".join(f"{name} {ms:.2f} ms" for name, ms in run.server_cpu_ms.items())
    )
    print("\nthe core's own CPU per request, in process, the model answering at once (ms)\n")
    print(f"{'':<44}{'p50':>9}{'p90':>9}{'p99':>9}")
    for kind, values in cpu.items():
        print(f"{kind:<44}" + "".join(f"{percentile(values, q):>9.3f}" for q in QUANTILES))


if __name__ == "__main__":
    main()
