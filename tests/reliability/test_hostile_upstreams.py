"""Upstreams that misbehave below the API, against the real server over stdio.

Each scenario gives the server one freshly named hostile endpoint
(`tests/support/hostile_upstream.py`) through the config file (an editor may not name
endpoints), alone, so the
router cannot rank it away and every keystroke meets it (failing over from a failed endpoint is
the fault matrix's subject, and the gateway's chat tests'). Keystrokes have the contract's 350 ms
deadline, except in the floods: there the hostile endpoint gets the time to fail on its own, and
the test shows that it fails as a malformed stream, within the deadline, in bounded memory.
Every keystroke must come back in time, and the status must tell what happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pytest_lsp import LanguageClient

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from tests.support import hostile_upstream as hostile
from tests.support.config_text import LOCAL_OFF
from tests.support.lsp_session import (
    endpoint_toml,
    inline_completion,
    lsp_session,
    open_document,
    server_status,
)
from tests.support.report import ServerLog, ServerMemory, report_scenario

DEADLINE_MS = 350
FLOOD_DEADLINE_MS = 1500
MARGIN_S = 1.5  # what the test tolerates on a shared machine: late, but never hung
MAX_GROWTH_MB = 64  # an endless line may cost a bounded buffer, never its length
ROUTING = f"[routing]\ninline_deadline_ms = {DEADLINE_MS}\nhedge_after_ms = 120\n" + LOCAL_OFF
FLOOD_ROUTING = (
    f"[routing]\ninline_deadline_ms = {FLOOD_DEADLINE_MS}\n"
    f"hedge_after_ms = {FLOOD_DEADLINE_MS - 100}\n" + LOCAL_OFF
)
HOSTILE_TEXT = "hostile_but_fine(7)"
DOCUMENT = "value = \n"
_documents = itertools.count()


@dataclass
class Keystrokes:
    """Keystroke-level requests sent, how many came back within deadline + 100 ms."""

    deadline_ms: int = DEADLINE_MS
    sent: int = 0
    in_time: int = 0
    latencies_s: list[float] = field(default_factory=list)

    async def send(self, client: LanguageClient, tmp_path: Path) -> tuple[str, str]:
        """One keystroke in a fresh document (nothing cached); its text and its uri."""
        uri = (tmp_path / f"doc{next(_documents)}.py").as_uri()
        open_document(client, uri, DOCUMENT)
        started = time.monotonic()
        result = await asyncio.wait_for(
            inline_completion(client, uri, 0, 8), self.deadline_ms / 1000 + MARGIN_S
        )
        elapsed = time.monotonic() - started
        self.sent += 1
        self.in_time += elapsed <= self.in_time_s
        self.latencies_s.append(elapsed)
        text = result.items[0].insert_text if result and result.items else ""
        return str(text), uri

    @property
    def in_time_s(self) -> float:
        return (self.deadline_ms + 100) / 1000


def endpoint(name: str, base_url: str, *, timeout_ms: int = 2000) -> str:
    return endpoint_toml(name, base_url, extra=f"timeout_ms = {timeout_ms}")


async def use_endpoints(client: LanguageClient, tmp_path: Path, *endpoints: str) -> None:
    """Name the endpoints in the session's config file and wait for the server to take them."""
    config = tmp_path / "config.toml"
    routing = config.read_text(encoding="utf-8").split("[[endpoints]]")[0]
    config.write_text(routing + "".join(endpoints), encoding="utf-8")
    names = [
        line.split('"')[1] for e in endpoints for line in e.splitlines() if line.startswith("name")
    ]
    deadline = time.monotonic() + 15
    while [e["name"] for e in (await server_status(client))["endpoints"]] != names:
        assert time.monotonic() < deadline, f"the server never switched to {names}"
        await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def sampling(memory: ServerMemory) -> AsyncIterator[None]:
    """Sample the server's RSS every few milliseconds, so a short-lived peak is seen."""

    async def sample() -> None:
        while True:
            memory.sample()
            await asyncio.sleep(0.01)

    task = asyncio.create_task(sample())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.fixture
async def session(tmp_path: Path) -> AsyncIterator[LanguageClient]:
    async with lsp_session(tmp_path, config_text=ROUTING) as client:
        await server_status(client)  # started up: the first keystroke's own test is the last one
        yield client


@pytest.fixture
async def flood_session(tmp_path: Path) -> AsyncIterator[LanguageClient]:
    async with lsp_session(tmp_path, config_text=FLOOD_ROUTING) as client:
        await server_status(client)
        yield client


@pytest.mark.parametrize(
    ("scenario", "mode", "complaint"),
    [
        ("endless-sse-line", hostile.endless_line, "SSE event too large"),
        ("compressed-bomb", hostile.compressed_bomb, "response body too large"),
    ],
)
async def test_a_flood_fails_as_malformed_within_the_deadline_in_bounded_memory(
    flood_session: LanguageClient,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    scenario: str,
    mode: Any,
    complaint: str,
) -> None:
    session = flood_session
    log = ServerLog(capfd)
    log.follow(session)
    memory = ServerMemory()
    keystrokes = Keystrokes(FLOOD_DEADLINE_MS)
    with hostile.HostileUpstream(mode()) as upstream:
        name = f"hostile-{scenario}"
        await use_endpoints(session, tmp_path, endpoint(name, upstream.base_url))
        async with sampling(memory):
            for _ in range(3):
                text, _ = await keystrokes.send(session, tmp_path)
                assert text == "", text
            assert await log.wait_for(f"{name}: protocol: "), log.text[-2000:]
        assert all(r.headers.get("accept-encoding") == "identity" for r in upstream.requests)
        growth = memory.peak_growth_mb()
    report = {e["name"]: e for e in (await server_status(session))["endpoints"]}
    assert report[name]["errors"] >= 1 and report[name]["wins"] == 0, report[name]
    assert complaint in report[name]["last_error"], report[name]
    assert growth < MAX_GROWTH_MB, f"the server grew by {growth:.0f} MB"
    assert "Traceback" not in log.text
    report_scenario(
        f"upstream-{scenario}",
        requests=keystrokes.sent,
        failures_survived=report[name]["errors"],
        memory_growth_mb=growth,
        keystrokes=keystrokes.sent,
        in_time=keystrokes.in_time,
        failed_over=0,
    )


async def test_usage_that_is_not_a_number_is_ignored(
    session: LanguageClient, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    log = ServerLog(capfd)
    log.follow(session)
    memory = ServerMemory()
    keystrokes = Keystrokes()
    nonsense = '{"prompt_tokens": "n/a", "completion_tokens": 1e400, "total_tokens": [1]}'
    with hostile.HostileUpstream(hostile.streams_text(HOSTILE_TEXT, usage=nonsense)) as upstream:
        await use_endpoints(session, tmp_path, endpoint("bad-usage", upstream.base_url))
        texts = [(await keystrokes.send(session, tmp_path))[0] for _ in range(3)]
    assert texts.count(HOSTILE_TEXT) >= 2, texts  # served: neither failed nor empty
    report = {e["name"]: e for e in (await server_status(session))["endpoints"]}
    assert report["bad-usage"]["errors"] == 0, report["bad-usage"]
    assert report["bad-usage"]["wins"] == 3, report["bad-usage"]
    assert "Traceback" not in log.text and "never retrieved" not in log.text
    report_scenario(
        "upstream-usage-not-a-number",
        requests=keystrokes.sent,
        memory_growth_mb=memory.growth_mb(),
        failures_survived=keystrokes.sent,
        keystrokes=keystrokes.sent,
        in_time=keystrokes.in_time,
        failed_over=0,
    )


async def test_a_dead_pooled_connection_is_retried_on_a_fresh_one(
    session: LanguageClient, tmp_path: Path
) -> None:
    memory = ServerMemory()
    keystrokes = Keystrokes()
    with hostile.HostileUpstream(hostile.dies_when_reused(HOSTILE_TEXT)) as upstream:
        await use_endpoints(session, tmp_path, endpoint("flaky-pool", upstream.base_url))
        texts = [(await keystrokes.send(session, tmp_path))[0] for _ in range(4)]
        reused = sum(r.connection_requests > 0 for r in upstream.requests)
    assert reused >= 1, "no request came on a kept-alive connection: nothing was tested"
    report = {e["name"]: e for e in (await server_status(session))["endpoints"]}
    assert report["flaky-pool"]["errors"] == 0, report["flaky-pool"]
    assert texts == [HOSTILE_TEXT] * 4, texts
    report_scenario(
        "upstream-dead-pooled-connection",
        requests=keystrokes.sent,
        memory_growth_mb=memory.growth_mb(),
        failures_survived=reused,
        keystrokes=keystrokes.sent,
        in_time=keystrokes.in_time,
        failed_over=0,
    )


async def test_retry_after_of_a_day_is_capped(session: LanguageClient, tmp_path: Path) -> None:
    memory = ServerMemory()
    keystrokes = Keystrokes()
    behaviour = Behaviour(text=HOSTILE_TEXT, fault="status:429", retry_after="100000")
    with FakeLLMServer(behaviour, name="sleepy") as upstream:
        await use_endpoints(session, tmp_path, endpoint("sleepy", upstream.base_url))
        text, _ = await keystrokes.send(session, tmp_path)
    assert text == ""
    report = {e["name"]: e for e in (await server_status(session))["endpoints"]}
    assert report["sleepy"]["health"] == "open", report["sleepy"]
    assert 0 < report["sleepy"]["retry_in_s"] <= 300, report["sleepy"]
    report_scenario(
        "upstream-retry-after-100000",
        requests=keystrokes.sent,
        memory_growth_mb=memory.growth_mb(),
        failures_survived=1,
        keystrokes=keystrokes.sent,
        in_time=keystrokes.in_time,
        failed_over=0,
    )


@pytest.mark.timing
async def test_the_first_keystroke_keeps_the_deadline_against_a_stalled_upstream(
    tmp_path: Path,
) -> None:
    keystrokes = Keystrokes()
    with hostile.HostileUpstream(hostile.stalls()) as upstream:
        config = ROUTING + (
            f'[[endpoints]]\nname = "stalled"\nkind = "openai"\nbase_url = "{upstream.base_url}"\n'
            'model = "fake-model"\nroles = ["inline"]\n'
        )
        async with lsp_session(tmp_path, config_text=config) as client:
            text, _ = await keystrokes.send(client, tmp_path)
            for _ in range(2):
                await keystrokes.send(client, tmp_path)
    assert text == ""
    first, *later = keystrokes.latencies_s
    # The first keystroke pays nothing the later ones do not (start-up work is off the loop);
    # the later ones show what this machine's load adds to the deadline right now.
    allowed_s = max(keystrokes.in_time_s, *later) + 0.25
    assert first <= allowed_s, f"the first keystroke took {first * 1000:.0f} ms, then {later}"
    report_scenario(
        "upstream-stalled-first-keystroke",
        requests=keystrokes.sent,
        memory_growth_mb=None,
        failures_survived=keystrokes.sent,
        keystrokes=keystrokes.sent,
        in_time=keystrokes.in_time,
        failed_over=0,
    )
