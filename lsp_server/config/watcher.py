"""Hot reload: poll the config file's stat signature and reload it when it changes.

Polling `os.stat` once a second is cheap and behaves the same on every platform and filesystem
(editors that save by rename, network mounts), so no file-notification dependency is needed.
An invalid file keeps the last good configuration in force; each distinct problem is reported
once, not on every poll. A change is applied only when two reads a moment apart agree and the
text parses, and never when the file is empty: an editor that rewrites a file in place
truncates it first, and an empty file read then is a save in progress, not "all defaults".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from lsp_server.config.loader import (
    ConfigError,
    default_config_path,
    parse_config_file_text,
    read_config_text,
)
from lsp_server.config.model import Config

log = logging.getLogger(__name__)

# (inode, size, mtime_ns, ctime_ns): ctime also moves on chmod, so a fixed permission is seen.
_Signature = tuple[int, int, int, int]
_MISSING = "missing"
_SETTLE_ROUNDS = 5


class ConfigWatcher:
    """Watches `path`, or with None the default user config location for a file appearing.

    `on_change` receives the file's configuration only; merging editor overrides over it is the
    caller's job. When the default location is watched, the file disappearing again means "no
    file", so `on_change` receives the defaults; a named file disappearing is an error instead.
    `loaded` is the file's configuration in force: the file may have changed between loading
    it and `start()` (a busy start-up), and such a change is then applied by the first poll.
    """

    def __init__(
        self,
        path: Path | None,
        on_change: Callable[[Config], None],
        on_error: Callable[[ConfigError], None],
        *,
        loaded: Config | None = None,
        interval_s: float = 1.0,
        settle_s: float = 0.3,
    ) -> None:
        self._watches_default = path is None
        self._path = default_config_path() if path is None else path
        self._on_change = on_change
        self._loaded = loaded
        self._on_error = on_error
        self._interval_s = interval_s
        self._settle_s = settle_s
        self._last_seen: _Signature | str | ConfigError | None = None
        self._last_reported: str | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def path(self) -> Path:
        return self._path

    async def start(self) -> None:
        if self._task is not None:
            return
        # The signature before the read: a write landing between the two is then seen as a
        # change by the first poll, never taken for the state already in force.
        signature = self._signature()
        self._last_seen = None if self._changed_since_loaded() else signature
        self._task = asyncio.create_task(self._run(), name=f"config-watch {self._path}")

    def _changed_since_loaded(self) -> bool:
        if self._loaded is None or self._signature() == _MISSING:
            return False
        try:
            return parse_config_file_text(read_config_text(self._path), self._path) != self._loaded
        except ConfigError:
            return True  # the first poll reports it

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self._poll()
            except Exception:  # a failing callback must not end hot reload
                log.exception("config watcher: poll failed")

    async def _poll(self) -> None:
        seen = self._signature()
        if seen == self._last_seen:
            return
        seen = await self._settled(seen)
        self._last_seen = seen
        if isinstance(seen, ConfigError):
            self._report(seen)
        elif seen == _MISSING:
            self._file_gone()
        else:
            await self._reload()

    async def _settled(
        self, seen: _Signature | str | ConfigError
    ) -> _Signature | str | ConfigError:
        """Wait until the file stops changing (a few settle periods at most), so a write in
        progress is not read half-way even when the half happens to be valid TOML."""
        for _ in range(_SETTLE_ROUNDS):
            await asyncio.sleep(self._settle_s)
            again = self._signature()
            if again == seen:
                break
            seen = again
        return seen

    async def _reload(self) -> None:
        try:
            text = await self._agreed_text()
            if not text.strip():
                raise ConfigError(
                    "the file is empty (a save in progress?); the last good configuration "
                    "stays in force",
                    file=str(self._path),
                )
            config = parse_config_file_text(text, self._path)
        except ConfigError as error:
            self._report(error)
            return
        self._last_reported = None
        self._on_change(config)

    async def _agreed_text(self) -> str:
        """The file's text once two reads a settle period apart agree."""
        text = read_config_text(self._path)
        for _ in range(_SETTLE_ROUNDS):
            await asyncio.sleep(self._settle_s)
            signature = self._signature()  # before the read, as in `start`
            again = read_config_text(self._path)
            self._last_seen = signature
            if again == text:
                return text
            text = again
        raise ConfigError(
            "the file keeps changing; the last good configuration stays in force",
            file=str(self._path),
        )

    def _file_gone(self) -> None:
        if self._watches_default:
            self._last_reported = None
            self._on_change(Config())
            return
        self._report(
            ConfigError(
                "the config file was deleted; the last good configuration stays in force",
                file=str(self._path),
            )
        )

    def _report(self, error: ConfigError) -> None:
        text = str(error)
        if text == self._last_reported:
            return
        self._last_reported = text
        self._on_error(error)

    def _signature(self) -> _Signature | str | ConfigError:
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            return _MISSING
        except OSError as exc:
            return ConfigError(f"cannot read: {exc.strerror or exc}", file=str(self._path))
        return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
