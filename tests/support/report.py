"""What the reliability tests observe of the server under test, and the rows they report.

`ServerLog` reads the server's stderr (pytest-lsp forwards it into the test process, where the
`capfd` fixture captures it); `ServerMemory` follows the server process' resident memory; and
`report_scenario` appends one JSON line per scenario to the file named by `$GATEWAY_LS_REPORT`
(the reliability report collects them), doing nothing when that variable is unset.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import psutil
import pytest

from bench.reliability_report import REPORT_ENV

_MB = 1024 * 1024


def report_scenario(
    scenario: str,
    *,
    requests: int,
    failures_survived: int,
    bytes_leaked: int | None = 0,
    memory_growth_mb: float | None = 0.0,
    keystrokes: int | None = None,
    in_time: int | None = None,
    failed_over: int | None = None,
) -> None:
    """Append one row for `scenario` to `$GATEWAY_LS_REPORT`, if it is set (None: the number
    does not apply to the scenario). `in_time` of `keystrokes` keystroke-level requests were
    answered within their deadline + 100 ms; `failed_over` requests were served by another
    endpoint than the one that failed them."""
    target = os.environ.get(REPORT_ENV)
    if not target:
        return
    row = {
        "scenario": scenario,
        "requests": requests,
        "failures_survived": failures_survived,
        "bytes_leaked": bytes_leaked,
        "memory_growth_mb": None if memory_growth_mb is None else round(memory_growth_mb, 2),
        "keystrokes": keystrokes,
        "in_time": in_time,
        "failed_over": failed_over,
    }
    with Path(target).open("a", encoding="utf-8") as report:
        report.write(json.dumps(row) + "\n")


class ServerLog:
    """The server's log so far: its stderr (`capfd` hands out each captured piece once, so keep
    it all) and, once `follow` names the connected client, the `window/logMessage` lines the
    server sends it instead of stderr while the client is connected."""

    def __init__(self, capfd: pytest.CaptureFixture[str]) -> None:
        self._capfd = capfd
        self._seen = ""
        self._client: Any = None

    def follow(self, client: Any) -> None:
        self._client = client

    @property
    def text(self) -> str:
        self._seen += self._capfd.readouterr().err
        if self._client is None:
            return self._seen
        sent = "".join(f"{m.message}\n" for m in self._client.log_messages)
        return self._seen + sent

    def lines_with(self, needle: str) -> list[str]:
        return [line for line in self.text.splitlines() if needle in line]

    async def wait_for(self, needle: str, timeout_s: float = 10.0) -> bool:
        """Wait until `needle` shows up; the forwarding runs on the test's event loop."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while needle not in self.text:
            if asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(0.02)
        return True


class ServerMemory:
    """Resident memory of a server process: by default the `gateway-ls serve` process this
    test process started; `peak_growth_mb` is the largest growth seen by `sample()` calls."""

    def __init__(self, pid: int | None = None) -> None:
        self._process = _server_process() if pid is None else psutil.Process(pid)
        self._baseline = self._process.memory_info().rss
        self._peak = self._baseline

    def growth_mb(self) -> float:
        return (self.sample() - self._baseline) / _MB

    def sample(self) -> int:
        rss = self._process.memory_info().rss
        self._peak = max(self._peak, rss)
        return rss

    def peak_growth_mb(self) -> float:
        self.sample()
        return (self._peak - self._baseline) / _MB


def _server_process() -> psutil.Process:
    servers = [
        child for child in psutil.Process().children(recursive=True) if _is_language_server(child)
    ]
    if not servers:
        raise LookupError("no gateway-ls server process is running under this test")
    return max(servers, key=lambda process: process.create_time())


def _is_language_server(process: psutil.Process) -> bool:
    try:
        command = process.cmdline()
    except psutil.Error:
        return False
    return "lsp_server" in command and "serve" in command
