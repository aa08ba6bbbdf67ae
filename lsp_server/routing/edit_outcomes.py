"""What became of the next edits shown: accepted or dismissed, per endpoint that proposed them,
and how much of the accepted ones the user kept (`nextedit/kept_rate.py` measures it)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from lsp_server.routing.kept_chars import KeptChars


class EditOutcomes:
    def __init__(self) -> None:
        self.shown: Counter[str] = Counter()
        self.accepted: Counter[str] = Counter()
        self.dismissed: Counter[str] = Counter()
        self.chars = KeptChars()

    def kept(self, endpoint: str, kept: int, inserted: int) -> None:
        """Of the `inserted` characters of an accepted edit, `kept` were still there later."""
        self.chars.add(endpoint, kept, inserted)

    def status(self, endpoint: str) -> dict[str, Any]:
        shown = self.shown[endpoint]
        return {
            "shown": shown,
            "accepted": self.accepted[endpoint],
            "dismissed": self.dismissed[endpoint],
            "acceptance_rate": round(self.accepted[endpoint] / shown, 3) if shown else None,
            "dismissal_rate": round(self.dismissed[endpoint] / shown, 3) if shown else None,
            "kept_rate": self.chars.rate(endpoint),
        }
