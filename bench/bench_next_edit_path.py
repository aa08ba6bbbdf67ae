"""What the language server adds to a next-edit prediction, beside the inline path.

The real `gateway-ls serve` runs over stdio against a zero-latency `FakeLLMServer` in a process
of its own (as in `bench_lsp_overhead`), configured with one endpoint that serves both roles:
inline completions at Mercury's FIM path and next edits at its edit path. Each round makes
four requests, interleaved so the machine's noise falls on all alike:

- inline, direct: the FIM request through the server's own HTTP backend;
- inline, through the server: `textDocument/inlineCompletion`;
- next edit, direct: the Mercury edit request the server would send (the same prompt, built by
  the same code) through the same backend;
- next edit, through the server: `textDocument/copilotInlineEdit` (region, history, privacy
  over every part, routing, the answer turned into minimal edits, positions).

"Added" is the served p50 minus the direct p50 of the same kind. Wall time on a shared machine
is noisy, so the core's own CPU per request is measured too, in this process: the suggestion
and next-edit services on an endpoint that answers at once without a network (the same answer
bodies), the model call left out.

Run from the repository root: `python -m bench.bench_next_edit_path [--requests 500]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from bench.bench_lsp_overhead import (
    direct_ms,
    initialize,
    quantile,
    running_server,
    through_server_ms,
    zero_latency_endpoint,
)
from lsp_server.backends.base import Backend, ChatRequest, CompletionRequest, EditCall, Usage
from lsp_server.backends.openai_compat import OpenAICompatibleBackend
from lsp_server.config.model import Config, EndpointConfig, LocalConfig, RoutingConfig
from lsp_server.core.engine import Engine
from lsp_server.nextedit.prompts import edit_call
from lsp_server.nextedit.region import editable_region
from lsp_server.nextedit.request import EditRequest

LINES = 400
ADDED_P50_TARGET_MS = 1.0


def config_text(inception_url: str) -> str:
    return (
        "[routing]\ninline_deadline_ms = 5000\nhedge_after_ms = 4000\nedit_deadline_ms = 5000\n"
        "[local]\nenabled = false\n"
        f'[[endpoints]]\nname = "zero"\nkind = "inception"\nbase_url = "{inception_url}"\n'
        'model = "mercury-edit-2"\nroles = ["inline", "edit"]\napi_key_env = "BENCH_KEY"\n'
    )


async def edit_through_server_ms(client: LanguageClient, uri: str, line: int) -> float:
    started = time.perf_counter()
    result = await client.protocol.send_request_async(
        "textDocument/copilotInlineEdit",
        {
            "textDocument": {"uri": uri, "version": 1},
            "position": {"line": line, "character": len(f"value_{line} = ")},
        },
    )
    elapsed = (time.perf_counter() - started) * 1000
    if not result["edits"]:
        raise RuntimeError(f"no next edit on line {line}: the server did not route it")
    return elapsed


async def edit_direct_ms(backend: OpenAICompatibleBackend, request: EditRequest) -> float:
    started = time.perf_counter()
    parts = [chunk async for chunk in backend.edit(edit_call(request, backend.config))]
    elapsed = (time.perf_counter() - started) * 1000
    if not parts:
        raise RuntimeError("the endpoint answered nothing")
    return elapsed


async def measure(requests: int, workdir: Path) -> dict[str, list[float]]:
    with zero_latency_endpoint() as base_url:
        inception_url = base_url.removesuffix("/v1") + "/inception/v1"
        config_path = workdir / "config.toml"
        config_path.write_text(config_text(inception_url), encoding="utf-8")
        os.environ["BENCH_KEY"] = "bench"  # the server inherits it
        async with running_server(config_path, workdir) as client:
            await initialize(client, workdir)
            uri = (workdir / "edits.py").as_uri()
            source = "".join(f"value_{i} = \n" for i in range(LINES))
            client.text_document_did_open(
                types.DidOpenTextDocumentParams(
                    text_document=types.TextDocumentItem(
                        uri=uri, language_id="python", version=1, text=source
                    )
                )
            )
            config = EndpointConfig(
                name="direct",
                kind="inception",
                base_url=inception_url,
                model="mercury-edit-2",
                api_key_env="BENCH_KEY",
            )
            backend = OpenAICompatibleBackend(config)
            samples: dict[str, list[float]] = {
                "inline direct": [],
                "inline served": [],
                "edit direct": [],
                "edit served": [],
            }
            cpu: list[float] = []
            try:
                for index in range(requests):
                    line = index % LINES
                    offset = source.index(f"value_{line} = ") + len(f"value_{line} = ")
                    request = EditRequest(
                        uri=uri,
                        path="edits.py",
                        text=source,
                        cursor=offset,
                        region=editable_region(source, offset),
                    )
                    samples["inline direct"].append(await direct_ms(backend, source[:offset], cpu))
                    samples["inline served"].append(await through_server_ms(client, uri, line))
                    samples["edit direct"].append(await edit_direct_ms(backend, request))
                    samples["edit served"].append(await edit_through_server_ms(client, uri, line))
            finally:
                await backend.aclose()
    return samples


class InstantBackend(Backend):
    """Answers at once, in process: what remains of a request's time is the core's own."""

    name = "instant"

    def __init__(self, config: EndpointConfig) -> None:
        self.config = config

    async def complete(
        self, request: CompletionRequest, usage: Usage | None = None
    ) -> AsyncIterator[str]:
        yield "compute(a, b)\n"

    async def chat(self, request: ChatRequest, usage: Usage | None = None) -> AsyncIterator[str]:
        yield "compute(a, b)\n"

    async def edit(self, call: EditCall, usage: Usage | None = None) -> AsyncIterator[str]:
        yield "compute(a, b)\n"


async def core_cpu_ms(requests: int) -> dict[str, list[float]]:
    """CPU per request of the suggestion and next-edit services (assembly, privacy, routing,
    cleaning or minimal edits), the model call answering at once in process."""
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
    source = "".join(f"value_{i} = \n" for i in range(LINES))
    uri = "file:///bench/edits.py"
    engine.next_edits.opened(uri, source)
    for line in (3, 40, 90):  # a history of three edits, as a prompt usually carries
        source = source.replace(f"value_{line} = ", f"value_{line} = {line}", 1)
        engine.next_edits.changed(uri, source, line)
    cpu: dict[str, list[float]] = {"inline": [], "edit": []}
    try:
        for index in range(requests):
            line = index % LINES
            offset = source.index(f"value_{line} = ") + len(f"value_{line} = ")
            started = time.process_time()
            await engine.suggestions.suggest(uri=uri, text=source, offset=offset, language="python")
            cpu["inline"].append((time.process_time() - started) * 1000)
            started = time.process_time()
            edit = await engine.next_edits.predict(
                uri=uri, text=source, offset=offset, language="python"
            )
            cpu["edit"].append((time.process_time() - started) * 1000)
            if not edit.edits:
                raise RuntimeError("no next edit: the service did not route it")
            engine.cache.invalidate(uri)
    finally:
        await engine.aclose()
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gateway-ls-bench-") as tmp:
        samples = asyncio.run(measure(args.requests, Path(tmp)))
    cpu = asyncio.run(core_cpu_ms(args.requests))
    print(f"\n{args.requests} rounds against a zero-latency endpoint, interleaved (ms)\n")
    print(f"{'':<36}{'p50':>9}{'p90':>9}{'p99':>9}")
    for label, values in samples.items():
        print(
            f"{label:<36}{quantile(values, 0.5):>9.2f}{quantile(values, 0.9):>9.2f}"
            f"{quantile(values, 0.99):>9.2f}"
        )
    for kind in ("inline", "edit"):
        added = [
            quantile(samples[f"{kind} served"], q) - quantile(samples[f"{kind} direct"], q)
            for q in (0.5, 0.9, 0.99)
        ]
        print(f"{'added by the server, ' + kind:<36}" + "".join(f"{v:>9.2f}" for v in added))
    edit_added = quantile(samples["edit served"], 0.5) - quantile(samples["edit direct"], 0.5)
    inline_added = quantile(samples["inline served"], 0.5) - quantile(samples["inline direct"], 0.5)
    print(
        f"\nnext edit over the model call at p50: {edit_added:.2f} ms "
        f"(target {ADDED_P50_TARGET_MS} ms); the inline path's: {inline_added:.2f} ms; "
        f"the edit path's own beyond the inline path's: {edit_added - inline_added:.2f} ms"
    )
    print("\nthe core's own CPU per request, in process, the model answering at once (ms)\n")
    print(f"{'':<36}{'p50':>9}{'p90':>9}{'p99':>9}")
    for kind, values in cpu.items():
        print(
            f"{kind:<36}{quantile(values, 0.5):>9.3f}{quantile(values, 0.9):>9.3f}"
            f"{quantile(values, 0.99):>9.3f}"
        )


if __name__ == "__main__":
    main()
