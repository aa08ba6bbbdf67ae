"""Latency estimates kept between runs: a small file in the user state dir.

Written by every process that routes (server, gateway, `complete`) and read when one starts, so
a new process ranks endpoints from what earlier ones measured instead of from the config order.
Writes are atomic (a temporary file renamed over the old one) and merge with what other
processes wrote meanwhile. The file is read as untrusted input: too large, unreadable, not a
regular file or malformed means starting without history, never an error.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import tempfile
from pathlib import Path

import platformdirs

from lsp_server.routing.stats_snapshot import StatsSnapshot, overlay

log = logging.getLogger(__name__)

FILE_NAME = "latency-stats.json"
MAX_FILE_BYTES = 64 * 1024  # 64 endpoints take about 8 KB


def default_stats_path() -> Path:
    return platformdirs.user_state_path("gateway-ls") / FILE_NAME


class StatsFile:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_stats_path()

    def load(self) -> StatsSnapshot:
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return StatsSnapshot({})
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return StatsSnapshot({})
            data = os.read(fd, MAX_FILE_BYTES + 1)
        except OSError:
            return StatsSnapshot({})
        finally:
            os.close(fd)
        if len(data) > MAX_FILE_BYTES:
            log.warning("ignoring %s: larger than %d bytes", self.path, MAX_FILE_BYTES)
            return StatsSnapshot({})
        return StatsSnapshot.from_json(data)

    def save(self, snapshot: StatsSnapshot) -> None:
        """Lay `snapshot` over what is on disk (other processes' endpoints stay) and replace the
        file atomically."""
        combined = overlay(self.load(), snapshot)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, temporary = tempfile.mkstemp(
                dir=self.path.parent, prefix=".latency-", suffix=".tmp"
            )
        except OSError as error:
            log.debug("cannot write %s: %s", self.path, error)
            return
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(combined.to_json())
            os.replace(temporary, self.path)
        except OSError as error:
            log.debug("cannot write %s: %s", self.path, error)
            with contextlib.suppress(OSError):
                os.unlink(temporary)
