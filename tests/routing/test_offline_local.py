"""Offline and sensitive work end to end, with the real bundled model loaded by the server itself.

The server process loads the model on its own (in the background, when a request first needs
it), so these tests poll `gatewayLs.status` until `local.state` is "ready". The deadline is
generous: a 270M model on two busy cores is slow, and these tests are about where a request
goes, not how fast it comes back.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import string
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from lsp_server.privacy.policy import contains_secret
from tests.support.lsp_session import (
    endpoint_toml,
    inline_completion,
    lsp_session,
    open_document,
    server_status,
)
from tests.support.report import ServerMemory, report_scenario

pytestmark = pytest.mark.model

CONFIG = (
    "[routing]\ninline_deadline_ms = 15000\nhedge_after_ms = 12000\n\n"
    '[local]\nmodel = "gemma-3-270m"\nenabled = true\nn_ctx = 2048\nmax_tokens = 12\n\n'
)
MODEL_LOAD_S = 180.0
REPLY_S = 60.0  # far beyond the deadline: only a reply that never comes takes this long
PROMPT = "def add(a, b):\n    return "
_documents = itertools.count()


def closed_port_url() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def planted_aws_key_line() -> str:
    """An access key id of the AWS shape, assembled here so no such literal is in the source."""
    alphabet = string.ascii_uppercase + "234567"
    body = "".join(alphabet[(i * 7 + 3) % len(alphabet)] for i in range(16))
    return f'aws_id = "{"AK" + "IA" + body}"'


async def status(client: LanguageClient) -> dict[str, Any]:
    """The status; bounded, so a reply lost while the model loads fails instead of hanging."""
    return await asyncio.wait_for(server_status(client), REPLY_S)


async def set_offline(client: LanguageClient, mode: str) -> None:
    await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="gatewayLs.setOffline", arguments=[mode])
    )


async def wait_until_local_ready(client: LanguageClient) -> None:
    deadline = asyncio.get_running_loop().time() + MODEL_LOAD_S
    while (local := (await status(client))["local"])["state"] != "ready":
        assert local["state"] in ("unloaded", "loading"), local
        assert asyncio.get_running_loop().time() < deadline, "the local model did not load"
        await asyncio.sleep(0.25)


async def keystroke(
    client: LanguageClient, tmp_path: Path, text: str, *, name: str | None = None
) -> tuple[str, dict[str, Any]]:
    """Open a fresh document, ask at its end; the suggestion and the routing decision."""
    path = tmp_path / (name or f"doc{next(_documents)}.py")
    path.parent.mkdir(parents=True, exist_ok=True)
    uri = path.as_uri()
    open_document(client, uri, text)
    lines = text.split("\n")
    result = await asyncio.wait_for(
        inline_completion(client, uri, len(lines) - 1, len(lines[-1])), REPLY_S
    )
    suggestion = result.items[0].insert_text if result and result.items else ""
    decision = [d for d in (await status(client))["decisions"] if d["uri"] == uri][-1]
    return str(suggestion), decision


async def test_unreachable_endpoint_falls_back_to_the_local_model(
    tmp_path: Path, bundled_model_path: Path
) -> None:
    config = CONFIG + endpoint_toml("remote", closed_port_url())
    async with lsp_session(tmp_path, config_text=config) as client:
        _, first = await keystroke(client, tmp_path, PROMPT)
        assert first["detail"] and "remote: network" in first["detail"]
        report = await status(client)
        assert report["offline_active"] is True
        (remote,) = [e for e in report["endpoints"] if e["name"] == "remote"]
        assert remote["requests"] == 1 and remote["errors"] == 1

        await wait_until_local_ready(client)
        memory = ServerMemory()  # from here on: the model is in, what remains should not grow
        text, second = await keystroke(client, tmp_path, PROMPT)
        assert second["endpoint"] == "local" and second["reason"] == "offline", second
        assert second["tokens"] > 0 and text
        report = await status(client)
        (remote,) = [e for e in report["endpoints"] if e["name"] == "remote"]
        assert remote["requests"] == 1, "the second keystroke waited on the remote again"
        growth = memory.growth_mb()
    report_scenario(
        "offline-local-unreachable", requests=2, failures_survived=1, memory_growth_mb=growth
    )


async def test_sensitive_work_stays_local_and_set_offline_switches(
    tmp_path: Path, bundled_model_path: Path
) -> None:
    with FakeLLMServer(Behaviour(text="a + b\n"), name="recording") as endpoint:
        config = CONFIG + endpoint_toml("remote", endpoint.base_url)
        async with lsp_session(tmp_path, config_text=config) as client:
            # The positive control first: a normal document reaches the endpoint.
            text, control = await keystroke(client, tmp_path, "# zqcontrol_marker\n" + PROMPT)
            assert control["endpoint"] == "remote" and text == "a + b"
            assert "zqcontrol_marker" in endpoint.received_text()
            await wait_until_local_ready(client)
            memory = ServerMemory()

            requests_before, bytes_before = len(endpoint.requests), endpoint.bytes_received
            dotenv = "# zqdotenv_marker\nAPP_NAME=demo\nAPP_MODE="
            _, env_decision = await keystroke(client, tmp_path, dotenv, name=".env")
            planted = f"# zqplanted_marker\n{planted_aws_key_line()}\n{PROMPT}"
            assert contains_secret(planted)
            _, planted_decision = await keystroke(client, tmp_path, planted)
            for decision in (env_decision, planted_decision):
                assert decision["endpoint"] == "local", decision
                assert decision["reason"] == "sensitive", decision
            assert len(endpoint.requests) == requests_before
            assert endpoint.bytes_received == bytes_before
            received = endpoint.received_text()
            assert "zqdotenv_marker" not in received and "zqplanted_marker" not in received

            await set_offline(client, "always")
            _, held = await keystroke(client, tmp_path, PROMPT)
            assert held["endpoint"] == "local" and held["reason"] == "offline", held
            assert len(endpoint.requests) == requests_before
            leaked = endpoint.bytes_received - bytes_before

            await set_offline(client, "never")
            text, back = await keystroke(client, tmp_path, PROMPT)
            assert back["endpoint"] == "remote" and text == "a + b", back
            assert len(endpoint.requests) == requests_before + 1
            growth = memory.growth_mb()
    report_scenario(
        "offline-local-sensitive",
        requests=5,
        failures_survived=0,
        bytes_leaked=leaked,
        memory_growth_mb=growth,
    )


async def test_with_no_remote_endpoint_the_model_loads_at_start(
    tmp_path: Path, bundled_model_path: Path
) -> None:
    async with lsp_session(tmp_path, config_text=CONFIG) as client:
        first = (await status(client))["local"]["state"]
        assert first in ("loading", "ready")  # started at initialisation, before any request
        await wait_until_local_ready(client)
        text, decision = await keystroke(client, tmp_path, PROMPT)
        assert (decision["endpoint"], decision["reason"]) == ("local", "local-only"), decision
        assert text
