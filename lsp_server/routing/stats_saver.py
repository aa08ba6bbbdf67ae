"""The endpoints' latency estimates carried between runs: read from the `StatsFile` at start,
written back now and then (off the event loop) and at close."""

from __future__ import annotations

import asyncio
import time

from lsp_server.routing.endpoint_pool import EndpointPool
from lsp_server.routing.stats_file import StatsFile
from lsp_server.routing.stats_snapshot import StatsSnapshot

SAVE_EVERY_S = 30.0  # how often measured estimates are written back to the stats file


class StatsSaver:
    def __init__(self, pool: EndpointPool, stats_file: StatsFile | None) -> None:
        self._pool = pool
        self._file = stats_file
        self.restored = stats_file.load() if stats_file is not None else StatsSnapshot({})
        self._saved_at = time.monotonic()
        self._saving: asyncio.Task[None] | None = None

    def now_and_then(self) -> None:
        """Write the estimates back every `SAVE_EVERY_S`, on a worker thread."""
        if self._file is None or time.monotonic() - self._saved_at < SAVE_EVERY_S:
            return
        if self._saving is not None and not self._saving.done():
            return
        self._saved_at = time.monotonic()
        snapshot = self._pool.snapshot()
        self._saving = asyncio.get_running_loop().create_task(
            asyncio.to_thread(self._file.save, snapshot)
        )

    async def aclose(self) -> None:
        if self._saving is not None:
            await asyncio.gather(self._saving, return_exceptions=True)
        if self._file is not None:
            self._file.save(self._pool.snapshot())
