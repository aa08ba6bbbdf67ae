"""A keystroke storm: thousands of inline requests while typing, most of them cancelled at once.

The real server over stdio against a loopback endpoint with a little latency. What must hold when
the storm is over: every request got exactly one response (its result, or RequestCancelled), no
HTTP stream or task was left behind, memory stayed flat, the server's copy of the document is the
text the edits build, and nothing of a sensitive document reached the endpoint.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.lsp_session import endpoint_toml
from tests.support.raw_lsp import REQUEST_CANCELLED, RawLspClient, raw_lsp_server
from tests.support.report import report_scenario

pytestmark = pytest.mark.slow

REQUESTS = 2000
WARM_UP = 200
PER_SECOND = 50
CANCELLED_SHARE = 0.9
CANCEL_WITHIN_S = 0.03
SENSITIVE_EVERY = 10  # every tenth request asks about a sensitive file
MAX_RSS_GROWTH = 5 * 1024 * 1024
TYPED = "abcdefghijklmnopqrstuvwxyz_ =().:é🐍"  # the suggestion's "Q" is never typed
SECRET_MARKER = "storm-secret-7f3a"
START_TEXT = "def storm():\n    \n"


@dataclass
class TypedDocument:
    """The editor's copy of the document: text, cursor, and the LSP change for each keystroke."""

    text: str
    cursor: int

    def position(self, offset: int | None = None) -> dict[str, int]:
        offset = self.cursor if offset is None else offset
        line_start = self.text.rfind("\n", 0, offset) + 1
        column = len(self.text[line_start:offset].encode("utf-16-le")) // 2
        return {"line": self.text.count("\n", 0, offset), "character": column}

    def type(self, typed: str) -> dict[str, Any]:
        here = self.position()
        self.text = self.text[: self.cursor] + typed + self.text[self.cursor :]
        self.cursor += len(typed)
        return {"range": {"start": here, "end": here}, "text": typed}

    def backspace(self) -> dict[str, Any] | None:
        if self.cursor == 0:
            return None
        change = {"range": {"start": self.position(self.cursor - 1), "end": self.position()}}
        self.text = self.text[: self.cursor - 1] + self.text[self.cursor :]
        self.cursor -= 1
        return {**change, "text": ""}

    def keystroke(self, rng: random.Random) -> dict[str, Any] | None:
        roll = rng.random()
        if roll < 0.60:
            return self.type(rng.choice(TYPED))
        if roll < 0.85:
            return self.backspace()
        if roll < 0.93:
            return self.type("\n")
        self.cursor = rng.randint(0, len(self.text))  # a click elsewhere: no edit
        return None


def storm_config(endpoint: FakeLLMServer) -> str:
    """The endpoint's per-read timeout is past the deadline: the storm judges cancellations,
    and the in-process endpoint, sharing its interpreter with the storm, can fall silent for
    seconds on a loaded machine; that is the deadline's to end, not an endpoint error."""
    routing = "[routing]\ninline_deadline_ms = 3000\nhedge_after_ms = 2500\n"
    fast = endpoint_toml("fast", endpoint.base_url, extra="timeout_ms = 10000")
    return routing + "[local]\nenabled = false\n" + fast


def inline_params(uri: str, position: dict[str, int]) -> dict[str, Any]:
    return {"textDocument": {"uri": uri}, "position": position, "context": {"triggerKind": 2}}


async def settle(client: RawLspClient, ids: list[int]) -> None:
    assert await client.wait_for(lambda: all(client.responses(i) for i in ids), timeout_s=60), (
        f"{sum(not client.responses(i) for i in ids)} requests never answered"
    )
    await asyncio.sleep(0.5)


async def idle_status(client: RawLspClient, baseline: dict[str, int]) -> dict[str, Any]:
    """The status once the work of the storm has wound down (a leak never does)."""
    for _ in range(50):
        status = await client.status()
        if status["inflight"]["tasks"] <= baseline["tasks"]:
            break
        await asyncio.sleep(0.1)
    return status


async def test_keystroke_storm_with_cancellations(tmp_path: Path) -> None:
    rng = random.Random(20250611)
    behaviour = Behaviour(text="QQQ QQQ QQQ\n", latency_s=0.02, chunk_delay_s=0.01, chunk_chars=4)
    with FakeLLMServer(behaviour) as endpoint:
        async with raw_lsp_server(tmp_path, config_text=storm_config(endpoint)) as client:
            server = psutil.Process(client.pid)
            uri = (tmp_path / "storm typing.py").as_uri()
            secret_uri = (tmp_path / ".env").as_uri()
            document = TypedDocument(START_TEXT, len("def storm():\n    "))
            client.open_document(uri, document.text)
            client.open_document(secret_uri, f"API_TOKEN={SECRET_MARKER}\n", language="dotenv")
            loop = asyncio.get_running_loop()
            sent: list[int] = []
            cancelled = 0
            version = 1
            baseline: dict[str, Any] = {}
            baseline_rss = 0
            started = loop.time()
            for number in range(REQUESTS):
                if number == WARM_UP:
                    await settle(client, sent)
                    baseline = (await client.status())["inflight"]
                    baseline_rss = server.memory_info().rss
                    started = loop.time() - number / PER_SECOND
                change = document.keystroke(rng)
                if change is not None:
                    version += 1
                    client.notify(
                        "textDocument/didChange",
                        {
                            "textDocument": {"uri": uri, "version": version},
                            "contentChanges": [change],
                        },
                    )
                if number % SENSITIVE_EVERY == SENSITIVE_EVERY - 1:
                    params = inline_params(secret_uri, {"line": 0, "character": 10})
                else:
                    params = inline_params(uri, document.position())
                msg_id = client.next_id()
                client.send_request("textDocument/inlineCompletion", params, msg_id=msg_id)
                sent.append(msg_id)
                if rng.random() < CANCELLED_SHARE:
                    cancelled += 1
                    loop.call_later(rng.uniform(0, CANCEL_WITHIN_S), client.cancel, msg_id)
                await client.drain()
                await asyncio.sleep(max(0.0, started + (number + 1) / PER_SECOND - loop.time()))

            await settle(client, sent)
            assert await endpoint.wait_for_async(lambda s: s.open_streams == 0, timeout_s=10)
            status = await idle_status(client, baseline)
            final = status["inflight"]
            rss_growth = server.memory_info().rss - baseline_rss

            answered = cancelled_answers = 0
            for msg_id in sent:
                responses = client.responses(msg_id)
                assert len(responses) == 1, (msg_id, responses)
                (response,) = responses
                if "error" in response:
                    assert response["error"]["code"] == REQUEST_CANCELLED, response
                    cancelled_answers += 1
                else:
                    assert "items" in response["result"], response
                    answered += 1
            assert answered > 0 and cancelled_answers > 0

            assert final["inline"] == 0
            assert final["requests"] <= baseline["requests"], (baseline, final)
            assert final["tasks"] <= baseline["tasks"], (baseline, final)
            assert not status["offline_active"]  # cancellations are not network failures
            (fast,) = status["endpoints"]
            assert fast["errors"] == 0, fast["last_error"]
            assert fast["health"] == "healthy", fast
            assert rss_growth < MAX_RSS_GROWTH, f"RSS grew {rss_growth} bytes"

            leaked = sum(len(r.body) for r in endpoint.requests if SECRET_MARKER.encode() in r.body)
            assert leaked == 0

            version += 1
            change = document.type("x")
            client.notify(
                "textDocument/didChange",
                {"textDocument": {"uri": uri, "version": version}, "contentChanges": [change]},
            )
            last = await client.request(
                "textDocument/inlineCompletion", inline_params(uri, document.position())
            )
            assert last["result"]["items"], last
            body = endpoint.requests[-1].payload
            assert len(document.text) < 2000  # inside the prompt window: prompt + suffix is all
            assert body["prompt"] + body["suffix"] == document.text
            assert body["prompt"] == document.text[: document.cursor]

    report_scenario(
        "keystroke storm (90% cancelled)",
        requests=len(sent) + 1,
        failures_survived=cancelled_answers,
        bytes_leaked=leaked,
        memory_growth_mb=rss_growth / (1024 * 1024),
    )
