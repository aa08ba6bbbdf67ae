"""What publishing the routing status costs the event loop: its lag with the publisher
running against the same loop without it.

A router in the state of a busy gateway (three endpoints with full latency windows, a full
decision log), changed every millisecond by a task standing in for the traffic (a decision and
a latency sample each time, so every publication is a new status and is written). A probe
sleeps 1 ms at a time and records how late it wakes: the loop's lag, which every request on
the loop would wait through. The publisher runs every `--every` seconds (gateways publish
every 2 s; more often here so that a run holds hundreds of publications), in phases that
alternate with phases without it (on uvloop, as the gateway runs). Reported: the probe's lag
p50, p99, p99.9 and max, with and without the publisher, and the statuses published.

Run from the repository root: `python -m bench.bench_status_stall [--seconds 6] [--every 0.05]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time

from bench.harness.percentile import percentile
from lsp_server.config.loader import parse_config_text
from lsp_server.core.engine import Engine
from lsp_server.event_loop import run_on_fastest_loop
from lsp_server.reasons import Reason
from lsp_server.routing import status_file
from lsp_server.routing.decision_log import Decision, DecisionKind
from lsp_server.routing.router import Router

ENDPOINTS = 3
PHASES = 4  # each condition runs this many times, alternately
CONFIG = "[local]\nenabled = false\n" + "".join(
    f'[[endpoints]]\nname = "team-{index}"\nkind = "openai"\n'
    f'base_url = "http://127.0.0.1:9/v1"\nmodel = "m"\nroles = ["inline", "agent", "edit"]\n'
    "fim = true\n"
    for index in range(ENDPOINTS)
)


def traffic_sample(router: Router, rng: random.Random) -> None:
    endpoint = rng.choice(router.pool.all())
    total_ms = rng.uniform(50, 400)
    endpoint.stats.record_success(
        first_token_ms=total_ms / 3, total_ms=total_ms, tokens=12, won=True
    )
    router.decisions.add(
        Decision(
            kind=DecisionKind.INLINE,
            endpoint=endpoint.name,
            reason=Reason.FASTEST,
            latency_ms=total_ms,
            tokens=12,
            cost_usd=0.0001,
            uri="file:///src/module.py",
        )
    )


async def traffic(router: Router, until: float) -> None:
    rng = random.Random(1)
    while time.monotonic() < until:
        traffic_sample(router, rng)
        await asyncio.sleep(0.001)


async def probe(until: float) -> list[float]:
    lags = []
    while time.monotonic() < until:
        asked = time.perf_counter()
        await asyncio.sleep(0.001)
        lags.append((time.perf_counter() - asked) * 1000 - 1.0)
    return lags


async def phase(router: Router, seconds: float, publishing: bool) -> tuple[list[float], int]:
    reads = 0

    def status() -> dict[str, object]:
        nonlocal reads
        reads += 1
        return router.status()

    publisher = status_file.StatusPublisher(status, kind="gateway")
    until = time.monotonic() + seconds
    if publishing:
        publisher.start()
    try:
        lags, _ = await asyncio.gather(probe(until), traffic(router, until))
    finally:
        await publisher.stop()
    return lags, reads


async def run(seconds: float) -> dict[bool, tuple[list[float], int]]:
    engine = Engine(parse_config_text(CONFIG, file=None))
    router = engine.router
    rng = random.Random(0)
    for _ in range(600):
        traffic_sample(router, rng)
    results: dict[bool, tuple[list[float], int]] = {True: ([], 0), False: ([], 0)}
    for _ in range(PHASES):
        for publishing in (False, True):
            lags, writes = await phase(router, seconds / (2 * PHASES), publishing)
            previous, count = results[publishing]
            results[publishing] = (previous + lags, count + writes)
    await engine.aclose()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=6.0, help="the whole run")
    parser.add_argument("--every", type=float, default=0.05, help="seconds between publications")
    args = parser.parse_args()
    status_file.PUBLISH_EVERY_S = args.every
    with tempfile.TemporaryDirectory() as state:
        os.environ["XDG_STATE_HOME"] = state  # the bench's status files, not the user's
        results = run_on_fastest_loop(run(args.seconds))
    print("| the loop's lag (ms) | p50 | p99 | p99.9 | max | statuses published |")
    print("| --- | --- | --- | --- | --- | --- |")
    for publishing in (False, True):
        lags, writes = results[publishing]
        name = "with the publisher" if publishing else "without it"
        cells = [f"{percentile(lags, q):.2f}" for q in (0.5, 0.99, 0.999)] + [f"{max(lags):.2f}"]
        print(f"| {name} | " + " | ".join(cells) + f" | {writes if publishing else ''} |")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
