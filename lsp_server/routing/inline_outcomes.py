"""What became of the inline suggestions offered, per endpoint that answered: how many were
offered (an editor says nothing of what it showed), how many the editor reported accepted (the
command an item carries, which LSP 3.18 clients run once they have inserted it), and how much
of the accepted text the user kept (`nextedit/kept_rate.py` measures it). A client that runs
no command reports no acceptance: its counts stay zero."""

from __future__ import annotations

from collections import Counter
from typing import Any

from lsp_server.routing.kept_chars import KeptChars


class InlineOutcomes:
    def __init__(self) -> None:
        self.offered: Counter[str] = Counter()
        self.accepted: Counter[str] = Counter()
        self.chars = KeptChars()

    def status(self, endpoint: str) -> dict[str, Any]:
        offered = self.offered[endpoint]
        return {
            "offered": offered,
            "accepted": self.accepted[endpoint],
            "acceptance_rate": round(self.accepted[endpoint] / offered, 3) if offered else None,
            "kept_rate": self.chars.rate(endpoint),
        }
