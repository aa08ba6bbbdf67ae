"""`gateway-ls gateway` with probes for `bench_team --trace`: how late its event loop woke,
each pass of the cyclic collector, and when each numbered request reached the app and its
answer left it, written to the file named by `GATEWAY_PROBE_TRACE`.

Bench-only: the gateway's own code is not changed. A task sleeps `PROBE_EVERY_S` at a time and
notes every wake-up more than `LATE_MS` late (the loop was busy, or waited for a core); a
`gc.callbacks` hook notes each pass of the middle and oldest generations and every pass that
took longer than `LATE_MS`. Lines: `lag <monotonic s> <ms>` and `gc <monotonic s> <generation>
<ms>`, the clock the bench's own processes read (CLOCK_MONOTONIC, one per machine).

Run as `python -m bench.probed_gateway <gateway-ls arguments>`.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import time
from collections.abc import Coroutine
from typing import IO, Any, TypeVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

import lsp_server.cli.gateway as gateway_command
from lsp_server.cli.main import main
from lsp_server.event_loop import run_on_fastest_loop
from lsp_server.gateway.app import create_app

T = TypeVar("T")
PROBE_EVERY_S = 0.002
LATE_MS = 1.0


def probed(trace: IO[str]) -> Any:
    def run(main_coroutine: Coroutine[Any, Any, T]) -> T:
        async def with_probe() -> T:
            task = asyncio.get_running_loop().create_task(_loop_lag(trace))
            try:
                return await main_coroutine
            finally:
                task.cancel()

        return run_on_fastest_loop(with_probe())

    return run


async def _loop_lag(trace: IO[str]) -> None:
    while True:
        asked = time.monotonic()
        await asyncio.sleep(PROBE_EVERY_S)
        woke = time.monotonic()
        late_ms = (woke - asked - PROBE_EVERY_S) * 1000
        if late_ms > LATE_MS:
            trace.write(f"lag {asked:.6f} {late_ms:.3f}\n")


def _collections(trace: IO[str]) -> None:
    started = [0.0]

    def hook(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.monotonic()
            return
        took_ms = (time.monotonic() - started[0]) * 1000
        if info["generation"] > 0 or took_ms > LATE_MS:
            trace.write(f"gc {started[0]:.6f} {info['generation']} {took_ms:.3f}\n")

    gc.callbacks.append(hook)


def traced(app: ASGIApp, trace: IO[str]) -> ASGIApp:
    """`app`, noting for each request the bench numbered (`x-bench-seq`) when it reached the
    app, when its answer's first and last bytes were handed to the server: `req <seq> <s> <s>
    <s>`."""

    async def call(scope: Scope, receive: Receive, send: Send) -> None:
        seq = (
            dict(scope.get("headers") or ()).get(b"x-bench-seq")
            if scope["type"] == "http"
            else None
        )
        if seq is None:
            await app(scope, receive, send)
            return
        entered, times = time.monotonic(), [0.0, 0.0]

        async def sending(message: Message) -> None:
            await send(message)
            if message["type"] == "http.response.body":
                now = time.monotonic()
                times[0] = times[0] or now
                if not message.get("more_body"):
                    times[1] = now

        try:
            await app(scope, receive, sending)
        finally:
            trace.write(f"req {seq.decode()} {entered:.6f} {times[0]:.6f} {times[1]:.6f}\n")

    return call


if __name__ == "__main__":
    output = open(os.environ["GATEWAY_PROBE_TRACE"], "a", buffering=1)  # noqa: SIM115
    _collections(output)
    # The gateway command's own loop, probed, and its app traced.
    gateway_command.run_on_fastest_loop = probed(output)  # type: ignore[attr-defined]

    def traced_app(*args: Any, **options: Any) -> ASGIApp:
        return traced(create_app(*args, **options), output)

    gateway_command.create_app = traced_app  # type: ignore[attr-defined,assignment]
    raise SystemExit(main(sys.argv[1:]))
