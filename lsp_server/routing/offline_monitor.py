"""Offline detection (routing rule 3).

In mode "auto", when every remote inline endpoint's latest outcome is a failure that looks like
no network (DNS, connection refused, timeout), inline traffic switches to the local model at once,
so later keystrokes do not each wait for a remote to fail. A background task then probes the
remotes (a bare `GET …/models`, which carries no document content) and switches traffic back as
soon as one answers at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from lsp_server.backends.base import BackendError
from lsp_server.config.model import EndpointConfig, OfflineMode
from lsp_server.permit import Permit
from lsp_server.routing.gate import Gate, StaysHome

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

PROBE_FIRST_DELAY_S = 1.0
PROBE_MAX_DELAY_S = 15.0
PROBE_TIMEOUT_S = 2.0


class OfflineMonitor:
    def __init__(
        self, mode: OfflineMode, remotes: tuple[EndpointConfig, ...], *, gate: Gate
    ) -> None:
        self.mode: OfflineMode = mode
        self._gate = gate
        self._remotes = remotes
        self._offline_failures: set[str] = set()
        self._detected = False
        self._probe_task: asyncio.Task[None] | None = None

    @property
    def active(self) -> bool:
        """Is inline traffic held on this machine right now?"""
        if self.mode == "always":
            return True
        return self.mode == "auto" and self._detected

    def set_mode(self, mode: OfflineMode) -> None:
        self.mode = mode
        if mode != "auto":
            self._clear()

    def set_remotes(self, remotes: tuple[EndpointConfig, ...]) -> None:
        self._remotes = remotes
        names = {r.name for r in remotes}
        self._offline_failures &= names
        if not remotes:
            self._clear()

    def note_failure(self, error: BackendError) -> None:
        if not error.looks_offline:
            self._offline_failures.discard(error.endpoint)
            return
        self._offline_failures.add(error.endpoint)
        remote_names = {r.name for r in self._remotes}
        if self.mode == "auto" and remote_names and remote_names <= self._offline_failures:
            if not self._detected:
                log.warning("no remote endpoint reachable: serving inline requests locally")
            self._detected = True
            self._ensure_probing()

    def note_success(self, endpoint: str) -> None:
        self._offline_failures.discard(endpoint)
        if self._detected:
            log.info("%s answers again: remote endpoints back in use", endpoint)
        self._clear()

    async def aclose(self) -> None:
        self._clear()

    def _clear(self) -> None:
        self._detected = False
        self._offline_failures.clear()
        if self._probe_task is not None:
            self._probe_task.cancel()
            self._probe_task = None

    def _ensure_probing(self) -> None:
        if self._probe_task is None or self._probe_task.done():
            self._probe_task = asyncio.get_running_loop().create_task(self._probe_loop())

    async def _probe_loop(self) -> None:
        import httpx  # only once a remote has failed, not at every start

        delay = PROBE_FIRST_DELAY_S
        async with httpx.AsyncClient(timeout=PROBE_TIMEOUT_S, trust_env=False) as client:
            while self._detected:
                await asyncio.sleep(delay)
                for remote in self._remotes:
                    try:
                        permit = self._gate.contentless(remote.name)
                    except StaysHome:
                        return
                    if await _answers(client, remote, permit):
                        self._probe_task = None
                        self.note_success(remote.name)
                        return
                delay = min(delay * 2, PROBE_MAX_DELAY_S)


async def _answers(client: httpx.AsyncClient, remote: EndpointConfig, permit: Permit) -> bool:
    """Any HTTP answer, even 401 or 404, proves the network path works."""
    import httpx

    permit.check_remote(remote.name)
    url = remote.base_url.rstrip("/") + "/models"
    with contextlib.suppress(httpx.HTTPError):
        await client.get(url)
        return True
    return False
