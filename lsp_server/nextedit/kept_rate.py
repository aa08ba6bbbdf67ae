"""How much of an accepted next edit is still in the document a while later, per endpoint.

Zed measures its predictions so (`kept_rate` in its `edit_prediction` crate): the characters
the edit inserted that are still present, over the characters it inserted, compared token by
token (words, runs of whitespace, single punctuation) so that an edit later typed over counts
in part. `KEPT_WINDOW_S` after an acceptance the accepted stretch of the document, followed
through the user's edits by the history, is compared with what the edit wrote and with what it
replaced; an edit undone meanwhile keeps nothing, and a stretch grown far beyond the edit by
later typing counts as not kept, as in Zed. An edit that inserts nothing (a deletion) is not
measured. The figures go to the router's `EditOutcomes`, beside acceptance.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from difflib import SequenceMatcher

from lsp_server.nextedit.history import EditHistory, TrackedSpan
from lsp_server.routing.edit_outcomes import EditOutcomes

KEPT_WINDOW_S = 30.0
# Zed's bound: a stretch whose length moved this much further from the edit's is not compared.
MAX_DIRTY_CHARS = 512
_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


def kept_chars(base: str, predicted: str, final: str) -> tuple[int, int]:
    """(kept, inserted): of the characters `predicted` adds to `base`, those still in
    `final`."""
    predicted_tokens = _TOKEN.findall(predicted)
    new = _unmatched(predicted_tokens, _TOKEN.findall(base))
    inserted = sum(len(predicted_tokens[i]) for i in new)
    if abs(abs(len(final) - len(base)) - abs(len(predicted) - len(base))) > MAX_DIRTY_CHARS:
        return 0, inserted
    gone = _unmatched(predicted_tokens, _TOKEN.findall(final))
    return sum(len(predicted_tokens[i]) for i in new - gone), inserted


def _unmatched(tokens: list[str], other: list[str]) -> set[int]:
    """The indexes of `tokens` that a longest matching of `tokens` with `other` leaves out."""
    matcher = SequenceMatcher(None, tokens, other, autojunk=False)
    matched = {b.a + i for b in matcher.get_matching_blocks() for i in range(b.size)}
    return set(range(len(tokens))) - matched


@dataclass(slots=True)
class _Watch:
    endpoint: str
    span: TrackedSpan
    base: str
    predicted: str
    due: float


class KeptRate:
    def __init__(
        self,
        history: EditHistory,
        outcomes: EditOutcomes,
        *,
        window_s: float = KEPT_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`window_s`: how long after an acceptance the document is compared."""
        self._history = history
        self._outcomes = outcomes
        self._window_s = window_s
        self._clock = clock
        self._watches: list[_Watch] = []

    def accepted(self, endpoint: str, uri: str, start: int, replaced: str, text: str) -> None:
        """`endpoint`'s edit replacing `replaced` at `start` with `text` was accepted; the
        client may have applied it already or apply it next."""
        document = self._history.text(uri)
        if document is None or not text:
            return
        if document.startswith(text, start):
            span = self._history.track(uri, start, start + len(text))  # applied already
        elif document.startswith(replaced, start):
            span = self._history.track(uri, start, start + len(replaced))  # to be applied
        else:
            return
        if span is None:
            return
        self._watches.append(_Watch(endpoint, span, replaced, text, self._clock() + self._window_s))
        # Without an event loop (a caller of its own), settled when settle_due is called.
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().call_later(self._window_s, self.settle_due)

    def settle_due(self) -> None:
        """Measure every acceptance whose window is over."""
        now = self._clock()
        due = [w for w in self._watches if w.due <= now]
        self._watches = [w for w in self._watches if w.due > now]
        for watch in due:
            self._history.untrack(watch.span)
            document = self._history.text(watch.span.uri)
            if watch.span.lost or document is None:
                continue
            final = document[watch.span.start : watch.span.end]
            kept, inserted = kept_chars(watch.base, watch.predicted, final)
            if inserted:
                self._outcomes.kept(watch.endpoint, kept, inserted)
