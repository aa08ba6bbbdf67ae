"""Offline "always", tried as a person would: one recording endpoint serves every role, and
nothing reaches it from any front door, start-up included (routing rule 1).

The real gateway and the real language server run as processes; the local model is off, so
each route says at once why it cannot answer instead of answering from the local model (the
property test `test_one_gate.py` covers the answers).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
from lsprotocol import types

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.gateway_process import running_gateway
from tests.support.lsp_session import (
    endpoint_toml,
    inline_completion,
    lsp_session,
    open_document,
)
from tests.support.refactor_session import CIRCLE, refactor_params

EVERY_ROLE = '["inline", "edit", "refactor", "agent"]'


def config_text(server: FakeLLMServer, offline: str) -> str:
    return f'[routing]\noffline = "{offline}"\n[local]\nenabled = false\n' + endpoint_toml(
        "remote", server.base_url, roles=EVERY_ROLE
    )


def assert_untouched(server: FakeLLMServer) -> None:
    assert server.requests == []
    assert server.model_list_requests == 0
    assert server.bytes_received == 0


def test_no_gateway_route_reaches_a_remote_under_offline_always(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text="ok")) as server:
        with running_gateway(tmp_path, config_text(server, "always")) as gateway:
            messages = [{"role": "user", "content": "def total(items):"}]
            asks = [
                ("/v1/chat/completions", {"model": "auto", "messages": messages}),
                (
                    "/v1/chat/completions",
                    {"model": "auto", "messages": messages, "stream": True},
                ),
                ("/v1/chat/completions", {"model": "remote", "messages": messages}),
                ("/v1/responses", {"model": "auto", "input": "def total(items):"}),
                ("/v1/completions", {"model": "auto", "prompt": "def total(", "suffix": ")"}),
            ]
            with httpx.Client(base_url=gateway.root_url, timeout=30) as client:
                for path, body in asks:
                    started = time.monotonic()
                    response = client.post(path, json=body)
                    assert response.status_code >= 400, (path, body, response.text)
                    assert "offline" in response.text or "machine" in response.text, response.text
                    assert time.monotonic() - started < 10  # said at once, not timed out
            time.sleep(0.5)  # anything sent late would have arrived by now
        assert_untouched(server)


async def test_no_lsp_route_reaches_a_remote_after_set_offline_always(tmp_path: Path) -> None:
    """Set at run time (`gatewayLs.setOffline`): the refactor says why it cannot be done here,
    keystrokes get nothing, and the remote hears nothing after the switch."""
    with FakeLLMServer(Behaviour(text="ok")) as server:
        async with lsp_session(tmp_path, config_text=config_text(server, "never")) as client:
            # Offline "never" at start: the endpoint is connected, as the gate allowed then.
            assert await server.wait_for_async(lambda s: s.model_list_requests >= 1, 30)
            await client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="gatewayLs.setOffline", arguments=["always"])
            )
            server.quiet()
            uri = (tmp_path / "circle.py").as_uri()
            open_document(client, uri, CIRCLE)
            result = await asyncio.wait_for(
                client.workspace_execute_command_async(refactor_params(uri)), 30
            )
            assert isinstance(result, dict) and not result["applied"], result
            completion = await inline_completion(client, uri, 3, 0)
            assert completion is None or not completion.items
            await asyncio.sleep(0.5)
            assert_untouched(server)
            assert any("offline" in m.message for m in client.messages), client.messages
