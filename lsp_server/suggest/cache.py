"""Serve the rest of a shown suggestion while the user types it, without asking a model again.

An entry remembers where a suggestion was made (the tail of the prefix and the head of the
suffix, bounded windows so a huge document costs no more than a small one) and the suggestion.
A later request matches when its suffix head is the same and its prefix is the old prefix
followed by the first characters of the suggestion: typed through, or backspaced within the
suggestion. The answer is the part not typed yet. A lookup looks at a few entries of one
document and compares bounded windows; it never scans the cache.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import count

PREFIX_WINDOW = 2000
SUFFIX_WINDOW = 200


@dataclass(frozen=True, slots=True)
class CachedSuggestion:
    text: str  # what remains to be inserted at the cursor
    source: str  # who made the suggestion (endpoint name)


@dataclass(frozen=True, slots=True)
class CacheStats:
    hits: int
    misses: int
    entries: int


@dataclass(slots=True)
class _Entry:
    document_key: str
    prefix_tail: str
    prefix_line_length: int  # of the cursor line before the cursor: locates typed text later
    suffix_head: str
    suggestion: str
    source: str
    newline_ends: tuple[int, ...] = field(init=False)  # offsets just past each "\n" in suggestion

    def __post_init__(self) -> None:
        self.newline_ends = tuple(i + 1 for i, char in enumerate(self.suggestion) if char == "\n")

    def typed_length(self, prefix: str) -> int | None:
        """How much of the suggestion `prefix` has typed, if it is old prefix + part of it."""
        cursor_column = len(prefix) - prefix.rfind("\n") - 1
        candidates = [cursor_column - self.prefix_line_length]
        candidates += [end + cursor_column for end in self.newline_ends]
        # Repetitive text can be read two ways; the longer typed part is the safer reading.
        for typed in sorted(candidates, reverse=True):
            if 0 <= typed < len(self.suggestion) and self._continues(prefix, typed):
                return typed
        return None

    def _continues(self, prefix: str, typed: int) -> bool:
        before_typed = len(prefix) - typed
        return prefix.endswith(self.suggestion[:typed]) and prefix.endswith(
            self.prefix_tail, 0, before_typed
        )


class CompletionCache:
    """LRU cache of suggestions, a few per document."""

    def __init__(self, max_entries: int = 256, *, max_per_document: int = 8) -> None:
        self._max_entries = max_entries
        self._max_per_document = max_per_document
        self._ids = count()
        self._lru: OrderedDict[int, _Entry] = OrderedDict()
        self._by_document: dict[str, OrderedDict[int, _Entry]] = {}
        self._hits = 0
        self._misses = 0

    def put(
        self, document_key: str, prefix: str, suffix: str, suggestion: str, source: str
    ) -> None:
        if not suggestion:
            return
        entry = _Entry(
            document_key=document_key,
            prefix_tail=prefix[-PREFIX_WINDOW:],
            prefix_line_length=len(prefix) - prefix.rfind("\n") - 1,
            suffix_head=suffix[:SUFFIX_WINDOW],
            suggestion=suggestion,
            source=source,
        )
        for entry_id, old in list(self._by_document.get(document_key, {}).items()):
            if old.suffix_head == entry.suffix_head and old.prefix_tail == entry.prefix_tail:
                self._remove(entry_id, old)
        entries = self._by_document.setdefault(document_key, OrderedDict())
        entry_id = next(self._ids)
        entries[entry_id] = entry
        self._lru[entry_id] = entry
        if len(entries) > self._max_per_document:
            self._remove(*next(iter(entries.items())))
        while len(self._lru) > self._max_entries:
            self._remove(*next(iter(self._lru.items())))

    def get(self, document_key: str, prefix: str, suffix: str) -> CachedSuggestion | None:
        """The rest of a suggestion the user is typing through, or None."""
        suffix_head = suffix[:SUFFIX_WINDOW]
        for entry_id, entry in reversed(self._by_document.get(document_key, {}).items()):
            if entry.suffix_head != suffix_head:
                continue
            typed = entry.typed_length(prefix)
            if typed is None:
                continue
            self._hits += 1
            self._lru.move_to_end(entry_id)
            self._by_document[document_key].move_to_end(entry_id)
            return CachedSuggestion(text=entry.suggestion[typed:], source=entry.source)
        self._misses += 1
        return None

    def invalidate(self, document_key: str) -> None:
        """Forget every suggestion of a document (closed, or replaced as a whole)."""
        for entry_id in self._by_document.pop(document_key, {}):
            del self._lru[entry_id]

    @property
    def stats(self) -> CacheStats:
        return CacheStats(hits=self._hits, misses=self._misses, entries=len(self._lru))

    def _remove(self, entry_id: int, entry: _Entry) -> None:
        del self._lru[entry_id]
        entries = self._by_document[entry.document_key]
        del entries[entry_id]
        if not entries:
            del self._by_document[entry.document_key]
