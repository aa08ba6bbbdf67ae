"""How often the deadline cut a document's first keystroke, per preset, for the status.

The first keystroke in a document is the one whose prompt the model may not have read yet: the
one `local.deadline_ms` cuts when reading ahead had too little time. Each document counts once
per preset, with the first keystroke that got a verdict: it ended by itself, or the deadline
stopped it (a keystroke superseded sooner gives none). The documents remembered are bounded.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

DOCUMENTS_KEPT = 4096


@dataclass(slots=True)
class _Counts:
    documents: int = 0
    cut: int = 0


class FirstKeystrokes:
    def __init__(self, documents_kept: int = DOCUMENTS_KEPT) -> None:
        self._kept = documents_kept
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._counts: dict[str, _Counts] = {}

    def is_first(self, preset: str, document: str) -> bool:
        return (preset, document) not in self._seen

    def record(self, preset: str, document: str, *, cut: bool) -> None:
        """The verdict of `document`'s first keystroke on `preset`; later ones are ignored."""
        if not self.is_first(preset, document):
            return
        self._seen[(preset, document)] = None
        if len(self._seen) > self._kept:
            self._seen.popitem(last=False)
        counts = self._counts.setdefault(preset, _Counts())
        counts.documents += 1
        counts.cut += cut

    def status(self) -> dict[str, dict[str, Any]]:
        """Per preset: the documents counted and the share of their first keystrokes cut."""
        return {
            preset: {"documents": c.documents, "cut_share": round(c.cut / c.documents, 3)}
            for preset, c in self._counts.items()
        }
