"""The model behind `bench_team`: `FakeLLMServer` with a model's pacing, drawn per request.

Completions (keystrokes, fill-in-the-middle) and chat completions (agent turns: a tool call, or
text once the conversation holds a tool's result) are streamed with a time to first token and a
pace between chunks drawn from lognormals. Each request's draws are made from the number the
load writes into it (`seq:N`), so the same request meets the same model whichever way it comes
(straight, through gateway-ls, through LiteLLM) and the benchmark can pair them. The server is
started `for_load`: it keeps no record of requests, so its memory stays flat over a long run.

Run as `python -m bench.team_upstream PORT`.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import re
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

import orjson

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer, JsonObject, RecordedRequest

# Medians and spreads (sigma of the lognormal) of the model's pacing, in seconds.
KEYSTROKE_FIRST_TOKEN = (0.040, 0.35)
AGENT_FIRST_TOKEN = (0.300, 0.45)
CHUNK_GAP = (0.006, 0.3)
KEYSTROKE_CHUNKS = 8
AGENT_TEXT_CHUNKS = 24
TOOL_CALL_SHARE = 0.85  # of agent turns offering tools that call one (the rest answer in words)
ARGUMENT_PIECE_CHARS = 8  # a tool call's arguments stream in pieces of this many characters
SCRIPTED_HEADER = "x-scripted-ms"  # the answer's own time as scripted: first token to [DONE]
MODEL = "team"
_SEQ = re.compile(r"seq:(\d+)")


def seq_of(payload: JsonObject) -> int | None:
    """The last `seq:N` in the request's prompt or messages (the newest turn's)."""
    texts = [str(payload.get("prompt") or "")]
    messages = payload.get("messages")
    if isinstance(messages, list):
        texts = [str(m.get("content") or "") for m in messages if isinstance(m, dict)]
    for text in reversed(texts):
        found = list(_SEQ.finditer(text))
        if found:
            return int(found[-1].group(1))
    return None


def lognormal(rng: random.Random, median_sigma: tuple[float, float]) -> float:
    median, sigma = median_sigma
    return median * math.exp(rng.gauss(0, sigma))


def paced(rng: random.Random, first: tuple[float, float], pieces: int, **answer: Any) -> Behaviour:
    """An answer of `pieces` paced parts: the first token's wait, then a chunk's gap before
    each of the others. The usage chunk and `[DONE]` go out with the last part, as OpenAI sends
    them, so the answer takes as long whether or not the client asked for usage."""
    gaps = (lognormal(rng, first), *(lognormal(rng, CHUNK_GAP) for _ in range(pieces - 1)))
    scripted_ms = f"{sum(gaps) * 1000:.3f}"
    return Behaviour(
        gaps_s=gaps, headers=((SCRIPTED_HEADER, scripted_ms),), models=(MODEL,), **answer
    )


def completion(rng: random.Random, stream: bool) -> Behaviour:
    """A keystroke's answer: words of equal length, one a part."""
    words = [f" tok{rng.randrange(1000):03d}" for _ in range(KEYSTROKE_CHUNKS)]
    behaviour = paced(
        rng, KEYSTROKE_FIRST_TOKEN, len(words), text="".join(words), chunk_chars=len(words[0])
    )
    if stream:
        return behaviour
    return Behaviour(text=behaviour.text, latency_s=behaviour.gaps_s[0], models=(MODEL,))


def chat(rng: random.Random, offers_tools: bool) -> Behaviour:
    """An agent turn's answer: the assistant's role, then a tool call (its name, then its
    arguments in pieces) or words, then the finish; each a part."""
    if offers_tools and rng.random() < TOOL_CALL_SHARE:
        arguments = orjson.dumps(
            {"path": f"src/module_{rng.randrange(100)}.py", "line": rng.randrange(900)}
        ).decode()
        call = {"id": f"call_{rng.randrange(10**9)}", "name": "read_file", "arguments": arguments}
        argument_pieces = math.ceil(len(arguments) / ARGUMENT_PIECE_CHARS)
        return paced(
            rng,
            AGENT_FIRST_TOKEN,
            1 + 1 + argument_pieces + 1,
            text="",
            tool_calls=(call,),
            chunk_chars=ARGUMENT_PIECE_CHARS,
        )
    words = [f" word{rng.randrange(1000):03d}" for _ in range(AGENT_TEXT_CHUNKS)]
    return paced(
        rng, AGENT_FIRST_TOKEN, 1 + len(words) + 1, text="".join(words), chunk_chars=len(words[0])
    )


def team_profile(payload: JsonObject) -> Behaviour:
    """The request's answer, drawn from its `seq` (unnumbered: a fixed seed)."""
    rng = random.Random(seq_of(payload) or 0)
    if "messages" in payload:
        return chat(rng, bool(payload.get("tools")))
    return completion(rng, payload.get("stream") is True)


def trace_writer(trace: IO[str]) -> Callable[[RecordedRequest, float], None]:
    """Per streamed answer, a line in `trace` (`bench_team --trace`): its `seq`, whether it
    came on a new connection, when it arrived, when its body was read and when its last part
    was sent (the machine's monotonic clock, as the bench reads it)."""
    seen: set[tuple[str, int] | None] = set()  # connections (the client's address)

    def note(request: RecordedRequest, sent: float) -> None:
        payload = request.json
        if not isinstance(payload, dict) or payload.get("stream") is not True:
            return
        new = request.client not in seen
        seen.add(request.client)
        seq = seq_of(payload) or 0
        trace.write(f"{seq} {int(new)} {request.arrived:.6f} {request.time:.6f} {sent:.6f}\n")

    return note


def main(argv: list[str]) -> None:
    server = FakeLLMServer(Behaviour(models=(MODEL,)), name=MODEL, port=int(argv[0]), for_load=True)
    server.profile = team_profile
    with contextlib.ExitStack() as stack:
        where = os.environ.get("TEAM_UPSTREAM_TRACE")
        if where:
            server.answered = trace_writer(stack.enter_context(open(where, "a", buffering=1)))
        stack.enter_context(server)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1:])
