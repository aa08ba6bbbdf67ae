"""What `gateway-ls gateway` adds to a completion: the same request sent straight to an endpoint
and through the gateway, alternately, in one run, over keep-alive connections.

The endpoint is the tests' scripted OpenAI-compatible server answering at once, so the numbers
are the gateway's own cost (HTTP in, routing, the upstream call as a stream, HTTP out). The
floor (`bench/floor_proxy.py`) is measured alongside: one Starlette route on uvicorn passing
the body to the endpoint with httpx, the least a Python gateway on this stack does, so the
stack's cost is told apart from gateway-ls's own. Each server runs as its own process, as in
real use. When a `litellm` command is on PATH (or named by
$LITELLM), the LiteLLM proxy is measured in front of the same endpoint for comparison.
`--granian`: the gateway and the floor are also served by granian (`bench/granian_server.py`),
in the same interleaved run, and each app's added latency and CPU per request are compared
under the two servers. `--stream-chat`: the request is a streamed chat completion instead (an
answer of about 160 tokens, an event each, which the gateway relays); `--stream-completion`: a
streamed completion, a keystroke's (an answer of two short lines, a token an event, as
`bench_team`'s model streams them). Streamed, the floor's CPU per request is printed beside the
gateway's. `--team-floor`: the floor calls the endpoint with the upstream client gateway-ls
makes (as `bench_team`'s floor does) instead of httpx's stock one, so that the two differ only
in what gateway-ls does with a request. `--against DIR`: a second gateway, run from another
checkout's code (`DIR`, say a worktree of main), takes the same requests interleaved with the
rest, and its CPU per request is printed beside this one's.

Run from the repository root: `python -m bench.bench_gateway [--requests 500] [--granian]
[--stream-chat | --stream-completion] [--team-floor] [--against DIR]`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from bench.harness.endpoints import fake_endpoint, floor_proxy, granian_server, keep_alive_client
from bench.harness.percentile import percentile
from bench.harness.processes import ROOT, free_port, process

TARGET_ADDED_P50_MS = 1.0
WARMUP_REQUESTS = 50
LITELLM_KEY = f"sk-bench-{secrets.token_hex(16)}"  # the proxy refuses to start without one
BODY = {
    "model": "fake-model",
    "prompt": "def add(a, b):\n    ",
    "suffix": "\n\nprint(add(1, 2))\n",
    "max_tokens": 16,
}
# A keystroke's answer: two short lines, streamed 4 characters (a token) an event.
KEYSTROKE_ANSWER = "total = a + b\n    return total\n"
CHAT_BODY = {
    "model": "fake-model",
    "messages": [{"role": "user", "content": "Write add(a, b) in Python."}],
    "max_tokens": 1024,
    "stream": True,
}
CHAT_ANSWER = (
    "def add(a: int, b: int) -> int:\n"
    '    """The sum of two integers, checked: a bool is not a number here."""\n'
    "    for value in (a, b):\n"
    "        if isinstance(value, bool) or not isinstance(value, int):\n"
    '            raise TypeError(f"expected an int, got {type(value).__name__}")\n'
    "    return a + b\n\n\n"
    'if __name__ == "__main__":\n'
    "    print(add(1, 2))\n"
    "    print(add(40, 2))\n"
) * 2
# A streamed completion's text in an event, as the endpoint (spaced) and gateway-ls write it.
_STREAMED_TEXT = re.compile(rb'"text":\s*"[^"]')


@dataclass
class Target:
    name: str
    url: str  # the full /v1/completions or /v1/chat/completions URL
    model: str
    client: httpx.Client
    samples_ms: list[float]
    server: psutil.Process | None = None  # the process whose CPU per request is reported
    cpu_ms: float = 0.0  # its CPU per measured request
    streamed: bool = False  # a completion asked as a stream

    def call(self) -> None:
        started = time.perf_counter()
        if self.url.endswith("/chat/completions"):
            with self.client.stream(
                "POST", self.url, json={**CHAT_BODY, "model": self.model}
            ) as response:
                body = response.read()
            answered = body.rstrip().endswith(b"data: [DONE]") and b'"content"' in body
        elif self.streamed:
            with self.client.stream(
                "POST", self.url, json={**BODY, "model": self.model, "stream": True}
            ) as response:
                body = response.read()
            ended = body.rstrip().endswith(b"data: [DONE]")
            answered = ended and _STREAMED_TEXT.search(body) is not None
        else:
            response = self.client.post(self.url, json={**BODY, "model": self.model})
            answered = response.status_code == 200 and bool(response.json()["choices"][0]["text"])
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 200:
            raise RuntimeError(f"{self.name}: {response.status_code} {response.text}")
        if not answered:
            raise RuntimeError(f"{self.name}: empty answer")
        self.samples_ms.append(elapsed)


def local_url(port: int, route: str = "completions") -> str:
    return f"http://127.0.0.1:{port}/v1/{route}"


def gateway_config(workdir: Path, endpoint_url: str) -> Path:
    config = workdir / "gateway.toml"
    config.write_text(
        "[routing]\ninline_deadline_ms = 5000\nmax_hedge_ratio = 0\n"
        "[local]\nenabled = false\n"
        f'[[endpoints]]\nname = "fake"\nkind = "openai"\nbase_url = "{endpoint_url}"\n'
        'model = "fake-model"\nmax_tokens = 16\n',
        encoding="utf-8",
    )
    return config


def gateway(
    config: Path, port: int, checkout: Path | None = None
) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    """`gateway-ls gateway` on `port`, run from `checkout`'s code when given."""
    args = [sys.executable, "-m", "lsp_server", "gateway", "--config", str(config)]
    ready = f"http://127.0.0.1:{port}/healthz"
    log = config.with_name("against.log" if checkout else "gateway.log")
    return process([*args, "--port", str(port)], ready, log, cwd=checkout or ROOT)


def litellm_command() -> str | None:
    return os.environ.get("LITELLM") or shutil.which("litellm")


def litellm_proxy(
    command: str, workdir: Path, port: int, endpoint_url: str
) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    config = workdir / "litellm.yaml"
    config.write_text(
        f"general_settings:\n  master_key: {LITELLM_KEY}\n"
        "model_list:\n"
        "  - model_name: fake\n"
        "    litellm_params:\n"
        "      model: text-completion-openai/fake-model\n"
        f"      api_base: {endpoint_url}\n"
        "      api_key: unused\n",
        encoding="utf-8",
    )
    args = [command, "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    ready = f"http://127.0.0.1:{port}/health/liveliness"
    return process(args, ready, workdir / "litellm.log", timeout_s=180)


def measure(targets: list[Target], requests: int) -> None:
    for target in targets:
        for _ in range(WARMUP_REQUESTS):
            target.call()
        target.samples_ms.clear()
    cpu_before = {target.name: cpu_s(target.server) for target in targets if target.server}
    for _ in range(requests):  # interleaved, so load from elsewhere hits every target alike
        for target in targets:
            target.call()
    for target in targets:
        if target.server is not None:
            target.cpu_ms = (cpu_s(target.server) - cpu_before[target.name]) * 1000 / requests


def cpu_s(process: psutil.Process) -> float:
    """The process's CPU time so far (user and system, all its threads), in seconds."""
    return sum(process.cpu_times()[:2])


def print_table(targets: list[Target], baseline: Target) -> None:
    header = f"{'path':<34} {'n':>5} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'+p50 ms':>8}"
    print(header)
    print("-" * len(header))
    base_p50 = percentile(baseline.samples_ms, 0.5)
    for target in targets:
        samples = target.samples_ms
        p50 = percentile(samples, 0.5)
        added = "" if target is baseline else f"{p50 - base_p50:+8.2f}"
        print(
            f"{target.name:<34} {len(samples):>5} {p50:>8.2f} {percentile(samples, 0.9):>8.2f} "
            f"{percentile(samples, 0.99):>8.2f} {added:>8}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=500, help="measured requests per path")
    parser.add_argument(
        "--granian",
        action="store_true",
        help="also serve the gateway and the floor with granian, interleaved with the rest",
    )
    streams = parser.add_mutually_exclusive_group()
    streams.add_argument(
        "--stream-chat", action="store_true", help="a streamed chat completion, not a completion"
    )
    streams.add_argument(
        "--stream-completion",
        action="store_true",
        help="a streamed completion of a keystroke's size, not a whole one",
    )
    parser.add_argument(
        "--team-floor",
        action="store_true",
        help="the floor calls the endpoint with gateway-ls's upstream client, as bench_team's",
    )
    parser.add_argument(
        "--against",
        type=Path,
        metavar="DIR",
        help="also run the gateway of the checkout in DIR, interleaved with the rest",
    )
    args = parser.parse_args(argv)
    streamed = args.stream_chat or args.stream_completion
    route = "chat/completions" if args.stream_chat else "completions"
    endpoint_port, gateway_port, litellm_port = free_port(), free_port(), free_port()
    endpoint_url = f"http://127.0.0.1:{endpoint_port}/v1"
    command = litellm_command()
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        answer = "return a + b\n"
        if args.stream_chat:
            answer = CHAT_ANSWER
        elif args.stream_completion:
            answer = KEYSTROKE_ANSWER
        stack.enter_context(fake_endpoint(endpoint_port, answer, log=workdir / "endpoint.log"))

        def served(
            name: str,
            port: int,
            model: str,
            server: contextlib.AbstractContextManager[subprocess.Popen[bytes]],
        ) -> Target:
            started = psutil.Process(stack.enter_context(server).pid)
            client = stack.enter_context(keep_alive_client("unused"))
            url = local_url(port, route)
            return Target(name, url, model, client, [], started, streamed=args.stream_completion)

        config = gateway_config(workdir, endpoint_url)
        floor_port = free_port()
        targets = [
            Target(
                "endpoint, direct",
                f"{endpoint_url}/{route}",
                "fake-model",
                stack.enter_context(keep_alive_client("unused")),
                [],
                streamed=args.stream_completion,
            ),
            served(
                "gateway-ls gateway -> endpoint",
                gateway_port,
                "gateway-ls",
                gateway(config, gateway_port),
            ),
            served(
                "floor proxy -> endpoint",
                floor_port,
                "fake-model",
                floor_proxy(floor_port, endpoint_url, workdir / "floor.log", team=args.team_floor),
            ),
        ]
        if args.granian:
            granian_gateway_port, granian_floor_port = free_port(), free_port()
            targets += [
                served(
                    "gateway-ls gateway, granian",
                    granian_gateway_port,
                    "gateway-ls",
                    granian_server(
                        "gateway",
                        granian_gateway_port,
                        str(config),
                        workdir / "granian-gateway.log",
                    ),
                ),
                served(
                    "floor proxy, granian",
                    granian_floor_port,
                    "fake-model",
                    granian_server(
                        "floor", granian_floor_port, endpoint_url, workdir / "granian-floor.log"
                    ),
                ),
            ]
        against = None
        if args.against is not None:
            against_port = free_port()
            against = served(
                "gateway of --against",
                against_port,
                "gateway-ls",
                gateway(config, against_port, args.against),
            )
            targets.append(against)
        if command is not None and not streamed:
            stack.enter_context(litellm_proxy(command, workdir, litellm_port, endpoint_url))
            targets.append(
                Target(
                    "LiteLLM proxy -> endpoint",
                    local_url(litellm_port),
                    "fake",
                    stack.enter_context(keep_alive_client(LITELLM_KEY)),
                    [],
                )
            )
        measure(targets, args.requests)
        status = httpx.get(f"http://127.0.0.1:{gateway_port}/v1/gateway-ls/status").json()
    asked = "non-streaming /v1/completions"
    if args.stream_chat:
        asked = "streamed /v1/chat/completions"
    elif args.stream_completion:
        asked = "streamed /v1/completions (a keystroke's answer)"
    print(f"{asked}, {args.requests} requests per path, keep-alive\n")
    print_table(targets, targets[0])
    added = percentile(targets[1].samples_ms, 0.5) - percentile(targets[0].samples_ms, 0.5)
    verdict = "met" if added <= TARGET_ADDED_P50_MS else "missed"
    print(
        f"\ngateway-ls adds {added:.2f} ms at p50 (target <= {TARGET_ADDED_P50_MS} ms: {verdict})"
    )
    floor_p50 = percentile(targets[2].samples_ms, 0.5)
    floor_client = "gateway-ls's" if args.team_floor else "httpx's stock"
    print(
        f"  the floor proxy (Starlette on uvicorn, {floor_client} upstream) adds "
        f"{floor_p50 - percentile(targets[0].samples_ms, 0.5):.2f} ms; gateway-ls over it "
        f"{percentile(targets[1].samples_ms, 0.5) - floor_p50:.2f} ms"
    )
    upstream_p50 = status["endpoints"][0]["p50_ms"]
    gateway_p50 = percentile(targets[1].samples_ms, 0.5)
    print(
        f"  of its {gateway_p50:.2f} ms, the upstream call (streamed, as the router times it) "
        f"takes {upstream_p50:.2f} ms; HTTP in and out, parsing and routing the rest"
    )
    print(
        f"  the gateway's CPU per request: {targets[1].cpu_ms:.2f} ms (steadier than wall time "
        "on a shared machine)"
    )
    print(
        f"  the floor's CPU per request: {targets[2].cpu_ms:.2f} ms; the gateway's over the "
        f"floor's: {targets[1].cpu_ms / targets[2].cpu_ms:.2f}x"
    )
    if args.granian:
        print_servers(targets[0], targets[1:5])
    if against is not None:
        print(
            f"  the --against gateway's CPU per request: {against.cpu_ms:.2f} ms; this one's "
            f"over it: {targets[1].cpu_ms / against.cpu_ms:.3f}x"
        )
    if command is None:
        print("LiteLLM: not installed")
    return 0


def print_servers(direct: Target, served: list[Target]) -> None:
    """Each app under each server: added latency over the direct call, CPU per request, and
    granian's CPU as a share of uvicorn's (`served`: gateway and floor on uvicorn, then on
    granian)."""
    gateway, floor, granian_gateway, granian_floor = served
    rows = [
        ("gateway-ls", "uvicorn", gateway),
        ("gateway-ls", "granian", granian_gateway),
        ("floor", "uvicorn", floor),
        ("floor", "granian", granian_floor),
    ]
    header = f"{'app':<12} {'server':<8} {'+p50 ms':>8} {'+p99 ms':>8} {'CPU ms':>8}"
    print(f"\nthe two servers, added over the direct call, CPU per request\n{header}")
    print("-" * len(header))
    for app, server, target in rows:
        added_p50 = percentile(target.samples_ms, 0.5) - percentile(direct.samples_ms, 0.5)
        added_p99 = percentile(target.samples_ms, 0.99) - percentile(direct.samples_ms, 0.99)
        print(f"{app:<12} {server:<8} {added_p50:>+8.2f} {added_p99:>+8.2f} {target.cpu_ms:>8.2f}")
    gateway_ratio = granian_gateway.cpu_ms / gateway.cpu_ms
    floor_ratio = granian_floor.cpu_ms / floor.cpu_ms
    print(
        f"granian's CPU per request over uvicorn's: gateway-ls {gateway_ratio:.2f}, "
        f"floor {floor_ratio:.2f}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
