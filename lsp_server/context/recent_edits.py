"""Recently edited ranges: the lines around the last few places the person changed, one entry
per place (an edit next to a kept one replaces it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from lsp_server.context.chunks import Chunk


class RecentEdits:
    def __init__(self, capacity: int = 8) -> None:
        self.capacity = capacity
        self._edits: list[Chunk] = []

    def add(self, chunk: Chunk) -> None:
        if self.capacity <= 0 or not chunk.text.strip():
            return
        self._edits = [kept for kept in self._edits if not kept.overlaps(chunk)]
        self._edits.append(chunk)
        del self._edits[: -self.capacity]

    def drop(self, unwanted: Callable[[Chunk], bool]) -> None:
        self._edits = [chunk for chunk in self._edits if not unwanted(chunk)]

    def __iter__(self) -> Iterator[Chunk]:
        return iter(tuple(self._edits))

    def __len__(self) -> int:
        return len(self._edits)
