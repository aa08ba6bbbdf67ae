"""One request of a kind per document: a newer one cancels the older still running."""

from __future__ import annotations

import asyncio
from typing import Any


class Superseding:
    """A request run as the one of its kind for its document, while inside: `_inflight` maps
    (uri, kind) to the task of the request running."""

    __slots__ = ("_inflight", "_key", "_task")

    def __init__(self, inflight: dict[tuple[str, str], asyncio.Task[Any]], key: tuple[str, str]):
        self._inflight = inflight
        self._key = key
        self._task: asyncio.Task[Any] | None = None

    def __enter__(self) -> None:
        self._task = current = asyncio.current_task()
        previous = self._inflight.get(self._key)
        if previous is not None and previous is not current and not previous.done():
            previous.cancel()
        if current is not None:
            self._inflight[self._key] = current

    def __exit__(self, *exc_info: object) -> None:
        if self._inflight.get(self._key) is self._task:
            del self._inflight[self._key]
