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
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
from lsprotocol import types

from bench.harness.endpoints import zero_latency_endpoint
from bench.harness.lsp_session import (
    capabilities,
    direct_ms,
    initialize,
    open_document,
    running_client,
    running_server,
    server_process,
    through_server_ms,
)
from bench.harness.percentile import percentile
from bench.harness.verdict import verdict
from lsp_server.backends.openai_compat import OpenAICompatibleBackend
from lsp_server.config.model import EndpointConfig

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


# --- overhead --------------------------------------------------------------------------------


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
    with zero_latency_endpoint(TEXT) as base_url:
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
            direct: list[float] = []
            served: list[float] = []
            floor: list[float] = []
            direct_cpu: list[float] = []
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
    if not isinstance(status, dict):
        raise RuntimeError(f"gatewayLs.status answered {status!r}")
    routed = [float(d["latency_ms"]) for d in status["decisions"]]
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
    added_p50 = percentile(served, 0.5) - percentile(direct, 0.5)
    added_p99 = percentile(served, 0.99) - percentile(direct, 0.99)
    print(f"\nkeystroke path, {args.requests} requests against a zero-latency endpoint (ms)\n")
    print(f"{'':<34}{'p50':>9}{'p90':>9}{'p99':>9}")
    for label, samples in (
        ("direct (the HTTP backend alone)", direct),
        ("through gateway-ls over stdio", served),
        ("through the floor server", overhead.floor),
    ):
        print(
            f"{label:<34}{percentile(samples, 0.5):>9.2f}{percentile(samples, 0.9):>9.2f}"
            f"{percentile(samples, 0.99):>9.2f}"
        )
    added_p90 = percentile(served, 0.9) - percentile(direct, 0.9)
    print(f"{'added by the server':<34}{added_p50:>9.2f}{added_p90:>9.2f}{added_p99:>9.2f}")
    floor_added = [percentile(overhead.floor, q) - percentile(direct, q) for q in (0.5, 0.9, 0.99)]
    print(f"{'added by the floor server':<34}" + "".join(f"{v:>9.2f}" for v in floor_added))
    own = [percentile(served, q) - percentile(overhead.floor, q) for q in (0.5, 0.9, 0.99)]
    print(f"{'gateway-ls over the floor':<34}" + "".join(f"{v:>9.2f}" for v in own))
    print(
        f"\nof which inside the router (decision log, last {len(routed)} requests): p50 "
        f"{percentile(routed, 0.5):.2f} ms of routed time vs {percentile(direct, 0.5):.2f} ms "
        "direct; "
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
