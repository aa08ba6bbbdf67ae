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
import math
import os
import random
import re
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson
import uvicorn

from lsp_server.event_loop import run_on_fastest_loop

# Medians and spreads (sigma of the lognormal) of the model's pacing, in seconds.
KEYSTROKE_FIRST_TOKEN = (0.040, 0.35)
AGENT_FIRST_TOKEN = (0.300, 0.45)
CHUNK_GAP = (0.006, 0.3)
KEYSTROKE_CHUNKS = 8
AGENT_TEXT_CHUNKS = 24
TOOL_CALL_SHARE = 0.85  # of agent turns offering tools that call one (the rest answer in words)
SCRIPTED_HEADER = "x-scripted-ms"  # the answer's own time as scripted: first token to [DONE]
_SEQ = re.compile(rb"seq:(\d+)")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


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
    data = payload.encode() if isinstance(payload, str) else orjson.dumps(payload)
    return b"data: " + data + b"\n\n"


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


class Script:
    """An answer's pieces and the wait before each: the first token's, then a chunk's gap.
    The usage chunk and `[DONE]` go out with the last piece, as OpenAI sends them, so the
    script takes as long whether or not the client asked for usage."""

    def __init__(self, rng: random.Random, first: tuple[float, float], pieces: list[bytes]):
        self.pieces = pieces
        self.waits = [lognormal(rng, first)] + [lognormal(rng, CHUNK_GAP) for _ in pieces[1:]]

    def close_with(self, tail: list[bytes]) -> None:
        self.pieces[-1] += b"".join(tail)

    @property
    def ms(self) -> float:
        return sum(self.waits) * 1000


def completion_script(body: bytes, payload: dict[str, Any]) -> tuple[Script, bytes]:
    """A keystroke's streamed answer, and the non-streamed one."""
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
    script = Script(rng, KEYSTROKE_FIRST_TOKEN, pieces)
    tail = [sse("[DONE]")]
    if wants_usage(payload):
        answer_usage = usage(len(body), len(words))
        tail.insert(0, sse({"id": "cmpl-team", "choices": [], "usage": answer_usage}))
    script.close_with(tail)
    whole = {**chunk("".join(words), "stop"), "usage": usage(len(body), len(words))}
    return script, orjson.dumps(whole)


def chat_script(body: bytes, payload: dict[str, Any]) -> Script:
    """An agent turn's streamed answer: a tool call, or text."""
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
        arguments = orjson.dumps(
            {"path": f"src/module_{rng.randrange(100)}.py", "line": rng.randrange(900)}
        ).decode()
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
    script = Script(rng, AGENT_FIRST_TOKEN, pieces)
    tail = [sse("[DONE]")]
    if wants_usage(payload):
        answer_usage = usage(len(body), completion_tokens)
        tail.insert(0, sse({"id": "chatcmpl-team", "choices": [], "usage": answer_usage}))
    script.close_with(tail)
    return script


class Trace:
    """Per answered request, where `TEAM_UPSTREAM_TRACE` names a file (`bench_team --trace`):
    its `seq`, whether it came on a new connection, when it arrived, when its body was read and
    when its last piece was sent (the machine's monotonic clock, as the bench reads it)."""

    def __init__(self) -> None:
        where = os.environ.get("TEAM_UPSTREAM_TRACE")
        self._file = open(where, "a", buffering=1) if where else None  # noqa: SIM115
        self._seen: set[tuple[Any, ...]] = set()  # connections (the client's address)

    def note(self, scope: Scope, body: bytes, arrived: float, read: float) -> None:
        if self._file is None:
            return
        client = tuple(scope.get("client") or ())
        new = client not in self._seen
        self._seen.add(client)
        at = body.rfind(b"seq:")
        found = _SEQ.match(body, at) if at != -1 else None
        seq = found.group(1).decode() if found else "0"
        self._file.write(f"{seq} {int(new)} {arrived:.6f} {read:.6f} {time.monotonic():.6f}\n")


TRACE = Trace()


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """The three routes as a bare ASGI app: the model's own work per request is the JSON it
    reads and the pieces it paces, with no framework between them and uvicorn."""
    arrived = time.monotonic()
    path = scope["path"]
    if scope["method"] == "GET" and path == "/v1/models":
        await _answer(send, 200, b"application/json", MODELS)
        return
    if scope["method"] != "POST" or path not in ("/v1/completions", "/v1/chat/completions"):
        await _answer(send, 404, b"application/json", b'{"error":{"message":"not found"}}')
        return
    body = await _body(receive)
    read = time.monotonic()
    payload = orjson.loads(body)
    if path == "/v1/completions":
        script, whole = completion_script(body, payload)
        if not payload.get("stream"):
            await asyncio.sleep(script.waits[0])
            await _answer(send, 200, b"application/json", whole)
            return
    else:
        script = chat_script(body, payload)
    headers = [
        (b"content-type", b"text/event-stream"),
        (SCRIPTED_HEADER.encode(), f"{script.ms:.3f}".encode()),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for wait, piece in zip(script.waits, script.pieces, strict=True):
        await asyncio.sleep(wait)
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
    TRACE.note(scope, body, arrived, read)


MODELS = orjson.dumps({"object": "list", "data": [{"id": "team", "object": "model"}]})


async def _body(receive: Receive) -> bytes:
    parts = []
    while True:
        message = await receive()
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(parts)


async def _answer(send: Send, status: int, media_type: bytes, body: bytes) -> None:
    headers = [(b"content-type", media_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main(argv: list[str]) -> None:
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=int(argv[0]),
        log_level="warning",
        access_log=False,
        lifespan="off",
        backlog=2048,
        http="httptools",
    )
    run_on_fastest_loop(uvicorn.Server(config).serve())


if __name__ == "__main__":
    main(sys.argv[1:])
