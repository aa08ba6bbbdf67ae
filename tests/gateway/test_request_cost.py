"""What one request costs the gateway's event loop: the tasks and the timers it makes.

A relay needs one task a request (the server's) and no timer of its own; every task and timer
more is a wake-up and its bookkeeping on every request of a team's load. The gateway runs here
in the test's own event loop (uvicorn over the app, as `gateway-ls gateway` serves it), the
client in a thread and the upstream in its own, so what the loop counts is the gateway's alone.
The counts are bounds: a change that makes more fails here and says how many.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any

import httpx
import pytest
import uvicorn

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from bench.harness.processes import free_port
from lsp_server.config.loader import parse_config_text
from lsp_server.core.engine import Engine
from lsp_server.gateway.app import create_app
from lsp_server.gateway.slow_clients import BodyDeadline, head_timeout_protocol
from tests.support.lsp_session import endpoint_toml

REQUESTS = 20
ROUNDS = 5


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(Behaviour(text="Hello there, friend."), name="up") as server:
        yield server


@pytest.fixture(scope="module")
def lines_upstream() -> Iterator[FakeLLMServer]:
    """A keystroke's answer of two lines, streamed a few characters an event."""
    answer = Behaviour(text="total = a + b\n    return total\n", chunk_chars=4)
    with FakeLLMServer(answer, name="up") as server:
        yield server


@contextlib.asynccontextmanager
async def serving(upstream: FakeLLMServer) -> AsyncIterator[tuple[str, asyncio.Task[None]]]:
    config = parse_config_text(
        "[local]\nenabled = false\n"
        + endpoint_toml("up", upstream.base_url, roles='["inline", "agent"]'),
        file="c.toml",
    )
    engine = Engine(config)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            BodyDeadline(create_app(engine, clients=None), timeout_s=10),
            host="127.0.0.1",
            port=port,
            http=head_timeout_protocol(10, max_half_open_per_ip=64),
            log_level="warning",
            access_log=False,
            lifespan="off",
        )
    )
    serve = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}/v1", serve
    finally:
        server.should_exit = True
        await serve
        await engine.aclose()


class LoopCounts:
    """The tasks and timers the running loop makes while counting, but for the server's own
    ticks (uvicorn's main loop wakes every 0.1 s, whatever the requests)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, server_task: asyncio.Task[None]) -> None:
        self.loop = loop
        self.server_task = server_task
        self.tasks = 0
        self.timers = 0
        self.counting = False

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        loop = self.loop
        call_at = loop.call_at

        def factory(
            loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
        ) -> asyncio.Task[Any]:
            self.tasks += self.counting
            return asyncio.Task(coro, loop=loop, **kwargs)

        def counted_call_at(
            when: float, callback: Callable[..., object], *args: Any, **kwargs: Any
        ) -> asyncio.TimerHandle:
            if asyncio.current_task() is not self.server_task:
                self.timers += self.counting
            return call_at(when, callback, *args, **kwargs)

        loop.set_task_factory(factory)  # type: ignore[arg-type]
        loop.call_at = counted_call_at  # type: ignore[method-assign, assignment]
        try:
            yield
        finally:
            loop.set_task_factory(None)
            del loop.call_at


async def per_request(
    upstream: FakeLLMServer, body: dict[str, Any], path: str = "/chat/completions"
) -> tuple[float, float]:
    """The tasks a request makes (the most of any round) and its timers (the fewest of any
    round): a read or a write that has to wait makes a timer, and a loaded machine makes more
    of them wait, so the quietest round is the one that shows what the code itself asks for."""
    rounds: list[tuple[float, float]] = []
    async with serving(upstream) as (base_url, server_task):
        with httpx.Client(base_url=base_url, timeout=10) as client:

            def ask() -> None:
                with client.stream("POST", path, json=body) as answer:
                    assert answer.status_code == 200
                    answer.read()

            await asyncio.to_thread(ask)  # connections open, first-time work done
            for _ in range(ROUNDS):
                counts = LoopCounts(asyncio.get_running_loop(), server_task)
                with counts.installed():
                    counts.counting = True
                    for _ in range(REQUESTS):
                        await asyncio.to_thread(ask)
                    counts.counting = False
                rounds.append((counts.tasks / REQUESTS, counts.timers / REQUESTS))
    return max(tasks for tasks, _ in rounds), min(timers for _, timers in rounds)


CHAT = {"model": "up", "messages": [{"role": "user", "content": "Say hi."}]}
# The timers' bound: a quiet machine counts about 6 a request, a loaded one up to 7.5 in its
# quietest round; before one task watched the client they were 9 (whole) and 8.6 (streamed).
MAX_TIMERS = 8


async def test_a_chat_answer_makes_two_tasks_and_few_timers(upstream: FakeLLMServer) -> None:
    # The server's task, and the one that watches the client while the route runs in it.
    # Timers: the body's deadline, the route's, the upstream stream's and reads that wait,
    # and uvicorn's keep-alive; none for a head or a write that came or went whole.
    tasks, timers = await per_request(upstream, CHAT)
    assert tasks == 2 and timers <= MAX_TIMERS, f"{tasks:.2f} tasks, {timers:.2f} timers a request"


async def test_a_streamed_chat_makes_three_tasks_and_few_timers(upstream: FakeLLMServer) -> None:
    # The server's task, the routed call's (it feeds the stream the server's task writes), and
    # one watch of the client from the wait for the first piece to the stream's end. The
    # upstream is `openai`: its events are relayed, within the bounds their rewriting kept.
    tasks, timers = await per_request(upstream, {**CHAT, "stream": True})
    assert tasks == 3 and timers <= MAX_TIMERS, f"{tasks:.2f} tasks, {timers:.2f} timers a request"


async def test_a_streamed_responses_turn_makes_three_tasks_and_few_timers(
    upstream: FakeLLMServer,
) -> None:
    # As a streamed chat: the Responses API bridged onto the chat path, its events rewritten.
    body = {"model": "up", "input": "Say hi.", "instructions": "Be brief.", "stream": True}
    tasks, timers = await per_request(upstream, body, "/responses")
    assert tasks == 3 and timers <= MAX_TIMERS, f"{tasks:.2f} tasks, {timers:.2f} timers a request"


KEYSTROKE = {"model": "up", "prompt": "def add(a, b):\n    ", "suffix": "\n", "max_tokens": 16}


async def test_a_completion_makes_two_tasks_and_few_timers(upstream: FakeLLMServer) -> None:
    # The server's task and the watch of the client while the route runs in it.
    tasks, timers = await per_request(upstream, KEYSTROKE, "/completions")
    assert tasks == 2 and timers <= MAX_TIMERS, f"{tasks:.2f} tasks, {timers:.2f} timers a request"


@pytest.mark.parametrize("answer", ["lines_upstream", "upstream"])
async def test_a_streamed_completion_makes_three_tasks_and_few_timers(
    answer: str, request: pytest.FixtureRequest
) -> None:
    # The server's task, the routed call's, and one watch of the client from the wait for the
    # first piece to the stream's end: a keystroke streamed as its lines settle (two lines), or
    # one settled only at its end (a line without its break), whose stream the watch that
    # guarded the wait guards too, where the stream started a watch of its own before.
    body = {**KEYSTROKE, "stream": True}
    tasks, timers = await per_request(request.getfixturevalue(answer), body, "/completions")
    assert tasks == 3 and timers <= MAX_TIMERS, f"{tasks:.2f} tasks, {timers:.2f} timers a request"
