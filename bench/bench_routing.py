"""Routing quality on a replayed trace, and the cost of one routing decision.

Three OpenAI-compatible endpoints run on 127.0.0.1 (`FakeLLMServer`). Every request's latency on
every endpoint is drawn up front (lognormals with different medians, 5 % stragglers at 10x), and
the best endpoint has an outage window in which it answers 503. Before each request the servers
are set to that request's latencies, so every strategy sees the same trace:

- router: the real `Router` (ranking, hedging, breakers) through the real HTTP backend;
- fixed-primary: always the endpoint with the lowest median; its errors reach the user;
- round-robin: the endpoints in turn; errors reach the user;
- oracle: always the endpoint that will answer first (it knows the drawn latencies).

Run from the repository root: `python -m bench.bench_routing [--requests 400] [--seed 7]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import math
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from lsp_server.backends.base import Backend, BackendError, CompletionRequest, Usage
from lsp_server.backends.factory import remote_backend
from lsp_server.config.model import Config, EndpointConfig, LocalConfig, RoutingConfig
from lsp_server.routing.router import Router
from tests.support.fake_llm_server import Behaviour, FakeLLMServer

NAMES = ("alpha", "beta", "gamma")
MEDIANS_MS = (25.0, 45.0, 80.0)
SIGMA = 0.3
STRAGGLER_SHARE = 0.05
STRAGGLER_FACTOR = 10.0
OUTAGE = (0.40, 0.52)  # share of the trace in which the best endpoint answers 503
TEXT = "return a + b\n"
DEADLINE_MS = 3000  # far beyond every drawn latency: this bench is about choice, not deadlines

P50_TARGET = 1.05  # of the oracle's p50
P99_TARGET = 1.3  # of the oracle's p99
DECISION_TARGET_US = 50.0


@dataclass(frozen=True, slots=True)
class Trace:
    latency_s: list[tuple[float, ...]]  # per request, per endpoint
    down: list[tuple[bool, ...]]  # per request, per endpoint: answers 503

    def __len__(self) -> int:
        return len(self.latency_s)

    def fastest_up(self, index: int) -> int:
        up = [j for j in range(len(NAMES)) if not self.down[index][j]]
        return min(up, key=lambda j: self.latency_s[index][j])


def draw_trace(requests: int, rng: random.Random) -> Trace:
    outage = range(int(OUTAGE[0] * requests), int(OUTAGE[1] * requests))
    latencies, down = [], []
    for index in range(requests):
        row = []
        for median in MEDIANS_MS:
            latency = rng.lognormvariate(math.log(median), SIGMA)
            if rng.random() < STRAGGLER_SHARE:
                latency *= STRAGGLER_FACTOR
            row.append(latency / 1000)
        latencies.append(tuple(row))
        down.append(tuple(j == 0 and index in outage for j in range(len(NAMES))))
    return Trace(latencies, down)


def stage(servers: list[FakeLLMServer], trace: Trace, index: int) -> None:
    """Set every server to answer request `index` as the trace says."""
    for j, server in enumerate(servers):
        if trace.down[index][j]:
            server.behaviour = Behaviour(text=TEXT, fault="status:503")
        else:
            server.behaviour = Behaviour(text=TEXT, latency_s=trace.latency_s[index][j])


def request_for(index: int) -> CompletionRequest:
    return CompletionRequest(prefix=f"# request {index}\ndef add(a, b):\n    ", suffix="\n")


# --- strategies ------------------------------------------------------------------------------

Ask = Callable[[int], Awaitable[bool]]  # request index -> answered?


async def ask_backend(backend: Backend, index: int) -> bool:
    try:
        parts = [chunk async for chunk in backend.complete(request_for(index), Usage())]
    except BackendError:
        return False
    return bool(parts)


def fixed_primary(backends: list[Backend]) -> Ask:
    return lambda index: ask_backend(backends[0], index)


def round_robin(backends: list[Backend]) -> Ask:
    return lambda index: ask_backend(backends[index % len(backends)], index)


def oracle(backends: list[Backend], trace: Trace) -> Ask:
    return lambda index: ask_backend(backends[trace.fastest_up(index)], index)


def routed(router: Router) -> Ask:
    async def ask(index: int) -> bool:
        return (await router.inline(request_for(index))).endpoint is not None

    return ask


def router_config(servers: list[FakeLLMServer], hedge_after_ms: int) -> Config:
    endpoints = tuple(
        EndpointConfig(name=name, kind="openai", base_url=server.base_url, model="fake-model")
        for name, server in zip(NAMES, servers, strict=True)
    )
    routing = RoutingConfig(
        inline_deadline_ms=DEADLINE_MS, hedge_after_ms=hedge_after_ms, offline="never"
    )
    return Config(routing=routing, local=LocalConfig(enabled=False), endpoints=endpoints)


def make_router(config: Config) -> Router:
    def no_local(local: LocalConfig) -> Backend:
        raise RuntimeError("the local model is disabled in this benchmark")

    return Router(config, remote_factory=remote_backend, local_factory=no_local)


# --- running ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Result:
    name: str
    latencies_ms: list[float]
    errors: int
    outage_errors: int
    hedged: int | None = None

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


async def replay(name: str, ask: Ask, servers: list[FakeLLMServer], trace: Trace) -> Result:
    latencies, errors, outage_errors = [], 0, 0
    for index in range(len(trace)):
        stage(servers, trace, index)
        started = time.perf_counter()
        answered = await ask(index)
        latencies.append((time.perf_counter() - started) * 1000)
        if not answered:
            errors += 1
            outage_errors += int(any(trace.down[index]))
    return Result(name, latencies, errors, outage_errors)


async def run_strategies(trace: Trace, hedge_after_ms: list[int]) -> list[Result]:
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(FakeLLMServer(name=name)) for name in NAMES]
        config = router_config(servers, hedge_after_ms[0])
        backends = [remote_backend(endpoint) for endpoint in config.endpoints]
        results = []
        try:
            for name, ask in (
                ("oracle", oracle(backends, trace)),
                ("fixed-primary", fixed_primary(backends)),
                ("round-robin", round_robin(backends)),
            ):
                results.append(await replay(name, ask, servers, trace))
            for hedge_ms in hedge_after_ms:
                router = make_router(router_config(servers, hedge_ms))
                try:
                    label = f"router (hedge {hedge_ms} ms)"
                    result = await replay(label, routed(router), servers, trace)
                    result.hedged = router.hedged_requests
                    results.append(result)
                finally:
                    await router.aclose()
        finally:
            for backend in backends:
                await backend.aclose()
    return results


# --- the routing decision alone --------------------------------------------------------------


class Idle(Backend):
    """Never asked: the decision benchmark only ranks and checks breakers."""

    def __init__(self, name: str) -> None:
        self.name = name

    def complete(self, request, usage=None):  # type: ignore[no-untyped-def]
        raise AssertionError("not used")

    def chat(self, request, usage=None):  # type: ignore[no-untyped-def]
        raise AssertionError("not used")


def decision_overhead_us(calls: int, rng: random.Random) -> tuple[float, float]:
    """Median and p99 of one routing decision (ranking, breaker checks, exploration check)."""
    endpoints = tuple(
        EndpointConfig(name=name, kind="openai", base_url="http://127.0.0.1:9/v1", model="m")
        for name in NAMES
    )
    config = Config(local=LocalConfig(enabled=False), endpoints=endpoints)
    router = Router(config, remote_factory=lambda c: Idle(c.name), local_factory=lambda c: Idle(""))
    for endpoint, median in zip(router.pool.remotes.values(), MEDIANS_MS, strict=True):
        for _ in range(200):
            latency = rng.lognormvariate(math.log(median), SIGMA)
            endpoint.stats.record_success(
                first_token_ms=latency, total_ms=latency, tokens=8, won=True
            )
            endpoint.breaker.record_success()
    samples = []
    decision_request = request_for(0)
    gc.disable()
    try:
        for _ in range(calls):
            started = time.perf_counter_ns()
            router._inline_choice(None, decision_request, None)  # the decision, no I/O
            samples.append((time.perf_counter_ns() - started) / 1000)
    finally:
        gc.enable()
    samples.sort()
    return statistics.median(samples), samples[int(0.99 * (len(samples) - 1))]


# --- report ----------------------------------------------------------------------------------


def print_report(results: list[Result], trace: Trace) -> None:
    best = next(r for r in results if r.name == "oracle")
    outage = sum(1 for row in trace.down if any(row))
    print(
        f"\n{len(trace)} requests; medians {', '.join(f'{m:.0f}' for m in MEDIANS_MS)} ms "
        f"(sigma {SIGMA}), {STRAGGLER_SHARE:.0%} stragglers at {STRAGGLER_FACTOR:.0f}x, "
        f"{outage} requests with '{NAMES[0]}' answering 503\n"
    )
    header = (
        f"{'strategy':<24}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'mean':>8}"
        f"{'errors':>8}{'hedged':>8}{'p50/or':>8}{'p99/or':>8}"
    )
    print(header)
    print("-" * len(header))
    for result in results:
        hedged = "-" if result.hedged is None else str(result.hedged)
        print(
            f"{result.name:<24}{result.quantile(0.5):>9.1f}{result.quantile(0.95):>9.1f}"
            f"{result.quantile(0.99):>9.1f}{statistics.fmean(result.latencies_ms):>8.1f}"
            f"{result.errors:>8}{hedged:>8}"
            f"{result.quantile(0.5) / best.quantile(0.5):>8.2f}"
            f"{result.quantile(0.99) / best.quantile(0.99):>8.2f}"
        )
    print()
    for result in results:
        if result.hedged is None:
            continue
        p50 = result.quantile(0.5) / best.quantile(0.5)
        p99 = result.quantile(0.99) / best.quantile(0.99)
        print(f"{result.name}:")
        print(f"  p50 within {P50_TARGET - 1:.0%} of oracle: {_verdict(p50 <= P50_TARGET)}")
        print(f"  p99 <= {P99_TARGET}x oracle p99: {_verdict(p99 <= P99_TARGET)}")
        print(f"  no user-visible errors in the outage: {_verdict(result.outage_errors == 0)}")


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--hedge-after-ms",
        type=int,
        action="append",
        help="router variants to run (repeatable; default: 120, the shipped default, and 40)",
    )
    parser.add_argument("--decision-calls", type=int, default=20_000)
    args = parser.parse_args()
    logging.getLogger("lsp_server").setLevel(logging.ERROR)  # each 503 would log a warning
    logging.getLogger("asyncio").setLevel(logging.ERROR)  # writes to cancelled requests
    rng = random.Random(args.seed)
    trace = draw_trace(args.requests, rng)
    results = asyncio.run(run_strategies(trace, args.hedge_after_ms or [120, 40]))
    print_report(results, trace)
    median_us, p99_us = decision_overhead_us(args.decision_calls, rng)
    print(
        f"\nrouting decision (ranking + breaker checks), {args.decision_calls} calls: "
        f"median {median_us:.1f} us, p99 {p99_us:.1f} us; target <= {DECISION_TARGET_US:.0f} us "
        f"median: {_verdict(median_us <= DECISION_TARGET_US)}"
    )


if __name__ == "__main__":
    main()
