"""The model behind `bench_team`: an OpenAI-compatible server with a model's pacing.

Completions (keystrokes, fill-in-the-middle) and chat completions (agent turns: a tool call, or
text once the conversation holds a tool's result) are streamed with a time to first token and a
pace between chunks drawn from lognormals. Each request's draws are made from the number the
load writes into it (`seq:N`), so the same request meets the same model whichever way it comes
(straight, through gateway-ls, through LiteLLM) and the benchmark can pair them. It keeps no
record of requests, so its memory stays flat over a long run.

Run as `python -m bench.team_upstream PORT`.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import re
import sys
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from lsp_server.event_loop import run_on_fastest_loop

# Medians and spreads (sigma of the lognormal) of the model's pacing, in seconds.
KEYSTROKE_FIRST_TOKEN = (0.040, 0.35)
AGENT_FIRST_TOKEN = (0.300, 0.45)
CHUNK_GAP = (0.006, 0.3)
KEYSTROKE_CHUNKS = 8
AGENT_TEXT_CHUNKS = 24
TOOL_CALL_SHARE = 0.85  # of agent turns offering tools that call one (the rest answer in words)
_SEQ = re.compile(rb"seq:(\d+)")


def draws(body: bytes) -> random.Random:
    """The request's own random draws, from the last `seq:N` in it (the newest turn's;
    unnumbered: a fixed seed)."""
    at = body.rfind(b"seq:")
    found = _SEQ.match(body, at) if at != -1 else None
    return random.Random(int(found.group(1)) if found else 0)


def lognormal(rng: random.Random, median_sigma: tuple[float, float]) -> float:
    median, sigma = median_sigma
    return median * math.exp(rng.gauss(0, sigma))


def sse(payload: dict[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


def usage(prompt_bytes: int, completion_tokens: int) -> dict[str, int]:
    prompt_tokens = max(1, prompt_bytes // 4)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def wants_usage(payload: dict[str, Any]) -> bool:
    options = payload.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


async def paced(
    rng: random.Random, first: tuple[float, float], chunks: list[bytes]
) -> AsyncIterator[bytes]:
    await asyncio.sleep(lognormal(rng, first))
    for index, chunk in enumerate(chunks):
        if index:
            await asyncio.sleep(lognormal(rng, CHUNK_GAP))
        yield chunk


async def completions(request: Request) -> Response:
    body = await request.body()
    payload = json.loads(body)
    rng = draws(body)
    words = [f" tok{rng.randrange(1000)}" for _ in range(KEYSTROKE_CHUNKS)]

    def chunk(text: str, finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "text": text, "finish_reason": finish}
        return {
            "id": "cmpl-team",
            "object": "text_completion",
            "model": "team",
            "choices": [choice],
        }

    pieces = [sse(chunk(word)) for word in words[:-1]]
    pieces.append(sse(chunk(words[-1], "stop")))
    if wants_usage(payload):
        pieces.append(
            sse({"id": "cmpl-team", "choices": [], "usage": usage(len(body), len(words))})
        )
    pieces.append(sse("[DONE]"))
    if not payload.get("stream"):
        await asyncio.sleep(lognormal(rng, KEYSTROKE_FIRST_TOKEN))
        answer = chunk("".join(words), "stop")
        return JSONResponse({**answer, "usage": usage(len(body), len(words))})
    return StreamingResponse(
        paced(rng, KEYSTROKE_FIRST_TOKEN, pieces), media_type="text/event-stream"
    )


async def chat(request: Request) -> Response:
    body = await request.body()
    payload = json.loads(body)
    rng = draws(body)
    calls_tool = bool(payload.get("tools")) and rng.random() < TOOL_CALL_SHARE

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {
            "id": "chatcmpl-team",
            "object": "chat.completion.chunk",
            "model": "team",
            "choices": [choice],
        }

    pieces = [sse(chunk({"role": "assistant", "content": ""}))]
    if calls_tool:
        arguments = json.dumps(
            {"path": f"src/module_{rng.randrange(100)}.py", "line": rng.randrange(900)}
        )
        call = {"index": 0, "id": f"call_{rng.randrange(10**9)}", "type": "function"}
        call["function"] = {"name": "read_file", "arguments": ""}
        pieces.append(sse(chunk({"tool_calls": [call]})))
        for start in range(0, len(arguments), 8):
            piece = {"index": 0, "function": {"arguments": arguments[start : start + 8]}}
            pieces.append(sse(chunk({"tool_calls": [piece]})))
        pieces.append(sse(chunk({}, "tool_calls")))
        completion_tokens = len(arguments) // 4 + 8
    else:
        words = [f" word{rng.randrange(1000)}" for _ in range(AGENT_TEXT_CHUNKS)]
        pieces.extend(sse(chunk({"content": word})) for word in words)
        pieces.append(sse(chunk({}, "stop")))
        completion_tokens = len(words)
    if wants_usage(payload):
        pieces.append(
            sse(
                {"id": "chatcmpl-team", "choices": [], "usage": usage(len(body), completion_tokens)}
            )
        )
    pieces.append(sse("[DONE]"))
    return StreamingResponse(paced(rng, AGENT_FIRST_TOKEN, pieces), media_type="text/event-stream")


async def models(request: Request) -> Response:
    return JSONResponse({"object": "list", "data": [{"id": "team", "object": "model"}]})


def app() -> Starlette:
    return Starlette(
        routes=[
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models),
        ]
    )


def main(argv: list[str]) -> None:
    config = uvicorn.Config(
        app(),
        host="127.0.0.1",
        port=int(argv[0]),
        log_level="warning",
        access_log=False,
        lifespan="off",
        backlog=2048,
    )
    run_on_fastest_loop(uvicorn.Server(config).serve())


if __name__ == "__main__":
    main(sys.argv[1:])
