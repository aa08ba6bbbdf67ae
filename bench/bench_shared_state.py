"""What sharing routing state through Redis costs a keystroke, and how fast an outage travels.

Needs `redis-server` (the Debian package; `make redis-server` installs it). A real redis-server is
started on a free loopback port, without persistence.

1. Keystroke-path overhead, in-process: the real `Router` in front of two endpoints that answer
   at once (in-process backends, so only the router's own cost is measured), with shared state
   off, on (a `RedisLink` connected and sending), and on with Redis frozen (SIGSTOP: connections
   accepted, nothing answered). The three run interleaved in blocks, so load on the machine moves
   all of them alike. What matters is the difference of the medians.
2. Propagation, in-process: two routers with their own Redis connections; one opens a breaker
   (three failures), and the time until the other holds it open is measured, with pub/sub (what
   ships) and, as the alternative, the other side reading the breaker key every 100 ms.
3. Propagation between two `gateway-ls gateway` processes: an outage (503) seen through one, the
   time until the other's status shows the breaker open (its status polled every 5 ms).

Run from the repository root: `python -m bench.bench_shared_state [--requests 6000] [--runs 40]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import redis.asyncio

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from bench.harness.percentile import percentile
from bench.harness.processes import free_port, process
from bench.harness.redis_server import RedisServer
from lsp_server.backends.base import (
    Backend,
    BackendError,
    ChatRequest,
    CompletionRequest,
    Usage,
)
from lsp_server.config.model import Config, EndpointConfig, LocalConfig, RoutingConfig
from lsp_server.failures import FailureKind
from lsp_server.permit import Permit
from lsp_server.routing.circuit_breaker import BreakerState
from lsp_server.routing.redis_link import RedisLink, breaker_key
from lsp_server.routing.router import Router

TARGET_ADDED_P50_MS = 0.2
TARGET_PROPAGATION_S = 1.0
POLL_EVERY_S = 0.1
BLOCK = 200
REQUEST = CompletionRequest(prefix="def add(a, b):\n    ", suffix="\n\nprint(add(1, 2))\n")


class Instant(Backend):
    """Answers at once, or fails at once while `failing` is set."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.failing = False

    async def complete(
        self, request: CompletionRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        if self.failing:
            raise BackendError(self.name, FailureKind.SERVER, "503")
        yield "return a + b\n"

    async def chat(
        self, request: ChatRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        yield "unused"


def make_router() -> tuple[Router, dict[str, Instant]]:
    backends = {name: Instant(name) for name in ("alpha", "beta")}
    config = Config(
        routing=RoutingConfig(inline_deadline_ms=2000, hedge_after_ms=1000, offline="never"),
        local=LocalConfig(enabled=False),
        endpoints=tuple(
            EndpointConfig(name=n, kind="openai", base_url="http://127.0.0.1:9/v1", model="m")
            for n in backends
        ),
    )
    router = Router(
        config,
        remote_factory=lambda c: backends[c.name],
        local_factory=lambda c: (_ for _ in ()).throw(AssertionError("no local model")),
    )
    return router, backends


# --- 1. overhead ---------------------------------------------------------------------------


async def overhead(server: RedisServer, requests: int) -> list[tuple[str, list[float]]]:
    off, _ = make_router()
    on, _ = make_router()
    frozen, _ = make_router()
    on_link = RedisLink(server.url, None, on.share_state())
    with RedisServer() as frozen_server:
        frozen_link = RedisLink(frozen_server.url, None, frozen.share_state())
        on_link.start()
        frozen_link.start()
        while not (on_link.connected and frozen_link.connected):
            await asyncio.sleep(0.01)
        assert frozen_server.process is not None
        os.kill(frozen_server.process.pid, signal.SIGSTOP)
        try:
            rows = {"shared state off": off, "on, Redis up": on, "on, Redis frozen": frozen}
            samples: dict[str, list[float]] = {name: [] for name in rows}
            for _ in range(max(1, requests // BLOCK)):
                for name, router in rows.items():
                    for _ in range(BLOCK):
                        started = time.perf_counter()
                        await router.inline(REQUEST)
                        samples[name].append((time.perf_counter() - started) * 1000)
                    await asyncio.sleep(0.001)  # let the links' background work run
            print(f"  (link sent {on_link.sent} updates; frozen link connected: "
                  f"{frozen_link.connected})")  # fmt: skip
        finally:
            os.kill(frozen_server.process.pid, signal.SIGCONT)
            await on_link.stop()
            await frozen_link.stop()
    return list(samples.items())


# --- 2. propagation in-process -------------------------------------------------------------


async def propagation_in_process(server: RedisServer, runs: int) -> dict[str, list[float]]:
    seen_by: dict[str, list[float]] = {"pub/sub (shipped)": [], "key read every 100 ms": []}
    first, first_backends = make_router()
    second, _ = make_router()
    first_link = RedisLink(server.url, None, first.share_state())
    second_link = RedisLink(server.url, None, second.share_state())
    poller = redis.asyncio.Redis.from_url(server.url)
    first_link.start()
    second_link.start()
    try:
        while not (first_link.connected and second_link.connected):
            await asyncio.sleep(0.01)
        alpha_there = second.pool.remotes["alpha"].breaker
        for _ in range(runs):
            first_backends["alpha"].failing = True
            while first.pool.remotes["alpha"].breaker.state is not BreakerState.OPEN:
                await first.inline(REQUEST, pinned="alpha")
            opened = time.perf_counter()
            polled = asyncio.create_task(_poll_key(poller, breaker_key("alpha"), opened))
            await _until(lambda: alpha_there.state, BreakerState.OPEN, pause_s=0)
            seen_by["pub/sub (shipped)"].append(time.perf_counter() - opened)
            seen_by["key read every 100 ms"].append(await polled)
            # recovery: the first's probe succeeds, the close travels, both start afresh
            first_backends["alpha"].failing = False
            await asyncio.sleep(first.pool.remotes["alpha"].breaker.retry_in_s + 0.01)
            await first.inline(REQUEST, pinned="alpha")
            await _until(lambda: alpha_there.state, BreakerState.CLOSED, pause_s=0.001)
            await poller.delete(breaker_key("alpha"))
    finally:
        await first_link.stop()
        await second_link.stop()
        await poller.aclose()
    return seen_by


async def _poll_key(client: redis.asyncio.Redis, key: str, since: float) -> float:
    """The alternative design: read the breaker key on a fixed interval, started at a random
    phase relative to the opening, as an independent poller would be."""
    await asyncio.sleep(POLL_EVERY_S * (time.perf_counter() * 7919 % 1.0))
    while (await client.pttl(key)) <= 0:
        await asyncio.sleep(POLL_EVERY_S)
    return time.perf_counter() - since


# --- 3. propagation between gateway processes ----------------------------------------------


@contextlib.contextmanager
def gateway_process(workdir: Path, config: str) -> Iterator[str]:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.toml").write_text(config, encoding="utf-8")
    port = free_port()
    args = [sys.executable, "-m", "lsp_server", "gateway", "--config", str(workdir / "config.toml")]
    url = f"http://127.0.0.1:{port}"
    with process([*args, "--port", str(port)], f"{url}/healthz", workdir / "gateway.log"):
        yield url


def propagation_between_processes(server: RedisServer, runs: int) -> list[float]:
    samples: list[float] = []
    with (
        FakeLLMServer(Behaviour(text="return a + b\n"), name="alpha") as alpha,
        FakeLLMServer(Behaviour(text="return b + a\n", latency_s=0.05), name="beta") as beta,
        tempfile.TemporaryDirectory() as directory,
    ):
        config = (
            "[routing]\ninline_deadline_ms = 3000\nhedge_after_ms = 1000\n"
            f'[local]\nenabled = false\n[gateway]\nstate_url = "{server.url}"\n'
        )
        for endpoint in (alpha, beta):
            config += (
                f'[[endpoints]]\nname = "{endpoint.name}"\nkind = "openai"\n'
                f'base_url = "{endpoint.base_url}"\nmodel = "fake-model"\n'
            )
        with (
            gateway_process(Path(directory) / "a", config) as first,
            gateway_process(Path(directory) / "b", config) as second,
            httpx.Client(timeout=10) as client,
        ):
            _wait(lambda: _connected(client, first) and _connected(client, second), 10)
            for _ in range(runs):
                alpha.behaviour = Behaviour(fault="status:503", retry_after="1")
                while _health(client, first, "alpha") != "open":
                    client.post(f"{first}/v1/completions", json=_body())
                opened = time.perf_counter()
                _wait(lambda: _health(client, second, "alpha") == "open", 5, every_s=0.005)
                samples.append(time.perf_counter() - opened)
                alpha.behaviour = Behaviour(text="return a + b\n")
                _wait(lambda: _health(client, second, "alpha") != "open", 5, every_s=0.05)
                _wait(lambda: _health(client, first, "alpha") != "open", 5, every_s=0.05)
    return samples


async def _until(state: Callable[[], BreakerState], wanted: BreakerState, pause_s: float) -> None:
    while state() is not wanted:
        await asyncio.sleep(pause_s)


def _body() -> dict[str, Any]:
    return {"model": "alpha", "prompt": REQUEST.prefix, "suffix": REQUEST.suffix, "max_tokens": 8}


def _status(client: httpx.Client, url: str) -> dict[str, Any]:
    status: dict[str, Any] = client.get(f"{url}/v1/gateway-ls/status").json()
    return status


def _connected(client: httpx.Client, url: str) -> bool:
    shared = _status(client, url)["shared_state"]
    return bool(shared["connected"]) and shared["peers"] == 1


def _health(client: httpx.Client, url: str, name: str) -> str:
    return next(str(e["health"]) for e in _status(client, url)["endpoints"] if e["name"] == name)


def _wait(predicate: Callable[[], bool], timeout_s: float, every_s: float = 0.01) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError("timed out")
        time.sleep(every_s)


# --- report --------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=6000, help="keystrokes per row")
    parser.add_argument("--runs", type=int, default=40, help="outages for propagation")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the frozen link's one warning is expected
    with RedisServer() as server:
        print(f"1. keystroke path: Router.inline, {args.requests} requests per row, in-process")
        rows = asyncio.run(overhead(server, args.requests))
        base = statistics.median(rows[0][1])
        print(f"{'':20} {'p50 ms':>8} {'p99 ms':>8} {'added p50 ms':>13}")
        for name, samples in rows:
            p50 = statistics.median(samples)
            print(f"{name:20} {p50:8.4f} {percentile(samples, 0.99):8.4f} {p50 - base:13.4f}")
        worst_added = max(statistics.median(s) - base for _, s in rows[1:])
        verdict = "met" if worst_added < TARGET_ADDED_P50_MS else "NOT met"
        print(f"target: under {TARGET_ADDED_P50_MS} ms added at p50: {verdict}\n")

        print(f"2. propagation of a breaker opening, in-process, {args.runs} outages")
        spread = asyncio.run(propagation_in_process(server, args.runs))
        _print_propagation(spread)

        runs = max(5, args.runs // 4)
        print(f"3. propagation between two gateway processes, {runs} outages (status polled 5 ms)")
        between = propagation_between_processes(server, runs)
        _print_propagation({"pub/sub (shipped)": between})


def _print_propagation(rows: dict[str, list[float]]) -> None:
    print(f"{'':24} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for name, samples in rows.items():
        ms = [s * 1000 for s in samples]
        print(f"{name:24} {statistics.median(ms):8.2f} {percentile(ms, 0.95):8.2f} {max(ms):8.2f}")
    shipped = max(rows["pub/sub (shipped)"])
    verdict = "met" if shipped < TARGET_PROPAGATION_S else "NOT met"
    print(f"target: under {TARGET_PROPAGATION_S:.0f} s (worst run): {verdict}\n")


if __name__ == "__main__":
    main()
