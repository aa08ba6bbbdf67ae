"""The ring of chunks from files the person opens and edits (llama.vim's design: 16 chunks of 64
lines; a new chunk evicts every chunk it overlaps by more than 0.9, then the oldest if full)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator

from lsp_server.context.chunks import Chunk, line_similarity


class ChunkRing:
    def __init__(self, capacity: int = 16, evict_similarity: float = 0.9) -> None:
        self.capacity = capacity
        self.evict_similarity = evict_similarity
        self._chunks: deque[Chunk] = deque()

    def add(self, chunk: Chunk) -> None:
        """Keep `chunk`, newest; a chunk with the same text is kept as it was (its place in
        prompts stays put)."""
        if self.capacity <= 0 or not chunk.text.strip():
            return
        if any(kept.text == chunk.text for kept in self._chunks):
            return
        self._chunks = deque(
            kept
            for kept in self._chunks
            if line_similarity(kept.text, chunk.text) <= self.evict_similarity
        )
        self._chunks.append(chunk)
        while len(self._chunks) > self.capacity:
            self._chunks.popleft()

    def drop(self, unwanted: Callable[[Chunk], bool]) -> None:
        self._chunks = deque(chunk for chunk in self._chunks if not unwanted(chunk))

    def __iter__(self) -> Iterator[Chunk]:
        return iter(tuple(self._chunks))

    def __len__(self) -> int:
        return len(self._chunks)
