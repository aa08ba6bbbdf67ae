"""What `gateway-ls gateway` adds to an agent's turn: a Codex-sized Responses request (long
instructions, a dozen tools, tool round trips in the history), streamed, sent straight to a
model that speaks the Responses API and through the gateway, which bridges it onto chat
completions; the same conversation as a chat completion, straight and through the gateway; and
both through LiteLLM's proxy, the peer (installed for the bench only, see `litellm_proxy`); and
both through the floor (`floor_proxy`: Starlette on uvicorn relaying the bytes with httpx, the
least a Python gateway on this stack does), so what gateway-ls adds over its own stack shows.

The requests are agent sessions: each turn is the previous one plus a tool round trip, as an
agent sends them, and a session starts anew every `--turns` turns (its first turn is new text
to every memo). The model is the tests' scripted tool-using server
(bench/harness/scripted_agent.py) answering at once, in a process of its own, so the figures
are the gateway's own cost: reading the request, the privacy verdict, translation both ways,
routing and the upstream call. All paths run interleaved in one run over keep-alive
connections; the gateway's CPU per request is printed too (steadier than wall time on a
shared machine). `--granian`: the gateway and the floor are also served by granian
(`bench/granian_server.py`) in the same run, and each app's added latency and CPU per request
are compared under the two servers. `--against DIR`: a second gateway, run from another
checkout's code (`DIR`, say a worktree of main) with this interpreter, takes the same turns
interleaved with the rest, so a change's CPU is read against its base in the same seconds.

Run from the repository root: `python -m bench.bench_agent_turn [--requests 200] [--turns 8]
[--no-litellm] [--granian] [--against DIR]`.
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
import psutil

from bench.harness.endpoints import floor_proxy, granian_server, keep_alive_client
from bench.harness.percentile import percentile
from bench.harness.processes import free_port, process
from bench.litellm_proxy import MASTER_KEY, Unavailable, litellm_proxy
from lsp_server.gateway.responses_request import parse_responses_body

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


def tool_round(call: int) -> list[dict[str, Any]]:
    """One tool call and its result, as a Responses client sends them back."""
    call_id = f"call_{call}"
    arguments = '{"city":"Oslo","detail":"hourly"}'
    return [
        {
            "type": "function_call",
            "call_id": call_id,
            "name": "get_weather",
            "arguments": arguments,
        },
        {"type": "function_call_output", "call_id": call_id, "output": "rain in Oslo"},
    ]


def responses_body(session: int, turn: int) -> dict[str, Any]:
    """Turn `turn` (from 0) of agent session `session`: the session's question, then a tool
    round trip per turn so far."""
    question = f"Session {session}: what is the weather in Oslo, hour by hour?"
    items: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "input_text", "text": question}]}
    ]
    for call in range(turn + 1):
        items.extend(tool_round(call + 1))
    return {
        "model": "auto",
        "instructions": INSTRUCTIONS,
        "input": items,
        "tools": TOOLS,
        "stream": True,
        "store": False,
    }


RESPONSES_BODY = responses_body(0, 0)


@dataclass
class Route:
    name: str
    url: str
    body: Callable[[int], dict[str, Any]]  # the request body of the n-th request
    done: Callable[[str], bool]  # whether a whole stream ended as it should
    client: httpx.Client
    samples_ms: list[float] = field(default_factory=list)
    sent: int = 0

    def call(self) -> None:
        body = self.body(self.sent)
        self.sent += 1
        started = time.perf_counter()
        with self.client.stream("POST", self.url, json=body) as response:
            text = response.read().decode()
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 200 or not self.done(text):
            raise RuntimeError(f"{self.name}: {response.status_code} {text[-400:]}")
        self.samples_ms.append(elapsed)


class Sessions:
    """The n-th request's body: sessions of `turns` turns, one after another. Bodies are made
    once, so every path sends the same bytes and the bench's own time is not measured."""

    def __init__(self, turns: int, requests: int) -> None:
        self.turns = turns
        self._responses = [self._make(n) for n in range(requests)]
        self._chats = [parse_responses_body(body).chat for body in self._responses]

    def _make(self, n: int) -> dict[str, Any]:
        return responses_body(n // self.turns, n % self.turns)

    def responses(self, n: int) -> dict[str, Any]:
        return self._responses[n]

    def chat(self, n: int) -> dict[str, Any]:
        return self._chats[n]


def responses_done(text: str) -> bool:
    return "response.completed" in text and "The tool said: rain in Oslo" in text


def chat_done(text: str) -> bool:
    return "data: [DONE]" in text and '"finish_reason":"stop"' in text.replace(" ", "")


def litellm_model_list(model_url: str) -> str:
    return (
        "  - model_name: auto\n"
        "    litellm_params:\n"
        "      model: openai/fake-model\n"
        f"      api_base: {model_url}\n"
        "      api_key: unused\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=200, help="measured requests per path")
    parser.add_argument("--turns", type=int, default=8, help="turns of each agent session")
    parser.add_argument("--no-litellm", action="store_true", help="skip the LiteLLM peer")
    parser.add_argument(
        "--granian",
        action="store_true",
        help="also serve the gateway and the floor with granian, interleaved with the rest",
    )
    parser.add_argument(
        "--against",
        type=Path,
        metavar="DIR",
        help="also run the gateway of the checkout in DIR, interleaved with the rest",
    )
    args = parser.parse_args(argv)
    model_port, gateway_port, litellm_port, floor_port = (free_port() for _ in range(4))
    model_url = f"http://127.0.0.1:{model_port}/v1"
    gateway_url = f"http://127.0.0.1:{gateway_port}/v1"
    litellm_url = f"http://127.0.0.1:{litellm_port}/v1"
    floor_url = f"http://127.0.0.1:{floor_port}/v1"
    sessions = Sessions(args.turns, WARMUP_REQUESTS + args.requests)
    litellm_missing = "skipped (--no-litellm)" if args.no_litellm else ""
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        model_args = [
            sys.executable,
            "-m",
            "bench.harness.scripted_agent",
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
        gateway = stack.enter_context(
            process(
                [*gateway_args, "--port", str(gateway_port)],
                f"http://127.0.0.1:{gateway_port}/healthz",
                workdir / "gateway.log",
            )
        )
        floor = stack.enter_context(floor_proxy(floor_port, model_url, workdir / "floor.log"))
        if not args.no_litellm:
            try:
                models = litellm_model_list(model_url)
                stack.enter_context(litellm_proxy(workdir, litellm_port, models))
            except Unavailable as unavailable:
                litellm_missing = str(unavailable)
        client = stack.enter_context(keep_alive_client(MASTER_KEY))
        paths = [
            Route(
                "responses, direct",
                f"{model_url}/responses",
                sessions.responses,
                responses_done,
                client,
            ),
            Route(
                "responses, gateway (bridged to chat)",
                f"{gateway_url}/responses",
                sessions.responses,
                responses_done,
                client,
            ),
            Route(
                "chat, direct", f"{model_url}/chat/completions", sessions.chat, chat_done, client
            ),
            Route(
                "chat, gateway", f"{gateway_url}/chat/completions", sessions.chat, chat_done, client
            ),
        ]
        paths += [
            Route(
                "responses, floor proxy",
                f"{floor_url}/responses",
                sessions.responses,
                responses_done,
                client,
            ),
            Route(
                "chat, floor proxy",
                f"{floor_url}/chat/completions",
                sessions.chat,
                chat_done,
                client,
            ),
        ]
        baselines: list[Route | None] = [None, paths[0], None, paths[2], paths[0], paths[2]]
        measured = {
            "gateway": psutil.Process(gateway.pid),
            "floor proxy": psutil.Process(floor.pid),
        }
        if args.against is not None:
            port = free_port()
            against = stack.enter_context(
                process(
                    [*gateway_args, "--port", str(port)],
                    f"http://127.0.0.1:{port}/healthz",
                    workdir / "against.log",
                    cwd=args.against,
                )
            )
            measured["against"] = psutil.Process(against.pid)
            url = f"http://127.0.0.1:{port}/v1"
            paths += [
                Route(
                    "responses, gateway of --against",
                    f"{url}/responses",
                    sessions.responses,
                    responses_done,
                    client,
                ),
                Route(
                    "chat, gateway of --against",
                    f"{url}/chat/completions",
                    sessions.chat,
                    chat_done,
                    client,
                ),
            ]
            baselines += [paths[0], paths[2]]
        if args.granian:
            for app, target in (("gateway", str(config)), ("floor", model_url)):
                port = free_port()
                log = workdir / f"granian-{app}.log"
                served = stack.enter_context(granian_server(app, port, target, log))
                name = "gateway" if app == "gateway" else "floor proxy"
                measured[f"{name}, granian"] = psutil.Process(served.pid)
                url = f"http://127.0.0.1:{port}/v1"
                paths += [
                    Route(
                        f"responses, {name}, granian",
                        f"{url}/responses",
                        sessions.responses,
                        responses_done,
                        client,
                    ),
                    Route(
                        f"chat, {name}, granian",
                        f"{url}/chat/completions",
                        sessions.chat,
                        chat_done,
                        client,
                    ),
                ]
                baselines += [paths[0], paths[2]]
        if not litellm_missing:
            paths.append(
                Route(
                    "responses, LiteLLM proxy",
                    f"{litellm_url}/responses",
                    sessions.responses,
                    responses_done,
                    client,
                )
            )
            paths.append(
                Route(
                    "chat, LiteLLM proxy",
                    f"{litellm_url}/chat/completions",
                    sessions.chat,
                    chat_done,
                    client,
                )
            )
            baselines += [paths[0], paths[2]]
        failed: dict[str, str] = {}
        for path in paths:
            for _ in range(WARMUP_REQUESTS):
                try:
                    path.call()
                except (RuntimeError, httpx.HTTPError) as error:
                    failed[path.name] = str(error).splitlines()[0][:100]
                    break
            path.samples_ms.clear()
        running = [path for path in paths if path.name not in failed]
        cpu_before = {name: cpu_s(process) for name, process in measured.items()}
        for _ in range(args.requests):  # interleaved: load from elsewhere hits every path alike
            for path in running:
                path.call()
        cpu_ms = {
            name: (cpu_s(process) - cpu_before[name]) * 1000 for name, process in measured.items()
        }
    size_kb = len(str(RESPONSES_BODY).encode()) / 1024
    print(
        f"streamed agent turns, request about {size_kb:.0f} KB and growing by a tool round trip "
        f"a turn, sessions of {args.turns} turns, {args.requests} per path\n"
    )
    header = f"{'path':<38} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'+p50 ms':>8}"
    print(header)
    print("-" * len(header))
    for path, baseline in zip(paths, baselines, strict=True):
        if path.name in failed:
            print(f"{path.name:<38} failed: {failed[path.name]}")
            continue
        p50 = percentile(path.samples_ms, 0.5)
        added = "" if baseline is None else f"{p50 - percentile(baseline.samples_ms, 0.5):+8.2f}"
        print(
            f"{path.name:<38} {p50:>8.2f} {percentile(path.samples_ms, 0.9):>8.2f} "
            f"{percentile(path.samples_ms, 0.99):>8.2f} {added:>8}"
        )
    if litellm_missing:
        print(f"{'LiteLLM proxy':<38} {litellm_missing}")
    by_name = {path.name: path for path in paths if path.name not in failed}
    for kind in ("responses", "chat"):
        gateway_path = by_name.get(
            f"{kind}, gateway" + (" (bridged to chat)" if kind == "responses" else "")
        )
        floor_path = by_name.get(f"{kind}, floor proxy")
        if gateway_path and floor_path:
            gateway_p50 = percentile(gateway_path.samples_ms, 0.5)
            over = gateway_p50 - percentile(floor_path.samples_ms, 0.5)
            print(f"{kind}: the gateway over the floor proxy at p50: {over:+.2f} ms")
    gateway_ms = cpu_ms["gateway"] / (2 * args.requests)
    floor_ms = cpu_ms["floor proxy"] / (2 * args.requests)
    print(f"\nthe gateway's CPU per request (both gateway paths): {gateway_ms:.2f} ms")
    print(f"the floor proxy's CPU per request (both of its paths): {floor_ms:.2f} ms")
    print(f"the gateway over the floor proxy, CPU per request: {gateway_ms - floor_ms:+.2f} ms")
    if "against" in cpu_ms:
        against_ms = cpu_ms["against"] / (2 * args.requests)
        print(
            f"the gateway of {args.against}: {against_ms:.2f} ms, {against_ms - floor_ms:+.2f} ms "
            f"over the floor proxy; this one's CPU over its: {gateway_ms / against_ms:.3f}"
        )
    if args.granian:
        print_servers(by_name, {name: ms / (2 * args.requests) for name, ms in cpu_ms.items()})
    return 0


def print_servers(by_name: dict[str, Route], cpu_per_request_ms: dict[str, float]) -> None:
    """Each app under each server: added latency over the direct call for each kind of turn,
    CPU per request over both, and granian's CPU as a share of uvicorn's."""
    header = (
        f"{'app':<12} {'server':<8} {'responses +p50 / +p99 ms':>25} {'chat +p50 / +p99 ms':>21}"
        f" {'CPU ms':>7}"
    )
    print(f"\nthe two servers, added over the direct call, CPU per request\n{header}")
    print("-" * len(header))
    for app, name in (("gateway-ls", "gateway"), ("floor", "floor proxy")):
        for server in ("uvicorn", "granian"):
            process = name if server == "uvicorn" else f"{name}, granian"
            added = []
            for kind in ("responses", "chat"):
                route = by_name.get(served_route_name(kind, name, server))
                direct = by_name[f"{kind}, direct"]
                if route is None:
                    added.append("failed")
                    continue
                p50 = percentile(route.samples_ms, 0.5) - percentile(direct.samples_ms, 0.5)
                p99 = percentile(route.samples_ms, 0.99) - percentile(direct.samples_ms, 0.99)
                added.append(f"{p50:+.2f} / {p99:+.2f}")
            print(
                f"{app:<12} {server:<8} {added[0]:>25} {added[1]:>21}"
                f" {cpu_per_request_ms[process]:>7.2f}"
            )
    for name in ("gateway", "floor proxy"):
        ratio = cpu_per_request_ms[f"{name}, granian"] / cpu_per_request_ms[name]
        print(f"granian's CPU per request over uvicorn's, the {name}: {ratio:.2f}")


def served_route_name(kind: str, name: str, server: str) -> str:
    """The route's name for `kind` ("responses" or "chat") through `name` ("gateway" or "floor
    proxy") on `server`."""
    if server == "granian":
        return f"{kind}, {name}, granian"
    if name == "gateway" and kind == "responses":
        return "responses, gateway (bridged to chat)"
    return f"{kind}, {name}"


def cpu_s(process: psutil.Process) -> float:
    """The process's CPU time so far (user and system), in seconds."""
    return sum(process.cpu_times()[:2])


if __name__ == "__main__":
    raise SystemExit(main())
