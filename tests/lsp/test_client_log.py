"""While an editor is connected the server's log goes to it as `window/logMessage`, typed."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from lsprotocol import types

from lsp_server.lsp.client_log import message_type
from tests.support.lsp_session import endpoint_toml
from tests.support.raw_lsp import RawLspClient, raw_lsp_server

MISSING_KEY = "GATEWAY_LS_TEST_KEY_NOBODY_SETS"
CONFIG = "[local]\nenabled = false\n" + endpoint_toml(
    "keyed", "http://127.0.0.1:9/v1", extra=f'api_key_env = "{MISSING_KEY}"'
)


async def test_a_warning_goes_to_the_editor_log_as_a_warning_not_to_stderr(
    tmp_path: Path,
) -> None:
    async with raw_lsp_server(tmp_path, config_text=CONFIG) as client:
        assert await client.wait_for(
            lambda: any(MISSING_KEY in m["params"]["message"] for m in logged(client))
        )
        (entry,) = [m for m in logged(client) if MISSING_KEY in m["params"]["message"]]
        assert entry["params"]["type"] == types.MessageType.Warning
    stderr = (tmp_path / "server-stderr.log").read_text()
    assert MISSING_KEY not in stderr


def logged(client: RawLspClient) -> list[dict[str, Any]]:
    return client.notifications("window/logMessage")


def test_levels_map_to_message_types() -> None:
    assert message_type(logging.ERROR) == types.MessageType.Error
    assert message_type(logging.CRITICAL) == types.MessageType.Error
    assert message_type(logging.WARNING) == types.MessageType.Warning
    assert message_type(logging.INFO) == types.MessageType.Info
    assert message_type(logging.DEBUG) == types.MessageType.Log
