"""Of the characters accepted suggestions inserted, per endpoint, those still in the document
a while later (`nextedit/kept_rate.py` measures each): the kept rate is their ratio."""

from __future__ import annotations

from collections import Counter


class KeptChars:
    def __init__(self) -> None:
        self.kept: Counter[str] = Counter()
        self.inserted: Counter[str] = Counter()

    def add(self, endpoint: str, kept: int, inserted: int) -> None:
        self.kept[endpoint] += kept
        self.inserted[endpoint] += inserted

    def rate(self, endpoint: str) -> float | None:
        """None until an acceptance of `endpoint`'s was measured."""
        inserted = self.inserted[endpoint]
        return round(self.kept[endpoint] / inserted, 3) if inserted else None
