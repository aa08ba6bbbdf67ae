"""What became of the next edits shown: accepted or dismissed, per endpoint that proposed them."""

from __future__ import annotations

from collections import Counter
from typing import Any


class EditOutcomes:
    def __init__(self) -> None:
        self.shown: Counter[str] = Counter()
        self.accepted: Counter[str] = Counter()
        self.dismissed: Counter[str] = Counter()

    def status(self, endpoint: str) -> dict[str, Any]:
        shown = self.shown[endpoint]
        return {
            "shown": shown,
            "accepted": self.accepted[endpoint],
            "dismissed": self.dismissed[endpoint],
            "acceptance_rate": round(self.accepted[endpoint] / shown, 3) if shown else None,
            "dismissal_rate": round(self.dismissed[endpoint] / shown, 3) if shown else None,
        }
