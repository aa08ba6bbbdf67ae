"""Where a running server publishes its routing status, so `gateway-ls stats` can read it.

An LSP server over stdio has no other channel a second process could ask, so each server writes
its status (the `gatewayLs.status` JSON) to a file named after its process id in the user state
dir, every few seconds while it changes, and removes the file on exit.

The status is read on the event loop (it is the router's live state), encoded with orjson and
compared with what was written last; only a changed status is written, by a worker thread, so
neither a slow disk nor the file system's calls hold up a request on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import platformdirs

from lsp_server import json_codec

PUBLISH_EVERY_S = 2.0


def status_dir() -> Path:
    return platformdirs.user_state_path("gateway-ls") / "run"


class StatusPublisher:
    def __init__(self, snapshot: Callable[[], dict[str, Any]], *, kind: str) -> None:
        self._snapshot = snapshot
        self._kind = kind
        self._path = status_dir() / f"{os.getpid()}.json"
        self._task: asyncio.Task[None] | None = None
        self._writing: asyncio.Future[bool] | None = None
        self._last = b""

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._writing is not None:  # a write under way would bring the file back
            with contextlib.suppress(Exception):
                await self._writing
        with contextlib.suppress(OSError):
            self._path.unlink()

    async def _run(self) -> None:
        while True:
            await self.publish()
            await asyncio.sleep(PUBLISH_EVERY_S)

    async def publish(self) -> None:
        """Write the status when it differs from the one written last."""
        body = json_codec.dumps({"pid": os.getpid(), "kind": self._kind, **self._snapshot()})
        if body == self._last:
            return
        self._writing = asyncio.ensure_future(asyncio.to_thread(self._write, body))
        if await asyncio.shield(self._writing):
            self._last = body

    def _write(self, body: bytes) -> bool:
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self._path.with_suffix(".tmp")
            temporary.write_bytes(body)
            temporary.replace(self._path)
        except OSError:
            return False
        return True


def read_running() -> list[dict[str, Any]]:
    """Status of every server still running; files of dead processes are cleaned up."""
    found: list[dict[str, Any]] = []
    directory = status_dir()
    if not directory.is_dir():
        return found
    for path in sorted(directory.glob("*.json")):
        pid = int(path.stem) if path.stem.isdigit() else -1
        if pid <= 0 or not _alive(pid):
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        with contextlib.suppress(OSError, ValueError):
            found.append(json.loads(path.read_text(encoding="utf-8")))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
