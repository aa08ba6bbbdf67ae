"""What `gateway-ls gateway` adds to a completion: the same request sent straight to an endpoint
and through the gateway, alternately, in one run, over keep-alive connections.

The endpoint is the tests' scripted OpenAI-compatible server answering at once, so the numbers
are the gateway's own cost (HTTP in, routing, the upstream call as a stream, HTTP out). Each
server runs as its own process, as in real use. When a `litellm` command is on PATH (or named by
$LITELLM), the LiteLLM proxy is measured in front of the same endpoint for comparison.

Run from the repository root: `python -m bench.bench_gateway [--requests 500]`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
TARGET_ADDED_P50_MS = 1.0
WARMUP_REQUESTS = 50
BODY = {
    "model": "fake-model",
    "prompt": "def add(a, b):\n    ",
    "suffix": "\n\nprint(add(1, 2))\n",
    "max_tokens": 16,
}


@dataclass
class Target:
    name: str
    url: str  # the full /v1/completions URL
    model: str
    client: httpx.Client
    samples_ms: list[float]

    def call(self) -> None:
        started = time.perf_counter()
        response = self.client.post(self.url, json={**BODY, "model": self.model})
        elapsed = (time.perf_counter() - started) * 1000
        response.raise_for_status()
        if not response.json()["choices"][0]["text"]:
            raise RuntimeError(f"{self.name}: empty completion")
        self.samples_ms.append(elapsed)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def process(args: list[str], ready_url: str, timeout_s: float = 60) -> Iterator[None]:
    """Run `args` until the block ends; ready once `ready_url` answers."""
    child = subprocess.Popen(
        args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if child.poll() is not None:
                raise RuntimeError(
                    f"{args[:4]} exited: {child.stderr.read() if child.stderr else ''}"
                )
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(ready_url, timeout=1).status_code < 500:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{args[:4]} did not start within {timeout_s} s")
            time.sleep(0.1)
        yield
    finally:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def fake_endpoint(port: int) -> contextlib.AbstractContextManager[None]:
    args = [sys.executable, "-m", "tests.support.fake_llm_server", "--port", str(port)]
    return process([*args, "--text", "return a + b\n"], f"http://127.0.0.1:{port}/v1/models")


def gateway(
    config_dir: Path, port: int, endpoint_url: str
) -> contextlib.AbstractContextManager[None]:
    config = config_dir / "gateway.toml"
    config.write_text(
        "[routing]\ninline_deadline_ms = 5000\nmax_hedge_ratio = 0\n"
        "[local]\nenabled = false\n"
        f'[[endpoints]]\nname = "fake"\nkind = "openai"\nbase_url = "{endpoint_url}"\n'
        'model = "fake-model"\nmax_tokens = 16\n',
        encoding="utf-8",
    )
    args = [sys.executable, "-m", "lsp_server", "gateway", "--config", str(config)]
    return process([*args, "--port", str(port)], f"http://127.0.0.1:{port}/healthz")


def litellm_command() -> str | None:
    return os.environ.get("LITELLM") or shutil.which("litellm")


def litellm_proxy(
    command: str, config_dir: Path, port: int, endpoint_url: str
) -> contextlib.AbstractContextManager[None]:
    config = config_dir / "litellm.yaml"
    config.write_text(
        "model_list:\n"
        "  - model_name: fake\n"
        "    litellm_params:\n"
        "      model: text-completion-openai/fake-model\n"
        f"      api_base: {endpoint_url}\n"
        "      api_key: unused\n",
        encoding="utf-8",
    )
    args = [command, "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    return process(args, f"http://127.0.0.1:{port}/health/liveliness", timeout_s=180)


def keep_alive_client() -> httpx.Client:
    """Nagle off, as editors' HTTP stacks have it: a request written in two parts (head, body)
    must not wait for the server's delayed ACK."""
    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    return httpx.Client(
        transport=httpx.HTTPTransport(socket_options=nodelay),
        headers={"Authorization": "Bearer unused"},
        timeout=30,
    )


def measure(targets: list[Target], requests: int) -> None:
    for target in targets:
        for _ in range(WARMUP_REQUESTS):
            target.call()
        target.samples_ms.clear()
    for _ in range(requests):  # interleaved, so load from elsewhere hits every target alike
        for target in targets:
            target.call()


def percentile(samples: list[float], q: int) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1]


def print_table(targets: list[Target], baseline: Target) -> None:
    header = f"{'path':<34} {'n':>5} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'+p50 ms':>8}"
    print(header)
    print("-" * len(header))
    base_p50 = percentile(baseline.samples_ms, 50)
    for target in targets:
        samples = target.samples_ms
        p50 = percentile(samples, 50)
        added = "" if target is baseline else f"{p50 - base_p50:+8.2f}"
        print(
            f"{target.name:<34} {len(samples):>5} {p50:>8.2f} {percentile(samples, 90):>8.2f} "
            f"{percentile(samples, 99):>8.2f} {added:>8}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=500, help="measured requests per path")
    args = parser.parse_args(argv)
    endpoint_port, gateway_port, litellm_port = free_port(), free_port(), free_port()
    endpoint_url = f"http://127.0.0.1:{endpoint_port}/v1"
    command = litellm_command()
    with contextlib.ExitStack() as stack:
        config_dir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        stack.enter_context(fake_endpoint(endpoint_port))
        stack.enter_context(gateway(config_dir, gateway_port, endpoint_url))
        make: list[tuple[str, str, str]] = [
            ("endpoint, direct", f"{endpoint_url}/completions", "fake-model"),
            (
                "gateway-ls gateway -> endpoint",
                f"http://127.0.0.1:{gateway_port}/v1/completions",
                "gateway-ls",
            ),
        ]
        if command is not None:
            stack.enter_context(litellm_proxy(command, config_dir, litellm_port, endpoint_url))
            make.append(
                (
                    "LiteLLM proxy -> endpoint",
                    f"http://127.0.0.1:{litellm_port}/v1/completions",
                    "fake",
                )
            )
        targets = [
            Target(name, url, model, stack.enter_context(keep_alive_client()), [])
            for name, url, model in make
        ]
        measure(targets, args.requests)
    print(f"non-streaming /v1/completions, {args.requests} requests per path, keep-alive\n")
    print_table(targets, targets[0])
    added = percentile(targets[1].samples_ms, 50) - percentile(targets[0].samples_ms, 50)
    verdict = "met" if added <= TARGET_ADDED_P50_MS else "missed"
    print(
        f"\ngateway-ls adds {added:.2f} ms at p50 (target <= {TARGET_ADDED_P50_MS} ms: {verdict})"
    )
    if command is None:
        print("LiteLLM: not installed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
