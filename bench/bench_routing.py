"""Routing quality from a cold start on a replayed trace, and the cost of one routing decision.

Three OpenAI-compatible endpoints run as processes of their own on 127.0.0.1
(`bench.harness.fake_llm_server --profile`). Every request's latency on every endpoint is drawn up
front (lognormals with different medians, 5 % stragglers at 10x); the best endpoint has an outage
in which it answers 503, and the trace goes on after it, so recovery shows. Each endpoint reads
the latency of a request from its profile by the request's number in the prompt, so every
strategy, in this process or another, sees exactly the same trace:

- oracle: always the endpoint that will answer first (it knows the drawn latencies);
- HTTP floor: the same requests to an endpoint with no latency at all (the cost of the wire);
- fixed-primary and round-robin, for scale (their errors reach the user);
- router: a new `Router` (no history), through the real HTTP backend, in this process;
- gateway: a new `gateway-ls gateway` process (empty state dir), over HTTP;
- LiteLLM: `litellm.Router(routing_strategy="latency-based-routing")` in a throwaway virtual
  environment the bench creates (LiteLLM is not a project dependency), over the same trace;
- ideal hedger, computed rather than run: what the best router without foresight could do. It
  knows every endpoint's true distribution, asks the best one that is up, hedges at its true
  p95 to the next best, and pays no overhead but the HTTP floor's. It bounds what hedging can
  reach on this trace: the oracle knows which request will straggle, no router does.

Recovery: requests after the outage ends until the best endpoint serves again.

Run from the repository root: `python -m bench.bench_routing [--requests 300] [--seed 7]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import httpx
import platformdirs

from bench.harness.endpoints import fake_endpoint
from bench.harness.percentile import percentile
from bench.harness.permits import permit_for
from bench.harness.processes import ROOT, free_port, process
from lsp_server.backends.base import (
    Backend,
    BackendError,
    ChatRequest,
    CompletionRequest,
    Usage,
)
from lsp_server.backends.factory import remote_backend
from lsp_server.config.model import Config, EndpointConfig, LocalConfig, RoutingConfig
from lsp_server.permit import Permit
from lsp_server.routing.inline_race import completion_race
from lsp_server.routing.router import Router

NAMES = ("alpha", "beta", "gamma")
MEDIANS_MS = (25.0, 45.0, 80.0)
SIGMA = 0.3
STRAGGLER_SHARE = 0.05
STRAGGLER_FACTOR = 10.0
OUTAGE = (0.40, 0.52)  # share of the trace in which the best endpoint answers 503
TEXT = "return a + b\n"
DEADLINE_MS = 3000  # far beyond every drawn latency: this bench is about choice, not deadlines
HEDGE_AFTER_MS = 120  # the shipped default
LITELLM_REQUIREMENT = "litellm"

P50_TARGET = 1.10  # of the oracle's p50
P99_TARGET = 1.4  # of the oracle's p99
RECOVERY_TARGET = 10  # requests
GATEWAY_TAIL_TARGET = 1.10  # the gateway's p99 against the in-process router's
DECISION_TARGET_US = 50.0
LAG_PROBE_INTERVAL_S = 0.02


@dataclass(frozen=True, slots=True)
class Trace:
    latency_s: list[tuple[float, ...]]  # per request, per endpoint
    down: list[tuple[bool, ...]]  # per request, per endpoint: answers 503
    outage_end: int  # the first request after the outage

    def __len__(self) -> int:
        return len(self.latency_s)

    def fastest_up(self, index: int) -> int:
        up = [j for j in range(len(NAMES)) if not self.down[index][j]]
        return min(up, key=lambda j: self.latency_s[index][j])

    def profile(self, endpoint: int) -> list[float | None]:
        return [
            None if self.down[i][endpoint] else round(self.latency_s[i][endpoint] * 1000, 3)
            for i in range(len(self))
        ]


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
    return Trace(latencies, down, outage.stop)


def prompt_for(index: int) -> str:
    return f"# request {index}\ndef add(a, b):\n    "


def request_for(index: int) -> CompletionRequest:
    return CompletionRequest(prefix=prompt_for(index), suffix="\n")


# --- endpoint processes ----------------------------------------------------------------------


@contextlib.contextmanager
def endpoint_processes(trace: Trace, workdir: Path) -> Iterator[list[str]]:
    """The three profiled endpoints and the zero-latency floor; yields their base URLs."""
    with contextlib.ExitStack() as stack:
        urls = []
        for j, name in enumerate([*NAMES, "floor"]):
            port = free_port()
            options = ["--model", f"{name}-model"]
            if name != "floor":
                profile = workdir / f"{name}.json"
                profile.write_text(json.dumps(trace.profile(j)), encoding="utf-8")
                options += ["--profile", str(profile)]
            stack.enter_context(fake_endpoint(port, TEXT, extra=tuple(options)))
            urls.append(f"http://127.0.0.1:{port}/v1")
        yield urls


# --- strategies ------------------------------------------------------------------------------

Ask = Callable[[int], Awaitable[str | None]]  # request index -> the endpoint that answered


def endpoint_configs(urls: list[str]) -> tuple[EndpointConfig, ...]:
    return tuple(
        EndpointConfig(name=name, kind="openai", base_url=url, model=f"{name}-model")
        for name, url in zip(NAMES, urls, strict=False)
    )


async def ask_backend(backend: Backend, index: int) -> str | None:
    try:
        answer = backend.complete(request_for(index), Usage(), permit=permit_for(backend))
        parts = [chunk async for chunk in answer]
    except BackendError:
        return None
    return backend.name if parts else None


def direct(backends: list[Backend], pick: Callable[[int], int]) -> Ask:
    return lambda index: ask_backend(backends[pick(index)], index)


def routed(router: Router) -> Ask:
    async def ask(index: int) -> str | None:
        return (await router.inline(request_for(index))).endpoint

    return ask


def through_gateway(client: httpx.AsyncClient) -> Ask:
    async def ask(index: int) -> str | None:
        body: dict[str, str | int] = {"model": "gateway-ls", "prompt": prompt_for(index)}
        body |= {"suffix": "\n", "max_tokens": 16}
        try:
            response = await client.post("/v1/completions", json=body)
        except httpx.HTTPError:
            return None
        if response.status_code != 200 or not response.json()["choices"][0]["text"]:
            return None
        return str(response.json().get("model"))

    return ask


def router_config(urls: list[str]) -> Config:
    routing = RoutingConfig(
        inline_deadline_ms=DEADLINE_MS, hedge_after_ms=HEDGE_AFTER_MS, offline="never"
    )
    return Config(
        routing=routing, local=LocalConfig(enabled=False), endpoints=endpoint_configs(urls)
    )


def make_router(config: Config) -> Router:
    return Router(config, remote_factory=remote_backend, local_factory=no_local)


def no_local(local: LocalConfig) -> NoReturn:
    raise RuntimeError("the local model is disabled in this benchmark")


def gateway_config_toml(urls: list[str]) -> str:
    lines = [
        "[routing]",
        f"inline_deadline_ms = {DEADLINE_MS}",
        f"hedge_after_ms = {HEDGE_AFTER_MS}",
        'offline = "never"',
        "[local]",
        "enabled = false",
    ]
    for name, url in zip(NAMES, urls, strict=False):
        lines += ["[[endpoints]]", f'name = "{name}"', 'kind = "openai"']
        lines += [f'base_url = "{url}"', f'model = "{name}-model"', 'roles = ["inline"]']
    return "\n".join(lines) + "\n"


# --- running ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Result:
    name: str
    latencies_ms: list[float]
    served: list[str | None]
    errors: int
    hedged: int | None = None

    def quantile(self, q: float) -> float:
        return percentile(self.latencies_ms, q)

    def recovery(self, trace: Trace) -> int | None:
        """Requests after the outage until the best endpoint answers again (1: the first)."""
        best = NAMES[0]
        for offset, served in enumerate(self.served[trace.outage_end :]):
            if served is not None and served.startswith(best):
                return offset + 1
        return None


async def replay(name: str, ask: Ask, trace: Trace) -> Result:
    latencies, served, errors = [], [], 0
    for index in range(len(trace)):
        started = time.perf_counter()
        answered = await ask(index)
        latencies.append((time.perf_counter() - started) * 1000)
        served.append(answered)
        errors += int(answered is None)
    return Result(name, latencies, served, errors)


async def run_in_process(trace: Trace, urls: list[str]) -> list[Result]:
    config = router_config(urls)
    backends = [remote_backend(endpoint) for endpoint in config.endpoints]
    floor = remote_backend(EndpointConfig(name="floor", kind="openai", base_url=urls[3], model="m"))
    results = []
    try:
        for backend in [*backends, floor]:  # connected, as the router connects its own
            await ask_backend(backend, len(trace) + 1)
        for label, ask in (
            ("oracle", direct(backends, trace.fastest_up)),
            ("HTTP floor", direct([floor], lambda index: 0)),
            ("fixed-primary", direct(backends, lambda index: 0)),
            ("round-robin", direct(backends, lambda index: index % len(backends))),
        ):
            results.append(await replay(label, ask, trace))
        router = make_router(config)  # cold: no history, connects now
        try:
            result = await replay("router, in-process", routed(router), trace)
            result.hedged = router.budget.hedged_requests
            results.append(result)
        finally:
            await router.aclose()
    finally:
        for backend in [*backends, floor]:
            await backend.aclose()
    return results


async def probe_health(base: str, samples: list[float], stop: asyncio.Event) -> None:
    """`GET /healthz` every `LAG_PROBE_INTERVAL_S` on a connection of its own: the route does
    no work, so its time beyond an idle gateway's is the event loop's lag (work a keystroke
    would wait behind)."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        while not stop.is_set():
            started = time.perf_counter()
            await client.get("/healthz")
            samples.append((time.perf_counter() - started) * 1000)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), LAG_PROBE_INTERVAL_S)


def print_lag(idle: list[float], busy: list[float]) -> None:
    def q(samples: list[float], share: float) -> float:
        ordered = sorted(samples)
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))]

    print(
        f"\ngateway /healthz every {LAG_PROBE_INTERVAL_S * 1000:.0f} ms (ms): idle p50 "
        f"{q(idle, 0.5):.2f}, p99 {q(idle, 0.99):.2f}; during the trace ({len(busy)} probes) "
        f"p50 {q(busy, 0.5):.2f}, p99 {q(busy, 0.99):.2f}, max {max(busy):.2f}"
    )


def run_gateway(trace: Trace, urls: list[str], workdir: Path, *, lag: bool = False) -> Result:
    config = workdir / "gateway.toml"
    config.write_text(gateway_config_toml(urls), encoding="utf-8")
    port = free_port()
    env = {**os.environ, "XDG_STATE_HOME": str(workdir / "state"), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "lsp_server", "--config", str(config), "gateway"]
    command += ["--port", str(port)]
    base = f"http://127.0.0.1:{port}"
    with process(command, f"{base}/v1/models", env=env):

        async def run() -> Result:
            idle: list[float] = []
            busy: list[float] = []
            if lag:
                stop = asyncio.Event()
                probe = asyncio.create_task(probe_health(base, idle, stop))
                await asyncio.sleep(LAG_PROBE_INTERVAL_S * 50)
                stop.set()
                await probe
                stop.clear()
                probe = asyncio.create_task(probe_health(base, busy, stop))
            async with httpx.AsyncClient(base_url=base, timeout=30) as client:
                result = await replay("gateway (process)", through_gateway(client), trace)
            if lag:
                stop.set()
                await probe
                print_lag(idle, busy)
            return result

        return asyncio.run(run())


# --- LiteLLM, the peer -----------------------------------------------------------------------

LITELLM_DRIVER = """
import asyncio, json, sys, time
import litellm
from litellm import Router

spec = json.load(sys.stdin)
litellm.suppress_debug_info = True
router = Router(
    model_list=[
        {"model_name": "fim", "litellm_params": {
            "model": "openai/" + d["model"], "api_base": d["base_url"], "api_key": "unused"}}
        for d in spec["deployments"]
    ],
    routing_strategy="latency-based-routing",
    num_retries=2,
)

async def main():
    rows = []
    for index in range(spec["requests"]):
        started = time.perf_counter()
        served = None
        try:
            response = await router.acompletion(
                model="fim",
                messages=[{"role": "user", "content": spec["prompt"].format(index=index)}],
                max_tokens=16,
            )
            if response.choices[0].message.content:
                served = response.model
        except Exception:
            served = None
        rows.append([(time.perf_counter() - started) * 1000, served])
    print(json.dumps(rows))

asyncio.run(main())
"""


def litellm_python() -> Path | None:
    """A virtual environment with LiteLLM, made once in the user cache dir; None if it cannot
    be had (no network to the package index, no venv module)."""
    venv = platformdirs.user_cache_path("gateway-ls-bench") / "litellm-venv"
    python = venv / "bin" / "python"
    check = [str(python), "-c", "import litellm"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return python
    print(f"installing LiteLLM for this benchmark only, into {venv} ...", file=sys.stderr)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
        install = [str(python), "-m", "pip", "install", "--quiet", LITELLM_REQUIREMENT]
        subprocess.run(install, check=True, capture_output=True, timeout=900)
    except (OSError, subprocess.SubprocessError):
        return None
    return python if subprocess.run(check, capture_output=True).returncode == 0 else None


def run_litellm(trace: Trace, urls: list[str], python: Path) -> Result | None:
    spec = {
        "deployments": [
            {"model": f"{name}-model", "base_url": url}
            for name, url in zip(NAMES, urls, strict=False)
        ],
        "requests": len(trace),
        "prompt": prompt_for(0).replace("0", "{index}", 1),
    }
    env = {**os.environ, "LITELLM_LOG": "ERROR", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    completed = subprocess.run(
        [str(python), "-c", LITELLM_DRIVER],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    if completed.returncode != 0:
        print(f"LiteLLM run failed: {completed.stderr.strip()[-400:]}", file=sys.stderr)
        return None
    rows = json.loads(completed.stdout.strip().splitlines()[-1])
    served = [row[1] for row in rows]
    return Result(
        "LiteLLM latency-based",
        [row[0] for row in rows],
        served,
        sum(1 for s in served if s is None),
    )


# --- the ideal hedger ------------------------------------------------------------------------

IDEAL_HEDGE_Z = 1.645  # the primary's true p95: the ideal hedger asks the next best from there


def ideal_hedger(trace: Trace, floor: Result) -> Result:
    """Latencies of the ideal hedger (see the module docstring), with each request's wire cost
    taken from the HTTP floor's measurement of the same request."""
    latencies: list[float] = []
    served: list[str | None] = []
    for index in range(len(trace)):
        up = [j for j in range(len(NAMES)) if not trace.down[index][j]]
        primary, backup = up[0], up[1]
        hedge_at_ms = MEDIANS_MS[primary] * math.exp(IDEAL_HEDGE_Z * SIGMA)
        first_ms = trace.latency_s[index][primary] * 1000
        hedged_ms = hedge_at_ms + trace.latency_s[index][backup] * 1000
        winner = backup if hedged_ms < first_ms else primary
        latencies.append(min(first_ms, hedged_ms) + floor.latencies_ms[index])
        served.append(NAMES[winner])
    return Result("ideal hedger (computed)", latencies, served, 0)


# --- the routing decision alone --------------------------------------------------------------


class Idle(Backend):
    """Never asked: the decision benchmark only ranks and checks breakers."""

    def __init__(self, name: str) -> None:
        self.name = name

    def complete(
        self, request: CompletionRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        raise AssertionError("not used")

    def chat(
        self, request: ChatRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        raise AssertionError("not used")


def decision_overhead_us(calls: int, rng: random.Random) -> tuple[float, float]:
    """Median and p99 of one routing decision (ranking, Thompson draws, breaker checks)."""
    endpoints = tuple(
        EndpointConfig(name=name, kind="openai", base_url="http://127.0.0.1:9/v1", model="m")
        for name in NAMES
    )
    config = Config(local=LocalConfig(enabled=False), endpoints=endpoints)
    router = Router(config, remote_factory=lambda c: Idle(c.name), local_factory=no_local)
    for endpoint, median in zip(router.pool.remotes.values(), MEDIANS_MS, strict=True):
        for _ in range(200):
            latency = rng.lognormvariate(math.log(median), SIGMA)
            endpoint.stats.record_success(
                first_token_ms=latency, total_ms=latency, tokens=8, won=True
            )
            endpoint.breaker.record_success()
    samples = []
    decision_request = completion_race(request_for(0))
    gc.disable()
    try:
        for _ in range(calls):
            started = time.perf_counter_ns()
            router.races._race_choice(decision_request, None, None)  # the decision, no I/O
            samples.append((time.perf_counter_ns() - started) / 1000)
    finally:
        gc.enable()
    samples.sort()
    return statistics.median(samples), samples[int(0.99 * (len(samples) - 1))]


# --- report ----------------------------------------------------------------------------------


def print_report(results: list[Result], trace: Trace, litellm_missing: str | None) -> None:
    best = next(r for r in results if r.name == "oracle")
    outage = sum(1 for row in trace.down if any(row))
    print(
        f"\n{len(trace)} requests from a cold start; medians "
        f"{', '.join(f'{m:.0f}' for m in MEDIANS_MS)} ms (sigma {SIGMA}), "
        f"{STRAGGLER_SHARE:.0%} stragglers at {STRAGGLER_FACTOR:.0f}x, {outage} requests with "
        f"'{NAMES[0]}' answering 503, then {len(trace) - trace.outage_end} after it\n"
    )
    header = (
        f"{'strategy':<24}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}{'mean':>8}{'errors':>8}"
        f"{'hedged':>8}{'p50/or':>8}{'p95/or':>8}{'p99/or':>8}{'recov':>7}"
    )
    print(header)
    print("-" * len(header))
    for result in results:
        hedged = "-" if result.hedged is None else str(result.hedged)
        recovery = result.recovery(trace) if result.name not in ("oracle", "HTTP floor") else None
        print(
            f"{result.name:<24}{result.quantile(0.5):>8.1f}{result.quantile(0.95):>8.1f}"
            f"{result.quantile(0.99):>8.1f}{statistics.fmean(result.latencies_ms):>8.1f}"
            f"{result.errors:>8}{hedged:>8}"
            f"{result.quantile(0.5) / best.quantile(0.5):>8.2f}"
            f"{result.quantile(0.95) / best.quantile(0.95):>8.2f}"
            f"{result.quantile(0.99) / best.quantile(0.99):>8.2f}"
            f"{'-' if recovery is None else recovery:>7}"
        )
    if litellm_missing:
        print(f"{'LiteLLM latency-based':<24}{litellm_missing}")
    print("\nrecov: requests after the outage until the best endpoint served again")
    peer = next((r for r in results if r.name.startswith("LiteLLM")), None)
    ideal = next(r for r in results if r.name.startswith("ideal"))
    for result in results:
        if not result.name.startswith(("router", "gateway")):
            continue
        p50 = result.quantile(0.5) / best.quantile(0.5)
        p99 = result.quantile(0.99) / best.quantile(0.99)
        recovery = result.recovery(trace)
        print(f"{result.name}:")
        if result.name.startswith("gateway"):  # one more HTTP hop than the oracle's
            floor = next(r for r in results if r.name == "HTTP floor")
            hop = result.quantile(0.5) / (best.quantile(0.5) + floor.quantile(0.5))
            print(f"  p50 against the oracle plus one HTTP floor: {hop:.2f}x")
            router = next(r for r in results if r.name.startswith("router"))
            tail = result.quantile(0.99) / router.quantile(0.99)
            within = f"  p99 within {GATEWAY_TAIL_TARGET - 1:.0%} of the in-process router's"
            print(f"{within} ({tail:.2f}x): {_verdict(tail <= GATEWAY_TAIL_TARGET)}")
        within = f"  p50 within {P50_TARGET - 1:.0%} of oracle ({p50:.2f}x)"
        print(f"{within}: {_verdict(p50 <= P50_TARGET)}")
        print(f"  p99 <= {P99_TARGET}x oracle ({p99:.2f}x): {_verdict(p99 <= P99_TARGET)}")
        print(
            f"  p99 against the ideal hedger: {result.quantile(0.99) / ideal.quantile(0.99):.2f}x"
        )
        recovered = recovery is not None and recovery <= RECOVERY_TARGET
        print(f"  recovery within {RECOVERY_TARGET} requests ({recovery}): {_verdict(recovered)}")
        if peer is not None:
            ahead = (
                all(result.quantile(q) < peer.quantile(q) for q in (0.5, 0.95, 0.99))
                and result.errors <= peer.errors
            )
            print(f"  ahead of LiteLLM on p50, p95, p99 and errors: {_verdict(ahead)}")


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-litellm", action="store_true", help="skip the LiteLLM peer")
    parser.add_argument("--decision-calls", type=int, default=20_000)
    parser.add_argument(
        "--loop-lag",
        action="store_true",
        help="probe the gateway's /healthz throughout its row (adds that traffic to the row)",
    )
    args = parser.parse_args()
    logging.getLogger("lsp_server").setLevel(logging.ERROR)  # each 503 would log a warning
    logging.getLogger("asyncio").setLevel(logging.ERROR)  # writes to cancelled requests
    rng = random.Random(args.seed)
    trace = draw_trace(args.requests, rng)
    python = None if args.no_litellm else litellm_python()
    missing = "skipped (--no-litellm)" if args.no_litellm else None
    if not args.no_litellm and python is None:
        missing = "not installed (the package index could not be reached)"
    with tempfile.TemporaryDirectory() as temporary:
        workdir = Path(temporary)
        with endpoint_processes(trace, workdir) as urls:
            results = asyncio.run(run_in_process(trace, urls))
            floor = next(r for r in results if r.name == "HTTP floor")
            results.append(ideal_hedger(trace, floor))
            results.append(run_gateway(trace, urls, workdir, lag=args.loop_lag))
            if python is not None:
                peer = run_litellm(trace, urls, python)
                if peer is None:
                    missing = "failed to run (see above)"
                else:
                    results.append(peer)
    print_report(results, trace, missing)
    median_us, p99_us = decision_overhead_us(args.decision_calls, rng)
    print(
        f"\nrouting decision (ranking, Thompson draws, breaker checks), {args.decision_calls} "
        f"calls: median {median_us:.1f} us, p99 {p99_us:.1f} us; target <= "
        f"{DECISION_TARGET_US:.0f} us median: {_verdict(median_us <= DECISION_TARGET_US)}"
    )


if __name__ == "__main__":
    main()
