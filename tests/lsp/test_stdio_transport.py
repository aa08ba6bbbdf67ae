"""The stdio transport: a pipe read by the event loop, a file read on a thread, both bounded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.config_text import LOCAL_OFF
from tests.support.lsp_session import server_env


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


# Ends with the input: the server stops at end of input, as when an editor goes away.
SESSION = (
    frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}})
    + frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    + frame({"jsonrpc": "2.0", "id": 2, "method": "gatewayLs.nothing", "params": {}})
)


def serve(tmp_path: Path, stdin: bytes | Path) -> subprocess.CompletedProcess[bytes]:
    config = tmp_path / "config.toml"
    config.write_text(LOCAL_OFF, encoding="utf-8")
    command = [sys.executable, "-m", "lsp_server", "serve", "--config", str(config)]
    env = server_env(tmp_path)
    if isinstance(stdin, Path):
        with stdin.open("rb") as file:
            return subprocess.run(command, stdin=file, capture_output=True, env=env, timeout=60)
    return subprocess.run(command, input=stdin, capture_output=True, env=env, timeout=60)


def response_ids(output: bytes) -> list[int]:
    ids = []
    for chunk in output.split(b"Content-Length: ")[1:]:
        body = chunk.split(b"\r\n\r\n", 1)[1]
        message = json.loads(body[: int(chunk.split(b"\r\n", 1)[0])])
        if "id" in message and "method" not in message:
            ids.append(message["id"])
    return ids


def test_a_session_over_a_pipe(tmp_path: Path) -> None:
    result = serve(tmp_path, SESSION)
    assert result.returncode == 0, result.stderr.decode()
    assert response_ids(result.stdout) == [1, 2]


def test_a_session_from_a_regular_file_falls_back_to_the_threaded_reader(tmp_path: Path) -> None:
    script = tmp_path / "session.lsp"
    script.write_bytes(SESSION)
    result = serve(tmp_path, script)
    assert result.returncode == 0, result.stderr.decode()
    assert response_ids(result.stdout) == [1, 2]


def test_an_absurd_content_length_neither_crashes_nor_reserves_memory(tmp_path: Path) -> None:
    result = serve(tmp_path, b"Content-Length: 99999999999999\r\n\r\nabc")
    assert b"MemoryError" not in result.stderr
    assert result.returncode == 0


def test_an_over_long_header_line_is_skipped(tmp_path: Path) -> None:
    junk = b"X-Junk: " + b"j" * 200_000 + b"\r\n"
    result = serve(tmp_path, junk + SESSION)
    assert result.returncode == 0, result.stderr.decode()
    assert response_ids(result.stdout) == [1, 2]
