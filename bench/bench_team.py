"""A team's load on two gateways sharing one Redis, with faults, against the model directly and
against LiteLLM's proxy.

The set-up: a scripted model (`bench/team_upstream.py`: a time to first token and a pace
between chunks drawn per request), a real `redis-server`, and two `gateway-ls gateway`
processes sharing it (`state_url`), each client with its own token. The load, from
`--load-processes` (2) processes of the bench's own, each simulated client on connections of
its own:

- 50 editors typing in bursts: a streamed fill-in-the-middle completion per keystroke, the
  one before cancelled when it has not ended yet (as editors do), a pause between bursts;
- 200 agent sessions: each turn a streamed chat of about 40 KB (instructions, a dozen tools,
  the history so far) that grows by a tool call and its result a turn, then the tool's time;
- a CI job (`CI_TOKEN`) sending short chats as fast as its answers come, its limits tight
  where the gateway has limits (`[gateway.clients.CI_TOKEN]`).

Every loop is bounded by the phase's end. The same load runs five times, `--seconds` each:
straight to the model, straight again (read as a gateway's phase is: what "added" reads for a
gateway that costs nothing, the bench's own resolution), through the two gateways, through the
floor (two minimal proxies, `bench/floor_proxy.py --team`: what any gateway in this interpreter
on this HTTP stack adds; no CI client, having no limits to hold it back), through two LiteLLM
proxies sharing the same Redis (installed for the bench only; no Postgres, so no per-key limits
or budgets: its row says so). Beside each phase's load run control sessions (`--control`, a
quarter as many editors and agents again) sending their own requests straight to the model in
the same seconds; a third table sets each phase's time over the model's script against theirs,
quantile by quantile, which no drift of the machine between phases can move. Each request
carries its number (`seq:N`), the model's draws are made from it, and the added latency is the
difference between the same request through a gateway and straight, at p50 and p99; for the
straight phase, the time over the model's own script for the request (the bench's own queueing,
which must stay small for "added" to be the gateway's). Halfway through the gateway phase one
gateway is killed (SIGKILL) in mid-stream: the requests it held are cut (counted apart), clients
go to the other one as a load balancer would send them, and its leases must be reclaimed. At
three quarters Redis is killed and started again: no request may fail. Latency is read for
requests started at least `--fault-margin` (2 s) before the first fault (a request in flight at
the kill is sent again to the other gateway, its time the kill's), and again without each
phase's first `--warm-up` second; errors over the whole phase.
How long each role's processes waited for a core is printed beside the cores they used.

Sized for two shared cores. Needs `redis-server` (`make redis-server`).
Run from the repository root: `python -m bench.bench_team [--seconds 20] [--editors 50]
[--agents 200] [--load 1.0] [--load-processes 2] [--warm-up 1] [--fault-margin 2] [--pin]
[--control 0.25] [--trace N] [--no-floor] [--no-litellm]`. `--load` scales the editors and
agents; `--pin` puts the gateways (and the floor and the peer) on the second core and the load,
the model and Redis on the first; `--trace N` runs the gateways probed and prints where the
gateway phase's time went (`team_trace`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import math
import multiprocessing
import os
import random
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import psutil
from prometheus_client.parser import text_string_to_metric_families

from bench import team_trace
from bench.harness.percentile import percentile
from bench.harness.processes import free_port, process, started_on
from bench.harness.redis_server import RedisServer
from bench.litellm_proxy import MASTER_KEY, Unavailable, litellm_proxy
from bench.team_upstream import SCRIPTED_HEADER
from lsp_server import json_codec
from lsp_server.backends.http_client import CancellationSafeTransport
from lsp_server.event_loop import run_on_fastest_loop

EDITORS = 50
AGENTS = 200
CI_LOOPS = 6
AGENT_TURNS = 10  # a session starts anew after this many turns
TOKENS = {"keystroke": "EDITORS_TOKEN", "agent": "AGENTS_TOKEN", "ci": "CI_TOKEN"}
# The CI client's limits, where the gateway has limits.
CI_LIMITS = {"rpm": 120, "tpm": 60_000, "max_concurrent": 4, "budget_usd": 0.05}
PRICE_PER_MTOK = {"input": 3.0, "output": 15.0}
LEASE_S = 30  # the longest a dead gateway's lease may be held, as the limiter documents
REQUEST_TIMEOUT_S = 30
LOAD_PROCESSES = 2  # the simulated clients' processes: one event loop could not keep up
WARM_UP_S = 1.0  # left out of the second table: first connections, first sessions
# Control sessions beside each phase's load, as a share of it: enough requests for a p99 of
# their own in a phase, few enough to leave the load as it is.
CONTROL_SHARE = 0.25
FAULT_MARGIN_S = 2.0  # longer than all but the slowest turns: few are in flight at the kill
TARGET_P99_ADDED_MS = 5.0
START_AFTER_S = 3.0  # time for each load process to make its clients before the phase starts
INSTRUCTIONS = (
    "You are a coding agent. Read the repository before you change it, keep changes small, "
    "run the tests after each change and explain what you did in a short final message.\n"
) * 200
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool. " * 20,
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "line": {"type": "integer"}},
                "required": ["path"],
            },
        },
    }
    for name in ["read_file", *(f"tool_{i}" for i in range(11))]
]
PREFIX = (
    "import os\n\n\ndef load(path):\n    with open(path) as handle:\n        return handle.read()\n"
)


@dataclass
class Sample:
    kind: str  # "keystroke" | "agent" | "ci"
    seq: int
    target: str
    started: float
    ended: float = 0.0
    outcome: str = "ok"  # "ok" | "error" | "cancelled" | "limited"
    detail: str = ""
    prompt_tokens: int = 0  # as the upstream reported them in the answer's usage
    completion_tokens: int = 0
    scripted_ms: float = math.nan  # the model's own script for it, where the model says
    control: bool = False  # a control session's: sent straight to the model during the phase

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def cost_usd(self) -> float:
        price = PRICE_PER_MTOK
        return (
            self.prompt_tokens * price["input"] + self.completion_tokens * price["output"]
        ) / 1_000_000

    @property
    def ms(self) -> float:
        return (self.ended - self.started) * 1000


@dataclass
class Targets:
    """Where the load goes: base URLs, one picked after another; a URL that refuses
    connections is left out from then on (a load balancer's health check)."""

    urls: list[str]
    dead: set[str] = field(default_factory=set)
    turn: int = 0

    def pick(self) -> str:
        alive = [url for url in self.urls if url not in self.dead] or self.urls
        self.turn += 1
        return alive[self.turn % len(alive)]


@dataclass
class Phase:
    name: str
    targets: Targets
    tokens: dict[str, str]  # kind -> bearer token
    seconds: float
    samples: list[Sample] = field(default_factory=list)
    started: float = 0.0
    faults: dict[str, float] = field(default_factory=dict)  # fault -> time it happened
    killed: str = ""  # the URL of the gateway killed
    steady: float = 1.0  # the share of the phase before its first fault
    # Latency is read for requests started at least this long before the first fault: one in
    # flight at the kill is sent again to the other gateway, its time the kill's, not a
    # gateway's.
    fault_margin_s: float = 0.0
    editors: int = EDITORS
    agents: int = AGENTS
    ci_model: str = "auto"  # LiteLLM's limits are a model's (a deployment's rpm and tpm)
    ci_loops: int = CI_LOOPS  # none through the floor, which has no limits to hold them back
    processes: int = LOAD_PROCESSES
    cores: dict[str, float] = field(default_factory=dict)  # CPU used, in cores, by role
    # Time a role's processes were ready to run but waited for a core, in ms per second.
    waits: dict[str, float] = field(default_factory=dict)
    cpu_at_start: float = 0.0  # a load process's CPU time when the phase started
    straight: bool = False  # sent straight to the model: no limits, no faults
    # Control sessions, beside the phase's own: editors and agents sending their requests
    # straight to the model in the same seconds, so that the phase's time over the script can
    # be set against the bench's own in the same seconds (`same_seconds`).
    control: Targets | None = None
    control_editors: int = 0
    control_agents: int = 0

    @property
    def ends(self) -> float:
        return self.started + self.seconds

    @property
    def read_until(self) -> float:
        """The latest start of a request whose latency is read: before the first fault."""
        margin = self.fault_margin_s if self.steady < 1 else 0.0
        return self.started + self.steady * self.seconds - margin


async def stream(
    client: httpx.AsyncClient, phase: Phase, sample: Sample, path: str, body: dict[str, Any]
) -> None:
    """Send one streamed request and read it to its end; the sample says how it went. A
    refused connection goes to another target, as a load balancer would send it."""
    headers = {
        "Authorization": f"Bearer {phase.tokens[sample.kind]}",
        "Content-Type": "application/json",
        "X-Bench-Seq": str(sample.seq),  # for `--trace`: a probed gateway notes it
    }
    content = json_codec.dumps(body)
    targets = phase.control if sample.control and phase.control else phase.targets
    for _ in range(len(targets.urls)):
        sample.target = targets.pick()
        try:
            async with client.stream(
                "POST", f"{sample.target}{path}", content=content, headers=headers
            ) as response:
                if response.status_code == 429:
                    sample.outcome, sample.detail = (
                        "limited",
                        response.headers.get("retry-after", ""),
                    )
                    await response.aread()
                    break
                if response.status_code != 200:
                    refusal = await response.aread()
                    sample.outcome = "error"
                    sample.detail = f"{response.status_code} {refusal[:120]!r}"
                    if response.status_code == 503 and b"budget_unavailable" in refusal:
                        # A budget failing closed while Redis is away: refused by design,
                        # with a Retry-After, as a 429 is.
                        sample.outcome = "limited"
                        sample.detail = response.headers.get("retry-after", "")
                    break
                sample.scripted_ms = float(response.headers.get(SCRIPTED_HEADER, "nan"))
                tail = b""
                async for chunk in response.aiter_raw():
                    tail = (tail + chunk)[-4096:]
                    if b'"error":' in chunk:
                        sample.outcome, sample.detail = (
                            "error",
                            chunk[:120].decode(errors="replace"),
                        )
                if b"data: [DONE]" not in tail and sample.outcome == "ok":
                    sample.outcome, sample.detail = "error", "stream ended early"
                sample.prompt_tokens, sample.completion_tokens = _usage_tokens(tail)
            break
        except httpx.ConnectError:
            targets.dead.add(sample.target)
            continue
        except httpx.HTTPError as failed:
            sample.outcome, sample.detail = "error", f"{type(failed).__name__}"
            break
    sample.ended = time.monotonic()


def _usage_tokens(tail: bytes) -> tuple[int, int]:
    """(prompt, completion) tokens of the stream's usage, (0, 0) when it has none."""
    at = tail.rfind(b'"usage":')
    if at == -1:
        return 0, 0
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        text = tail[at + 8 :].decode(errors="replace").lstrip()
        usage = json.JSONDecoder().raw_decode(text)[0]
        return int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
    return 0, 0


async def editor(
    client: httpx.AsyncClient, phase: Phase, number: int, control: bool = False
) -> None:
    """Bursts of keystrokes; a keystroke's request is cancelled by the next one when it has
    not ended. `control`: a control session's (straight to the model)."""
    rng = random.Random(number)
    seq = 1_000_000 + number * 100_000
    while time.monotonic() < phase.ends:
        pending: tuple[asyncio.Task[None], Sample] | None = None
        for _ in range(rng.randint(3, 8)):
            seq += 1
            sample = Sample("keystroke", seq, "", time.monotonic(), control=control)
            body = {
                "model": "gateway-ls",
                "prompt": f"# seq:{seq}\n{PREFIX}def parse_{seq % 97}(text):\n    ",
                "suffix": "\n\nif __name__ == '__main__':\n    main()\n",
                "max_tokens": 32,
                "stream": True,
            }
            if pending is not None and not pending[0].done():
                pending[0].cancel()
                pending[1].outcome, pending[1].ended = "cancelled", time.monotonic()
            task = asyncio.create_task(stream(client, phase, sample, "/completions", body))
            phase.samples.append(sample)
            pending = (task, sample)
            await asyncio.sleep(rng.uniform(0.06, 0.18))
        if pending is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(pending[0], REQUEST_TIMEOUT_S)
        await asyncio.sleep(rng.uniform(1.0, 3.0))


async def agent(
    client: httpx.AsyncClient, phase: Phase, number: int, control: bool = False
) -> None:
    """Agent sessions: each turn the conversation so far plus the last tool call and its
    result, then the tool's own time. `control`: a control session's (straight to the model)."""
    rng = random.Random(10_000 + number)
    seq = 10_000_000 + number * 10_000
    await asyncio.sleep(rng.uniform(0, 3.0))  # sessions do not start in step
    while time.monotonic() < phase.ends:
        session = seq
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": f"Session {session}: fix the failing test in src/."},
        ]
        for turn in range(AGENT_TURNS):
            if time.monotonic() >= phase.ends:
                return
            seq += 1
            if turn:
                call_id = f"call_{seq}"
                arguments = json.dumps({"path": f"src/module_{rng.randrange(100)}.py"})
                messages.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": call_id,
                                "type": "function",
                                "function": {"name": "read_file", "arguments": arguments},
                            }
                        ],
                    }
                )
                output = f"seq:{seq}\n" + "    return handle.read()\n" * 20
                messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
            else:
                messages[-1]["content"] += f" seq:{seq}"
            body = {
                "model": "auto",
                "messages": messages,
                "tools": TOOLS,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            sample = Sample("agent", seq, "", time.monotonic(), control=control)
            phase.samples.append(sample)
            await stream(client, phase, sample, "/chat/completions", body)
            await asyncio.sleep(rng.uniform(1.5, 4.0))  # the tool runs


async def ci(client: httpx.AsyncClient, phase: Phase, number: int) -> None:
    """Short chats one after another, as fast as they are answered (or refused)."""
    seq = 50_000_000 + number * 100_000
    while time.monotonic() < phase.ends:
        seq += 1
        body = {
            "model": phase.ci_model,
            "messages": [{"role": "user", "content": f"seq:{seq} Summarise the build log."}],
            "max_tokens": 64,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        sample = Sample("ci", seq, "", time.monotonic())
        phase.samples.append(sample)
        await stream(client, phase, sample, "/chat/completions", body)
        pause = 0.05 if sample.outcome != "limited" else min(1.0, float(sample.detail or 1))
        await asyncio.sleep(pause)


def run_load(
    phase: Phase,
    faults: list[tuple[float, Any]],
    watched: dict[str, list[subprocess.Popen[bytes]]],
) -> None:
    """The whole load for `phase.seconds`, its clients spread over `phase.processes` processes
    (each its own event loop, as a team's editors and agents are separate processes), with
    `faults` (a share of the phase, a function) run here at their time. The CPU the `watched`
    processes use before the first fault, and the load processes' over the phase, is noted in
    `phase.cores`."""
    phase.started = time.monotonic() + START_AFTER_S  # after every process made its clients
    steady_end = min([share for share, _ in faults] + [1.0]) - 0.01
    readings: list[tuple[float, dict[str, float]]] = []

    def read() -> None:
        readings.append((time.monotonic(), {r: cpu_seconds(p) for r, p in watched.items()}))
        waited.append({role: waiting_seconds(p) for role, p in watched.items()})

    waited: list[dict[str, float]] = []

    timed = [*faults, (0.0, read), (steady_end, read)]
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(phase.processes, mp_context=context) as workers:
        parts = [workers.submit(load_part, phase, part) for part in range(phase.processes)]
        timers = [
            threading.Timer(phase.started + share * phase.seconds - time.monotonic(), act)
            for share, act in timed
        ]
        for timer in timers:
            timer.start()
        try:
            load_cpu = 0.0
            for part in parts:
                samples, cpu = part.result()
                phase.samples += samples
                load_cpu += cpu
        finally:
            for timer in timers:
                timer.cancel()
                if timer.is_alive():
                    timer.join()
    phase.cores["the load"] = load_cpu / phase.seconds
    if len(readings) == 2:
        (began, before), (ended, after) = readings
        for role in watched:
            phase.cores[role] = (after[role] - before[role]) / (ended - began)
            phase.waits[role] = (waited[1][role] - waited[0][role]) / (ended - began) * 1000


def cpu_seconds(processes: list[subprocess.Popen[bytes]]) -> float:
    total = 0.0
    for child in processes:
        with contextlib.suppress(psutil.Error):
            times = psutil.Process(child.pid).cpu_times()
            total += times.user + times.system
    return total


def waiting_seconds(processes: list[subprocess.Popen[bytes]]) -> float:
    """Seconds the processes' threads were ready to run but waited for a core (Linux's
    scheduler statistics; 0 where they are not kept)."""
    total = 0.0
    for child in processes:
        with contextlib.suppress(OSError, ValueError):
            for task in Path(f"/proc/{child.pid}/task").iterdir():
                total += int((task / "schedstat").read_text().split()[1]) / 1e9
    return total


def load_part(phase: Phase, part: int) -> tuple[list[Sample], float]:
    """One process's share of the clients: every `phase.processes`-th editor, agent and CI
    loop from `part` on. Its samples go back to the parent, with the CPU it used from the
    phase's start."""
    run_on_fastest_loop(client_loops(phase, part))
    return phase.samples, time.process_time() - phase.cpu_at_start


async def client_loops(phase: Phase, part: int) -> None:
    every = phase.processes
    async with contextlib.AsyncExitStack() as stack:
        tls = ssl.create_default_context()  # loaded once: it takes tens of milliseconds

        async def mine(count: int, first: int = 0) -> list[tuple[int, httpx.AsyncClient]]:
            numbers = range(first + part, first + count, every)
            return [(n, await own_client(stack, tls)) for n in numbers]

        loops = [editor(client, phase, n) for n, client in await mine(phase.editors)]
        loops += [agent(client, phase, n) for n, client in await mine(phase.agents)]
        loops += [ci(client, phase, n) for n, client in await mine(phase.ci_loops)]
        # Control sessions are numbered after the phase's own: requests of their own.
        controls = await mine(phase.control_editors, phase.editors)
        loops += [editor(client, phase, n, control=True) for n, client in controls]
        controls = await mine(phase.control_agents, phase.agents)
        loops += [agent(client, phase, n, control=True) for n, client in controls]
        await asyncio.sleep(max(0.0, phase.started - time.monotonic()))
        phase.cpu_at_start = time.process_time()
        tasks = [asyncio.create_task(loop) for loop in loops]
        grace = phase.seconds + REQUEST_TIMEOUT_S + 10
        done, pending = await asyncio.wait(tasks, timeout=grace)
        for task in pending:
            task.cancel()
        for task in done:
            if task.exception() is not None:
                raise task.exception()  # type: ignore[misc]


async def own_client(stack: contextlib.AsyncExitStack, tls: ssl.SSLContext) -> httpx.AsyncClient:
    """One simulated client's own connections, as each editor and agent has in its own
    process. One pool shared by all 250 would cost this process more than the model's whole
    script: httpcore walks every connection of a pool (and, for each idle one, every
    connection again) whenever a request joins or leaves it. The transport is the gateway's
    own (asyncio streams, cancelled keystrokes' connections taken back)."""
    limits = httpx.Limits(max_connections=16, max_keepalive_connections=4)
    transport = CancellationSafeTransport(limits, tls)
    timeout = httpx.Timeout(REQUEST_TIMEOUT_S, connect=5)
    return await stack.enter_async_context(httpx.AsyncClient(transport=transport, timeout=timeout))


# --- the set-up ---------------------------------------------------------------------------


def limits_supported() -> bool:
    return importlib.util.find_spec("lsp_server.limits") is not None


def gateway_config(upstream: str, redis_url: str, with_limits: bool) -> str:
    text = (
        "[local]\nenabled = false\n"
        "[gateway]\n"
        f"token_env = [{', '.join(json.dumps(name) for name in TOKENS.values())}]\n"
        f'state_url = "{redis_url}"\n'
        "max_connections = 4096\n"
        # All the load comes from one address, as it would from a load balancer.
        "max_half_open_per_ip = 4096\n"
    )
    if with_limits:
        text += "[gateway.clients.CI_TOKEN]\n" + "".join(
            f"{key} = {value}\n" for key, value in CI_LIMITS.items()
        )
        text += 'budget_period = "day"\n'
    price = ", ".join(f"{key} = {value}" for key, value in PRICE_PER_MTOK.items())
    return text + (
        f'[[endpoints]]\nname = "team"\nkind = "openai"\nbase_url = "{upstream}"\n'
        'model = "team"\nroles = ["inline", "agent"]\nfim = true\n'
        f"price_per_mtok = {{ {price} }}\n"
    )


def litellm_settings(redis: RedisServer) -> str:
    """Its router's counters in the shared Redis, and a model's rpm and tpm checked before each
    call: what LiteLLM limits across processes without its Postgres database."""
    return (
        "router_settings:\n"
        "  redis_host: 127.0.0.1\n"
        f"  redis_port: {redis.port}\n"
        "  enable_pre_call_checks: true\n"
        "litellm_settings:\n"
        "  drop_params: true\n"
    )


def litellm_models(upstream: str) -> str:
    return (
        "  - model_name: gateway-ls\n"
        "    litellm_params:\n"
        "      model: text-completion-openai/team\n"
        f"      api_base: {upstream}\n"
        "      api_key: unused\n"
        "  - model_name: auto\n"
        "    litellm_params:\n"
        "      model: openai/team\n"
        f"      api_base: {upstream}\n"
        "      api_key: unused\n"
        "  - model_name: ci\n"  # the CI client's limits, as a model of its own
        "    litellm_params:\n"
        "      model: openai/team\n"
        f"      api_base: {upstream}\n"
        "      api_key: unused\n"
        f"      rpm: {CI_LIMITS['rpm']}\n"
        f"      tpm: {CI_LIMITS['tpm']}\n"
        f"      max_parallel_requests: {CI_LIMITS['max_concurrent']}\n"
    )


def print_trace(
    team: Phase,
    direct: Phase,
    workdir: Path,
    children: list[subprocess.Popen[bytes]],
    warm_up_s: float,
    slowest: int,
) -> None:
    """Where the gateway phase's added time went (`team_trace`), before the first fault and
    without the first `warm_up_s`."""
    first, cutoff = team.started + warm_up_s, team.read_until
    read = [
        s
        for s in team.samples
        if s.kind in ("keystroke", "agent") and s.outcome == "ok" and first <= s.started < cutoff
    ]
    straight = [s for s in direct.samples if s.outcome == "ok"]
    probes = {
        child.url: team_trace.read_probe(workdir / f"gateway-{index}.trace")  # type: ignore[attr-defined]
        for index, child in enumerate(children)
    }
    arrivals = team_trace.read_upstream(workdir / "model.trace")
    team_trace.report(read, straight, arrivals, probes, AGENT_TURNS, slowest)


@contextlib.contextmanager
def two_servers(
    workdir: Path, name: str, command: Callable[[int, int], list[str]]
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Two servers started with `command(index, port)`, each answering `/healthz`, its log
    `name-N.log`; each child's `url` is its OpenAI base URL."""
    with contextlib.ExitStack() as stack:
        children = []
        for index in range(2):
            port = free_port()
            child = stack.enter_context(
                process(
                    command(index, port),
                    f"http://127.0.0.1:{port}/healthz",
                    workdir / f"{name}-{index}.log",
                )
            )
            child.url = f"http://127.0.0.1:{port}/v1"  # type: ignore[attr-defined]
            children.append(child)
        yield children


def gateways(
    workdir: Path, upstream: str, redis: RedisServer, with_limits: bool, probed: bool = False
) -> contextlib.AbstractContextManager[list[subprocess.Popen[bytes]]]:
    """Two gateways on `upstream`; `probed`: each under `bench.probed_gateway`, its loop's lag
    and its collections noted in `gateway-N.trace`."""
    config = workdir / "gateway.toml"
    config.write_text(gateway_config(upstream, redis.url, with_limits), encoding="utf-8")
    module = "bench.probed_gateway" if probed else "lsp_server"

    def command(index: int, port: int) -> list[str]:
        os.environ["GATEWAY_PROBE_TRACE"] = str(workdir / f"gateway-{index}.trace")
        return [
            sys.executable,
            "-m",
            module,
            "gateway",
            "--config",
            str(config),
            "--port",
            str(port),
        ]

    return two_servers(workdir, "gateway", command)


def floors(
    workdir: Path, upstream: str
) -> contextlib.AbstractContextManager[list[subprocess.Popen[bytes]]]:
    """Two floor proxies (`bench/floor_proxy.py --team`) on `upstream`: what any gateway in
    this interpreter, on this HTTP stack, adds at this load."""
    return two_servers(
        workdir,
        "floor",
        lambda _, port: [sys.executable, "-m", "bench.floor_proxy", str(port), upstream, "--team"],
    )


# --- the report ---------------------------------------------------------------------------


def quantiles_cell(differences: list[float]) -> str:
    return f"{percentile(differences, 0.5):+.1f} / {percentile(differences, 0.99):+.1f}"


def added(
    phase: Phase, direct: Phase, kind: str, since_s: float = 0.0
) -> tuple[list[float], list[float]]:
    """The latencies of `kind` started from `since_s` into the phase until its first fault
    (`read_until`), and their differences from the same requests sent straight."""
    straight = {s.seq: s.ms for s in direct.samples if s.kind == kind and s.outcome == "ok"}
    first, cutoff = phase.started + since_s, phase.read_until
    mine = [
        s
        for s in phase.samples
        if s.kind == kind and s.outcome == "ok" and not s.control and first <= s.started < cutoff
    ]
    return [s.ms for s in mine], [s.ms - straight[s.seq] for s in mine if s.seq in straight]


def same_seconds(
    phase: Phase, direct: Phase, kind: str, since_s: float = 0.0
) -> tuple[list[float], list[float]]:
    """The time over the model's script of `kind`'s requests read as `added` reads them: the
    phase's own, and its control sessions' (sent straight in the same seconds). A request
    through a gateway carries no script header; its script is its own seq's in `direct`."""
    scripted = {s.seq: s.scripted_ms for s in direct.samples if s.scripted_ms >= 0}
    first, cutoff = phase.started + since_s, phase.read_until
    over: dict[bool, list[float]] = {False: [], True: []}
    for s in phase.samples:
        if s.kind != kind or s.outcome != "ok" or not first <= s.started < cutoff:
            continue
        script = s.scripted_ms if s.scripted_ms >= 0 else scripted.get(s.seq, math.nan)
        if not math.isnan(script):
            over[s.control].append(s.ms - script)
    return over[False], over[True]


def over_the_script(phase: Phase, kind: str) -> list[float]:
    """How much longer than the model's script each request of `kind` took: the time the
    bench's own processes (the load, the model) kept it waiting for a core."""
    cutoff = phase.read_until
    return [
        s.ms - s.scripted_ms
        for s in phase.samples
        if s.kind == kind
        and s.outcome == "ok"
        and not s.control
        and s.started < cutoff
        and s.scripted_ms >= 0
    ]


def cut_by_kill(phase: Phase, sample: Sample) -> bool:
    """Whether `sample` went to the killed gateway while it was dying: sent before it was
    gone (a loaded machine takes a while to end a process), and not ended before the signal."""
    killed_at = phase.faults.get("kill")
    gone_at = phase.faults.get("gone", killed_at)
    return (
        killed_at is not None
        and gone_at is not None
        and sample.target == phase.killed
        and sample.started <= gone_at
        and killed_at <= sample.ended + 0.5
    )


def windows(samples: list[Sample], seconds: float, value: Any) -> float:
    """The most of `value(sample)` admitted in any window of `seconds` (every window that
    ends at an admission)."""
    admitted = sorted((s.started, value(s)) for s in samples)
    best, total, first = 0.0, 0.0, 0
    for start, amount in admitted:
        total += amount
        while admitted[first][0] <= start - seconds:
            total -= admitted[first][1]
            first += 1
        best = max(best, total)
    return best


def most_at_once(samples: list[Sample]) -> int:
    """The most of `samples` in flight at the same time."""
    edges = sorted([(s.started, 1) for s in samples] + [(s.ended, -1) for s in samples])
    most = current = 0
    for _, step in edges:
        current += step
        most = max(most, current)
    return most


def limits_cells(phase: Phase, with_limits: bool) -> tuple[str, str, str]:
    """(the CI client's most requests, most tokens in any 60 s, budget overshoot), each
    against its limit, or why they were not measured."""
    if phase.name.startswith("LiteLLM"):
        ci = [s for s in phase.samples if s.kind == "ci" and s.outcome == "ok"]
        most = windows(ci, 60, lambda s: 1)
        tokens = windows(ci, 60, lambda s: s.tokens)
        return (
            f"{most:.0f} of {CI_LIMITS['rpm']} (a model's rpm)",
            f"{tokens:,.0f} of {CI_LIMITS['tpm']:,} (a model's tpm)",
            "needs its Postgres: not run",
        )
    if not with_limits:
        return ("no limits in this build", "", "")
    if not phase.ci_loops:
        return ("no CI client", "", "")
    ci = [s for s in phase.samples if s.kind == "ci" and s.outcome == "ok"]
    most = windows(ci, 60, lambda s: 1)
    tokens = windows(ci, 60, lambda s: s.tokens)
    spent = sum(s.cost_usd for s in ci)
    overshoot = max(0.0, spent - CI_LIMITS["budget_usd"])
    return (
        f"{most:.0f} of {CI_LIMITS['rpm']}",
        f"{tokens:,.0f} of {CI_LIMITS['tpm']:,}",
        f"${overshoot:.4f} (spent ${spent:.4f} of ${CI_LIMITS['budget_usd']})",
    )


def print_report(
    phases: list[Phase],
    direct: Phase,
    missing: dict[str, str],
    with_limits: bool,
    warm_up_s: float,
) -> None:
    """One Markdown table: latency added, errors, the faults, the CI client's limits."""
    print(
        f"\n{direct.editors} editors typing in bursts, {direct.agents} agent sessions "
        f"(about 40 KB a turn, growing), {CI_LOOPS} CI loops; {direct.seconds:.0f} s a phase; "
        f"latency (ms) of requests started {direct.fault_margin_s:g} s or more before the "
        "first fault, its added part over the same request sent "
        "straight (for the straight row: over the model's script, the bench's own queueing); "
        "errors over the whole phase, but the streams the kill cut\n"
    )
    columns = [
        "target",
        "keystrokes p50 / p99",
        "added p50 / p99",
        "agent turns p50 / p99",
        "added p50 / p99",
        "requests",
        "errors",
        "cut by the kill",
        "errors within 5 s of the Redis restart",
        "CI: most requests in 60 s",
        "CI: most tokens in 60 s",
        "CI budget overshoot",
    ]
    print("| " + " | ".join(columns) + " |")
    print("|" + " --- |" * len(columns))
    for phase in [direct, *phases]:
        if phase.name in missing:
            print(f"| {phase.name} | {missing[phase.name]} |" + " |" * (len(columns) - 2))
            continue
        cells = [phase.name]
        for kind in ("keystroke", "agent"):
            latencies, differences = added(phase, direct, kind)
            cells.append(f"{percentile(latencies, 0.5):.1f} / {percentile(latencies, 0.99):.1f}")
            if phase is direct:
                differences = over_the_script(phase, kind)
            cells.append(quantiles_cell(differences))
        errors = [s for s in phase.samples if s.outcome == "error" and not cut_by_kill(phase, s)]
        cut = sum(s.outcome == "error" and cut_by_kill(phase, s) for s in phase.samples)
        restart = phase.faults.get("redis")
        around = sum(abs(s.started - restart) < 5 for s in errors) if restart is not None else None
        cells += [str(len(phase.samples)), str(len(errors))]
        cells += ["" if phase.straight else str(cut), "" if around is None else str(around)]
        cells += ["", "", ""] if phase.straight else list(limits_cells(phase, with_limits))
        print("| " + " | ".join(cells) + " |")
    for phase in [direct, *phases]:
        if phase.name in missing:
            continue
        errors = [s for s in phase.samples if s.outcome == "error" and not cut_by_kill(phase, s)]
        for sample in errors[:3]:
            print(f"  {phase.name}: {sample.kind} {sample.target}: {sample.detail}")
        ci = [s for s in phase.samples if s.kind == "ci"]
        if not phase.straight and ci:
            killed_at = phase.faults.get("kill", phase.ends)
            # Admitted ones only: a refused request is in flight on the client's side too, for
            # as long as its 429 takes to come back.
            after_kill = most_at_once(
                [s for s in ci if s.started > killed_at and s.ended and s.outcome == "ok"]
            )
            limited = sum(s.outcome == "limited" for s in ci)
            print(
                f"  {phase.name}: CI {sum(s.outcome == 'ok' for s in ci)} admitted, {limited} "
                f"refused (429); admitted in flight at once after the kill: {after_kill} (limit "
                f"{CI_LIMITS['max_concurrent']})"
            )
    print(
        f"\nthe same, with each phase's first {warm_up_s:g} s left out (the clients' and the "
        "gateways' warm-up: first connections, first sessions)\n"
    )
    print("| target | keystrokes added p50 / p99 | agent turns added p50 / p99 |")
    print("| --- | --- | --- |")
    for phase in [direct, *phases]:
        if phase.name in missing:
            continue
        cells = [phase.name]
        for kind in ("keystroke", "agent"):
            _, differences = added(phase, direct, kind, warm_up_s)
            if phase is direct:
                since = [s for s in phase.samples if s.started >= phase.started + warm_up_s]
                differences = over_the_script(replace(phase, samples=since), kind)
            cells.append(quantiles_cell(differences))
        print("| " + " | ".join(cells) + " |")
    if direct.control_editors or direct.control_agents:
        print_same_seconds([direct, *phases], direct, missing, warm_up_s)
    print()
    for phase in [direct, *phases]:
        if phase.cores:
            used = ", ".join(f"{role} {cores:.2f}" for role, cores in phase.cores.items())
            waited = ", ".join(f"{role} {ms:.0f}" for role, ms in phase.waits.items())
            print(
                f"  {phase.name}: cores busy (the load over the phase, the rest before the "
                f"first fault): {used}; waiting for a core, ms a second: {waited}"
            )
    print(
        f"\ntargets: p99 added at most {TARGET_P99_ADDED_MS:g} ms, 0 errors, admitted within the "
        "limit in every window, budget overshoot 0; the machine's load average at the end: "
        f"{os.getloadavg()[0]:.1f}"
    )


def print_same_seconds(
    phases: list[Phase], direct: Phase, missing: dict[str, str], warm_up_s: float
) -> None:
    """Added latency read within each phase: its requests' time over the model's script less
    its control sessions' in the same seconds, quantile by quantile."""
    print(
        f"\nthe same seconds: each phase's time over the model's script less that of its "
        f"{direct.control_editors} control editors and {direct.control_agents} control agent "
        "sessions, sent straight to the model beside it (for a straight phase: the bench's "
        f"resolution); each phase's first {warm_up_s:g} s left out; n: the phase's requests / "
        f"the control's; p99 added at most {TARGET_P99_ADDED_MS:g} ms: for both kinds\n"
    )
    print(
        "| target | keystrokes added p50 / p99 | n | agent turns added p50 / p99 | n "
        f"| p99 at most {TARGET_P99_ADDED_MS:g} ms |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for phase in phases:
        if phase.name in missing:
            continue
        cells = [phase.name]
        met = True
        for kind in ("keystroke", "agent"):
            own, control = same_seconds(phase, direct, kind, warm_up_s)
            p50, p99 = (percentile(own, q) - percentile(control, q) for q in (0.5, 0.99))
            cells += [f"{p50:+.1f} / {p99:+.1f}", f"{len(own)} / {len(control)}"]
            met = met and p99 <= TARGET_P99_ADDED_MS
        cells.append("met" if met else "missed")
        print("| " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=20, help="length of each phase")
    parser.add_argument("--no-litellm", action="store_true", help="skip the LiteLLM peer")
    parser.add_argument(
        "--no-floor", action="store_true", help="skip the floor: two minimal proxies"
    )
    parser.add_argument("--editors", type=int, default=EDITORS, help="editors typing")
    parser.add_argument("--agents", type=int, default=AGENTS, help="agent sessions")
    parser.add_argument(
        "--load-processes", type=int, default=LOAD_PROCESSES, help="processes the clients run in"
    )
    parser.add_argument(
        "--warm-up",
        type=float,
        default=WARM_UP_S,
        help="seconds at each phase's start left out of the second table",
    )
    parser.add_argument(
        "--fault-margin",
        type=float,
        default=FAULT_MARGIN_S,
        help="latency is read for requests started at least this long before the first fault",
    )
    parser.add_argument(
        "--load",
        type=float,
        default=1.0,
        help="a share of the load: the editors and agent sessions, scaled",
    )
    parser.add_argument(
        "--control",
        type=float,
        default=CONTROL_SHARE,
        help="control sessions beside every phase's load, sent straight to the model, as a "
        "share of its editors and agents (0: none)",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="the gateways on the second core, the load, the model and Redis on the first (the "
        "gateway's cost without the bench's own processes queued beside it)",
    )
    parser.add_argument(
        "--trace",
        type=int,
        default=0,
        metavar="N",
        help="trace each request (the model's arrivals, the gateways' loop lag and collections) "
        "and print where the gateway phase's time went, with its N slowest requests",
    )
    args = parser.parse_args(argv)
    for kind, variable in TOKENS.items():
        os.environ[variable] = f"bench-{kind}-token"
    tokens = {kind: os.environ[variable] for kind, variable in TOKENS.items()}
    with_limits = limits_supported()
    missing: dict[str, str] = {}
    upstream_port = free_port()
    upstream = f"http://127.0.0.1:{upstream_port}/v1"
    editors, agents = round(args.editors * args.load), round(args.agents * args.load)
    sizes = {
        "editors": editors,
        "agents": agents,
        "processes": args.load_processes,
        "fault_margin_s": args.fault_margin,
        "control": Targets([upstream]),
        "control_editors": math.ceil(editors * args.control),
        "control_agents": math.ceil(agents * args.control),
    }
    if args.pin:
        os.sched_setaffinity(0, {0})  # inherited by the model, Redis and the load's processes
    server_cores = {1} if args.pin else None  # the gateways', the floor's and the peer's core
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        upstream_args = [sys.executable, "-m", "bench.team_upstream", str(upstream_port)]
        if args.trace:
            os.environ["TEAM_UPSTREAM_TRACE"] = str(workdir / "model.trace")
        model = stack.enter_context(
            process(upstream_args, f"{upstream}/models", workdir / "model.log")
        )
        os.environ.pop("TEAM_UPSTREAM_TRACE", None)
        redis = stack.enter_context(RedisServer())
        direct = Phase(
            "straight to the model",
            Targets([upstream]),
            tokens,
            args.seconds,
            **sizes,
            straight=True,
        )
        run_load(direct, [], {"the model": [model]})
        # The same requests straight once more, read as a gateway's phase is (its first half):
        # what "added" reads for a gateway that costs nothing, the bench's own resolution.
        again = replace(
            direct,
            name="straight again",
            targets=Targets([upstream]),
            samples=[],
            steady=0.5,
            cores={},
            waits={},
        )
        run_load(again, [], {"the model": [model]})

        started = gateways(workdir, upstream, redis, with_limits, bool(args.trace))
        with started_on(server_cores, started) as children:
            team = Phase(
                "gateway-ls, 2 processes",
                Targets([c.url for c in children]),  # type: ignore[attr-defined]
                tokens,
                args.seconds,
                **sizes,
            )
            run_load(
                team,
                faults(team, children, redis),
                {"the model": [model], "the gateways": children},
            )
            paths = streamed_paths(children, tokens["agent"])
        if args.trace:
            print_trace(team, direct, workdir, children, args.warm_up, args.trace)

        floor = Phase(
            "the floor: 2 minimal proxies",
            Targets([]),
            tokens,
            args.seconds,
            **sizes,
            ci_loops=0,
        )
        if args.no_floor:
            missing[floor.name] = "skipped (--no-floor)"
        else:
            with started_on(server_cores, floors(workdir, upstream)) as children:
                floor.targets.urls += [c.url for c in children]  # type: ignore[attr-defined]
                kill = faults(floor, children, redis)[:1]  # no Redis to restart
                run_load(floor, kill, {"the model": [model], "the floors": children})

        peer = Phase(
            "LiteLLM proxy, 2 processes",
            Targets([]),
            {k: MASTER_KEY for k in tokens},
            args.seconds,
            **sizes,
            ci_model="ci",
        )
        if args.no_litellm:
            missing[peer.name] = "skipped (--no-litellm)"
        else:
            redis.kill()  # the peer starts on an empty Redis too
            redis.start()
            try:
                with contextlib.ExitStack() as proxies:
                    children = []
                    for _ in range(2):
                        port = free_port()
                        proxy = litellm_proxy(
                            workdir,
                            port,
                            litellm_models(upstream),
                            settings=litellm_settings(redis),
                        )
                        child = proxies.enter_context(started_on(server_cores, proxy))
                        child.url = f"http://127.0.0.1:{port}/v1"  # type: ignore[attr-defined]
                        children.append(child)
                        peer.targets.urls.append(child.url)  # type: ignore[attr-defined]
                    run_load(
                        peer,
                        faults(peer, children, redis),
                        {"the model": [model], "the proxies": children},
                    )
            except Unavailable as unavailable:
                missing[peer.name] = str(unavailable)
    print_report([again, team, floor, peer], direct, missing, with_limits, args.warm_up)
    print_paths(paths)
    if args.pin:
        print(
            "pinned: the gateways (and the floor and the peer) on core 1; the load, the model, "
            "Redis on core 0"
        )
    return 0


def streamed_paths(children: list[subprocess.Popen[bytes]], token: str) -> dict[str, float]:
    """The streamed answers by path (`relay`, `rewrite`), as the gateways still running count
    them in `/metrics` (one was killed halfway, its counts with it)."""
    paths: dict[str, float] = {}
    for child in children:
        if child.poll() is not None:
            continue
        url = child.url.removesuffix("/v1") + "/metrics"  # type: ignore[attr-defined]
        text = httpx.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=10).text
        for family in text_string_to_metric_families(text):
            if family.name == "gateway_ls_streamed_answers":
                for sample in family.samples:
                    if sample.name.endswith("_total"):
                        path = sample.labels["path"]
                        paths[path] = paths.get(path, 0.0) + sample.value
    return paths


def print_paths(paths: dict[str, float]) -> None:
    total = sum(paths.values())
    if not total:
        print("\nstreamed answers by path: none counted")
        return
    shares = ", ".join(f"{path} {count / total:.0%}" for path, count in sorted(paths.items()))
    print(
        f"\nstreamed answers by path (the gateway alive at the end, {total:.0f} answers): {shares}"
    )


def faults(
    phase: Phase, children: list[subprocess.Popen[bytes]], redis: RedisServer
) -> list[tuple[float, Any]]:
    """Halfway, kill -9 the second process mid-stream; at three quarters, kill Redis and
    start it again (empty) a second later."""

    def kill_one() -> None:
        phase.steady = 0.5
        phase.faults["kill"] = time.monotonic()
        phase.killed = children[1].url  # type: ignore[attr-defined]
        children[1].send_signal(signal.SIGKILL)
        children[1].wait()
        phase.faults["gone"] = time.monotonic()

    def restart_redis() -> None:
        phase.faults["redis"] = time.monotonic()
        redis.kill()
        time.sleep(1.0)
        redis.start()

    return [(0.5, kill_one), (0.75, restart_redis)]


if __name__ == "__main__":
    raise SystemExit(main())
