"""The end of a session as LSP defines it, against the real server over stdio: after `shutdown`
every request is refused with Invalid Request (never left unanswered), and `exit` ends the
process with 0 after `shutdown`, 1 without."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.raw_lsp import INVALID_REQUEST, raw_lsp_server
from tests.support.report import report_scenario

CONFIG = "[local]\nenabled = false\n"


async def test_requests_after_shutdown_are_refused_and_exit_says_0(tmp_path: Path) -> None:
    async with raw_lsp_server(tmp_path, config_text=CONFIG) as client:
        uri = (tmp_path / "a.py").as_uri()
        client.open_document(uri, "x = 1\n")
        shutdown = await client.request("shutdown", timeout_s=10)
        assert shutdown.get("result", "missing") is None, shutdown

        position = {"line": 0, "character": 5}
        refused = [
            await client.request(method, params, timeout_s=5)
            for method, params in (
                ("workspace/executeCommand", {"command": "gatewayLs.status", "arguments": []}),
                (
                    "textDocument/inlineCompletion",
                    {
                        "textDocument": {"uri": uri},
                        "position": position,
                        "context": {"triggerKind": 2},
                    },
                ),
                ("shutdown", None),
            )
        ]
        for response in refused:
            assert response.get("error", {}).get("code") == INVALID_REQUEST, response

        client.notify("exit")
        await client.drain()
        code = await asyncio.wait_for(client.process.wait(), 10)
        assert code == 0
    report_scenario(
        "lsp-requests-after-shutdown", requests=4, failures_survived=3, memory_growth_mb=None
    )


async def test_exit_without_shutdown_says_1(tmp_path: Path) -> None:
    async with raw_lsp_server(tmp_path, config_text=CONFIG) as client:
        client.notify("exit")
        await client.drain()
        code = await asyncio.wait_for(client.process.wait(), 10)
        assert code == 1
    report_scenario(
        "lsp-exit-without-shutdown", requests=1, failures_survived=1, memory_growth_mb=None
    )
