"""The person's recent edits, as unified diffs, oldest first, across the workspace's documents:
the one record of what the user changed, which the prompts, the filter of predicted edits
(`edit_filter.py`: the lines the last edit removed and added, `changed_lines`) and the kept
rate (`kept_rate.py`: a stretch of a document followed through the user's edits, `track`)
all read.

Edits arrive as `didChange` events, keystroke by keystroke. Keystrokes close together in one
document (on one line, or the lines next to it) are one edit: the edit stays open while they
come, and closes when the person types elsewhere, in another document, or pauses for
`COALESCE_PAUSE_S`. A closed edit becomes one diff of the document before it and after it.
What is kept is bounded in count, size and age (the constants below; `bench/bench_next_edit.py`
compares counts with `--history`, but its tasks hold at most five edits, so no figure has
chosen them yet), and an edit too large to be a step of work (a paste, a format of the file) is
left out.
"""

from __future__ import annotations

import difflib
import math
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from lsp_server.nextedit.request import HistoryEdit

HISTORY_MAX_EDITS = 8  # edits kept
HISTORY_MAX_EDIT_CHARS = 2000  # a larger diff is left out
HISTORY_MAX_CHARS = 6000  # all the diffs of one prompt; the oldest go first
HISTORY_MAX_AGE_S = 600.0  # older edits are forgotten
COALESCE_PAUSE_S = 2.0  # a pause this long ends an edit
DIFF_CONTEXT_LINES = 3
MAX_DOCUMENT_CHARS = 1_000_000  # larger documents are not followed
MAX_DOCUMENTS = 64
MAX_TRACKED_SPANS = 64  # stretches followed at once; the oldest is let go

_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@", re.MULTILINE)
_COMPARE_CHUNK = 4096


@dataclass(slots=True)
class _OpenEdit:
    uri: str
    path: str
    before: str
    after: str
    first_line: int
    last_line: int
    changed_at: float


@dataclass(slots=True)
class TrackedSpan:
    """A stretch `[start, end)` of a document, followed through the user's edits: it moves
    with an edit before it and grows to cover an edit that touches it; `lost` once the
    document was closed or its changes could not be followed."""

    uri: str
    start: int
    end: int
    lost: bool = False

    def moved(self, start: int, end: int, inserted: int) -> None:
        """The document's `[start, end)` was replaced by `inserted` characters. A change
        that touches the span, an insertion at either of its ends included, belongs to it."""
        delta = inserted - (end - start)
        if end < self.start or (end == self.start and start < end):
            self.start += delta
            self.end += delta
        elif start < self.end or (start == self.end and start == end):
            self.start = min(self.start, start)
            self.end = max(self.end, end) + delta


@dataclass(frozen=True, slots=True)
class _Closed:
    edit: HistoryEdit
    at: float


class EditHistory:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._texts: dict[str, str] = {}
        self._open: _OpenEdit | None = None
        self._closed: deque[_Closed] = deque(maxlen=HISTORY_MAX_EDITS)
        self._spans: deque[TrackedSpan] = deque()

    def opened(self, uri: str, text: str) -> None:
        if len(text) <= MAX_DOCUMENT_CHARS:
            self._remember(uri, text)

    def changed(self, uri: str, path: str, text: str, line: int | None) -> None:
        """The document at `uri` is now `text`, changed at `line` (0-based; None: unknown, the
        client sent the whole text)."""
        before = self._texts.get(uri)
        if before is None or len(text) > MAX_DOCUMENT_CHARS:
            self._lose(uri)
            self.opened(uri, text)
            return
        self._move_spans(uri, before, text)
        now = self._clock()
        edit = self._open
        if (
            edit is not None
            and edit.uri == uri
            and (line is None or edit.first_line - 1 <= line <= edit.last_line + 1)
            and now - edit.changed_at < COALESCE_PAUSE_S
        ):
            edit.after = text
            if line is not None:
                edit.first_line = min(edit.first_line, line)
                edit.last_line = max(edit.last_line, line)
            edit.changed_at = now
        else:
            self._close()
            at = line if line is not None else 0
            self._open = _OpenEdit(uri, path, before, text, at, at, now)
        self._remember(uri, text)

    def closed(self, uri: str) -> None:
        if self._open is not None and self._open.uri == uri:
            self._close()
        self._texts.pop(uri, None)
        self._lose(uri)

    def text(self, uri: str) -> str | None:
        """The document as the last event left it; None when it is not followed."""
        return self._texts.get(uri)

    def track(self, uri: str, start: int, end: int) -> TrackedSpan | None:
        """Follow `[start, end)` of the document at `uri` through the edits to come."""
        if uri not in self._texts:
            return None
        span = TrackedSpan(uri, start, end)
        self._spans.append(span)
        while len(self._spans) > MAX_TRACKED_SPANS:
            self._spans.popleft().lost = True
        return span

    def untrack(self, span: TrackedSpan) -> None:
        if span in self._spans:
            self._spans.remove(span)

    def _move_spans(self, uri: str, before: str, after: str) -> None:
        spans = [span for span in self._spans if span.uri == uri]
        if not spans or before == after:
            return
        head = _common_prefix(before, after)
        tail = _common_suffix(before, after, limit=min(len(before), len(after)) - head)
        for span in spans:
            span.moved(head, len(before) - tail, len(after) - tail - head)

    def _lose(self, uri: str) -> None:
        for span in [span for span in self._spans if span.uri == uri]:
            span.lost = True
            self._spans.remove(span)

    def recent(self) -> tuple[HistoryEdit, ...]:
        """The recent edits, oldest first, the one still open last, within the bounds."""
        now = self._clock()
        edits = [c.edit for c in self._closed if now - c.at <= HISTORY_MAX_AGE_S]
        if self._open is not None:
            current = _as_edit(self._open)
            if current is not None:
                edits.append(current)
        kept: list[HistoryEdit] = []
        total = 0
        for edit in reversed(edits[-HISTORY_MAX_EDITS:]):
            total += len(edit.diff)
            if total > HISTORY_MAX_CHARS:
                break
            kept.append(edit)
        return tuple(reversed(kept))

    def now(self) -> float:
        return self._clock()

    def recent_until(self) -> float:
        """When `recent()` would first give less by age alone: when its oldest edit ages out."""
        now = self._clock()
        for closed in self._closed:  # oldest first
            if now - closed.at <= HISTORY_MAX_AGE_S:
                return closed.at + HISTORY_MAX_AGE_S
        return math.inf

    def _close(self) -> None:
        edit, self._open = self._open, None
        if edit is None:
            return
        closed = _as_edit(edit)
        if closed is not None:
            self._closed.append(_Closed(closed, edit.changed_at))

    def _remember(self, uri: str, text: str) -> None:
        self._texts.pop(uri, None)
        self._texts[uri] = text
        while len(self._texts) > MAX_DOCUMENTS:
            self._texts.pop(next(iter(self._texts)))


def _as_edit(edit: _OpenEdit) -> HistoryEdit | None:
    diff = unified_diff(edit.path, edit.before, edit.after)
    if not diff or len(diff) > HISTORY_MAX_EDIT_CHARS:
        return None
    return HistoryEdit(edit.uri, edit.path, diff)


def changed_lines(diff: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The lines a unified diff removes and the lines it adds, in order, without their
    `-`/`+` (the file header before the first hunk left out)."""
    removed: list[str] = []
    added: list[str] = []
    in_hunks = False
    for line in diff.split("\n"):
        if line.startswith("@@"):
            in_hunks = True
        elif in_hunks and line.startswith("-"):
            removed.append(line[1:])
        elif in_hunks and line.startswith("+"):
            added.append(line[1:])
    return tuple(removed), tuple(added)


def unified_diff(path: str, before: str, after: str, context: int = DIFF_CONTEXT_LINES) -> str:
    """The unified diff of `before` and `after`, numbered as lines of the whole file; only
    the stretch that differs is compared, so a large file costs little."""
    if before == after:
        return ""
    head = _common_prefix(before, after)
    tail = _common_suffix(before, after, limit=min(len(before), len(after)) - head)
    start = _start_of_line(before, head, back=context)
    before_end = _end_of_line(before, len(before) - tail, ahead=context)
    after_end = before_end - len(before) + len(after)
    base = before.count("\n", 0, start)
    lines = difflib.unified_diff(
        before[start:before_end].splitlines(keepends=True),
        after[start:after_end].splitlines(keepends=True),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
        n=context,
    )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return _HUNK.sub(lambda m: _renumbered(m, base), text).rstrip("\n")


def _renumbered(match: re.Match[str], base: int) -> str:
    old, old_count, new, new_count = match.groups()
    return f"@@ -{int(old) + base}{old_count or ''} +{int(new) + base}{new_count or ''} @@"


def _common_prefix(a: str, b: str) -> int:
    """Compared a block at a time, then in halving blocks in the block that differs: slices
    compared in C, never a character at a time in Python (a 4 KB block of a large file took
    milliseconds that way, on every next edit)."""
    limit = min(len(a), len(b))
    i, step = 0, _COMPARE_CHUNK
    while step:
        while i + step <= limit and a[i : i + step] == b[i : i + step]:
            i += step
        step //= 2
    return i


def _common_suffix(a: str, b: str, limit: int) -> int:
    """As `_common_prefix`, from the ends, no further than `limit` characters."""
    i, step = 0, _COMPARE_CHUNK
    while step:
        while i + step <= limit and (
            a[len(a) - i - step : len(a) - i] == b[len(b) - i - step : len(b) - i]
        ):
            i += step
        step //= 2
    return i


def _start_of_line(text: str, offset: int, *, back: int) -> int:
    start = text.rfind("\n", 0, offset) + 1
    for _ in range(back):
        if start == 0:
            break
        start = text.rfind("\n", 0, start - 1) + 1
    return start


def _end_of_line(text: str, offset: int, *, ahead: int) -> int:
    """The offset after the line break ending the line at `offset`, `ahead` lines further."""
    end = offset
    for _ in range(ahead + 1):
        newline = text.find("\n", end)
        if newline < 0:
            return len(text)
        end = newline + 1
    return end
