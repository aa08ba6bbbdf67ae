"""Whether a predicted next edit is worth showing: the one filter between the model and the
screen, for every client and front door.

Small models rarely predict the next hunk, and a wrong edit costs the person more than none
(bench/README.md). So an edit is dropped when it is:

- whitespace only (every eagerness);
- equal to an edit dismissed at the same place in the last `DISMISSED_FOR_S` (every eagerness);
- an undo of the last edit of the history: it removes what that edit added and adds back what
  it removed (`medium` and `low`);
- a rewrite of what the user is typing: the cursor's line is one the last edit wrote, and the
  edit changes lines that edit wrote, which is ghost text's job (`medium` and `low`);
- at `medium`, also an edit that rewrites more than `MEDIUM_MAX_CHANGED_LINES` lines, half the
  shipped 13-line region: on bench_next_edit's 60 tasks every such edit of the 0.5B local model
  was a false edit or further from the next hunk than no edit (bench/README.md);
- at `low`, also an edit more than `LOW_REACH_LINES` lines from the cursor or changing more
  than `LOW_MAX_CHANGED_LINES` lines.

The user's last edit is read from the request's history (`history.changed_lines`), which every
front door fills: the LSP server from its documents, the gateway from the client's prompt.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lsp_server.config.model import EditEagerness
from lsp_server.nextedit.history import changed_lines
from lsp_server.nextedit.request import EditRequest
from lsp_server.text_edits import OffsetEdit

DISMISSED_FOR_S = 60.0  # a dismissed edit is not shown again at the same place for this long
MAX_DISMISSED = 32  # dismissals remembered
MEDIUM_MAX_CHANGED_LINES = 6
LOW_REACH_LINES = 3
LOW_MAX_CHANGED_LINES = 4


@dataclass(frozen=True, slots=True)
class _Dismissal:
    uri: str
    replaced: str
    text: str
    at: float


class EditFilter:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._dismissed: deque[_Dismissal] = deque(maxlen=MAX_DISMISSED)

    def dismissed(self, uri: str, replaced: str, text: str) -> None:
        """An edit replacing `replaced` with `text` in `uri` was dismissed."""
        self._dismissed.append(_Dismissal(uri, replaced, text, self._clock()))

    def verdict(
        self, request: EditRequest, edits: Sequence[OffsetEdit], eagerness: EditEagerness
    ) -> str | None:
        """Why the `edits` (sorted, of `request.text`) are not shown; None: they are."""
        if not edits:
            return None
        text = request.text
        if all(_squeezed(text[e.start : e.end]) == _squeezed(e.text) for e in edits):
            return "whitespace only"
        if self._dismissed_here(request.uri, text, edits):
            return "dismissed here a moment ago"
        if eagerness == "high":
            return None
        removed, added, lines = _changed(text, edits)
        last = request.history[-1] if request.history else None
        if last is not None and (last.uri == request.uri or last.path == request.path):
            last_removed, last_added = (_stripped(lines) for lines in changed_lines(last.diff))
            if (removed or added) and removed <= last_added and added <= last_removed:
                return "undoes the last edit"
            if _line_at(text, request.cursor).strip() in last_added and removed & last_added:
                return "rewrites what is being typed"
        if eagerness == "medium":
            return "rewrites much of the region" if lines > MEDIUM_MAX_CHANGED_LINES else None
        if lines > LOW_MAX_CHANGED_LINES or _distance(text, request.cursor, edits) > (
            LOW_REACH_LINES
        ):
            return "far from the cursor or large"
        return None

    def _dismissed_here(self, uri: str, text: str, edits: Sequence[OffsetEdit]) -> bool:
        now = self._clock()
        start, end = edits[0].start, edits[-1].end
        replaced = text[start:end]
        inserted = _hull_text(text, edits)
        return any(
            d.uri == uri and d.replaced == replaced and d.text == inserted
            for d in self._dismissed
            if now - d.at <= DISMISSED_FOR_S
        )


def _hull_text(text: str, edits: Sequence[OffsetEdit]) -> str:
    pieces: list[str] = []
    at = edits[0].start
    for edit in edits:
        pieces += [text[at : edit.start], edit.text]
        at = edit.end
    return "".join(pieces)


def _changed(text: str, edits: Sequence[OffsetEdit]) -> tuple[set[str], set[str], int]:
    """The lines (stripped, blank ones aside) the edits remove and add, and how many lines
    they touch."""
    removed: set[str] = set()
    added: set[str] = set()
    touched = 0
    for edit in edits:
        start = text.rfind("\n", 0, edit.start) + 1
        end = text.find("\n", edit.end)
        end = len(text) if end < 0 else end
        old = text[start:end].split("\n")
        new = (text[start : edit.start] + edit.text + text[edit.end : end]).split("\n")
        old_set, new_set = _stripped(old), _stripped(new)
        removed |= old_set - new_set
        added |= new_set - old_set
        touched += max(len(old), len(new))
    return removed, added, touched


def _stripped(lines: Sequence[str]) -> set[str]:
    return {line.strip() for line in lines if line.strip()}


def _squeezed(text: str) -> str:
    return "".join(text.split())


def _line_at(text: str, offset: int) -> str:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return text[start : len(text) if end < 0 else end]


def _distance(text: str, cursor: int, edits: Sequence[OffsetEdit]) -> int:
    """Lines between the cursor's line and the nearest line the edits touch."""
    line = text.count("\n", 0, cursor)
    first = text.count("\n", 0, edits[0].start)
    last = first + text.count("\n", edits[0].start, edits[-1].end)
    return 0 if first <= line <= last else min(abs(line - first), abs(line - last))
