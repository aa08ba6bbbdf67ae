"""What `gateway-ls gateway` adds to an agent's turn: a Codex-sized Responses request (long
instructions, a dozen tools, a tool round trip in the history), streamed, sent straight to a
model that speaks the Responses API and through the gateway, which bridges it onto chat
completions; the same conversation as a chat completion, straight and through the gateway.

The model is the tests' scripted tool-using server (tests/support/scripted_agent.py) answering
at once, in a process of its own, so the figures are the gateway's own cost: reading the
request, the privacy scan over all of it, translation both ways, routing and the upstream call.
All four paths run interleaved in one run over keep-alive connections.

Run from the repository root: `python -m bench.bench_agent_turn [--requests 200]`.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.bench_gateway import free_port, keep_alive_client, percentile, process
from lsp_server.gateway.responses_wire import parse_responses_body

WARMUP_REQUESTS = 20
# Instructions and tools of the size Codex CLI sends (about 40 KB in all).
INSTRUCTIONS = (
    "You are a coding agent. Read the repository before you change it, keep changes small, "
    "run the tests after each change and explain what you did in a short final message.\n"
) * 200
TOOLS = [
    {
        "type": "function",
        "name": name,
        "description": f"The {name} tool. " * 20,
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "detail": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    }
    for name in ["get_weather", *(f"tool_{i}" for i in range(11))]
]
INPUT = [
    {"role": "user", "content": [{"type": "input_text", "text": "What is the weather in Oslo?"}]},
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city":"Oslo"}',
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "rain in Oslo"},
]
RESPONSES_BODY = {
    "model": "auto",
    "instructions": INSTRUCTIONS,
    "input": INPUT,
    "tools": TOOLS,
    "stream": True,
    "store": False,
}
CHAT_BODY = parse_responses_body(RESPONSES_BODY).chat


@dataclass
class Route:
    name: str
    url: str
    body: dict[str, Any]
    done: Callable[[str], bool]  # whether a whole stream ended as it should
    client: httpx.Client
    samples_ms: list[float] = field(default_factory=list)

    def call(self) -> None:
        started = time.perf_counter()
        with self.client.stream("POST", self.url, json=self.body) as response:
            text = response.read().decode()
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 200 or not self.done(text):
            raise RuntimeError(f"{self.name}: {response.status_code} {text[-400:]}")
        self.samples_ms.append(elapsed)


def responses_done(text: str) -> bool:
    return "event: response.completed" in text and "The tool said: rain in Oslo" in text


def chat_done(text: str) -> bool:
    return "data: [DONE]" in text and '"finish_reason":"stop"' in text.replace(" ", "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=200, help="measured requests per path")
    args = parser.parse_args(argv)
    model_port, gateway_port = free_port(), free_port()
    model_url = f"http://127.0.0.1:{model_port}/v1"
    gateway_url = f"http://127.0.0.1:{gateway_port}/v1"
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        model_args = [
            sys.executable,
            "-m",
            "tests.support.scripted_agent",
            "--port",
            str(model_port),
        ]
        stack.enter_context(process(model_args, f"{model_url}/models", workdir / "model.log"))
        config = workdir / "gateway.toml"
        config.write_text(
            "[local]\nenabled = false\n"
            f'[[endpoints]]\nname = "scripted"\nkind = "openai"\nbase_url = "{model_url}"\n'
            'model = "fake-model"\nroles = ["agent"]\nfim = false\n',
            encoding="utf-8",
        )
        gateway_args = [sys.executable, "-m", "lsp_server", "gateway", "--config", str(config)]
        stack.enter_context(
            process(
                [*gateway_args, "--port", str(gateway_port)],
                f"http://127.0.0.1:{gateway_port}/healthz",
                workdir / "gateway.log",
            )
        )
        client = stack.enter_context(keep_alive_client("unused"))
        paths = [
            Route(
                "responses, direct",
                f"{model_url}/responses",
                RESPONSES_BODY,
                responses_done,
                client,
            ),
            Route(
                "responses, gateway (bridged to chat)",
                f"{gateway_url}/responses",
                RESPONSES_BODY,
                responses_done,
                client,
            ),
            Route("chat, direct", f"{model_url}/chat/completions", CHAT_BODY, chat_done, client),
            Route("chat, gateway", f"{gateway_url}/chat/completions", CHAT_BODY, chat_done, client),
        ]
        for path in paths:
            for _ in range(WARMUP_REQUESTS):
                path.call()
            path.samples_ms.clear()
        for _ in range(args.requests):  # interleaved: load from elsewhere hits every path alike
            for path in paths:
                path.call()
    size_kb = len(str(RESPONSES_BODY).encode()) / 1024
    print(f"streamed agent turn, request about {size_kb:.0f} KB, {args.requests} per path\n")
    header = f"{'path':<38} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'+p50 ms':>8}"
    print(header)
    print("-" * len(header))
    for path, baseline in zip(paths, [None, paths[0], None, paths[2]], strict=True):
        p50 = percentile(path.samples_ms, 50)
        added = "" if baseline is None else f"{p50 - percentile(baseline.samples_ms, 50):+8.2f}"
        print(
            f"{path.name:<38} {p50:>8.2f} {percentile(path.samples_ms, 90):>8.2f} "
            f"{percentile(path.samples_ms, 99):>8.2f} {added:>8}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
