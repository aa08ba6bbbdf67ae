"""Connections opened when the configuration is applied, before the first keystroke needs them.

Each remote backend is asked once to `connect()` (a model-list call: no user content), so the
first suggestion does not pay the TCP and TLS set-up, and the router's first latency sample is
the model's, not the handshake's.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable

from lsp_server.backends.base import Backend
from lsp_server.routing.endpoint_pool import Endpoint
from lsp_server.routing.gate import Gate, StaysHome


class WarmConnections:
    def __init__(self) -> None:
        self._asked: weakref.WeakSet[Backend] = weakref.WeakSet()
        self._tasks: set[asyncio.Task[None]] = set()

    def ensure(self, endpoints: Iterable[Endpoint], gate: Gate) -> None:
        """Start connecting every remote backend not asked yet that the gate lets out;
        without a running event loop, nothing (the next call, from a request, does it)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        for endpoint in endpoints:
            backend = endpoint.backend
            if endpoint.is_local or backend in self._asked:
                continue
            try:
                permit = gate.contentless(endpoint.name)
            except StaysHome:
                continue
            self._asked.add(backend)
            task = loop.create_task(backend.connect(permit=permit))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def opened(self, wait_s: float) -> None:
        """Wait, at most `wait_s`, for the connections under way; one that fails or takes
        longer is left for the first request to report."""
        tasks = list(self._tasks)
        if tasks:
            await asyncio.wait(tasks, timeout=wait_s)

    async def aclose(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
