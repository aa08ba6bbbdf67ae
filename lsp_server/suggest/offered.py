"""Inline suggestions offered to an editor, remembered by a short random id, so that the
acceptance an editor reports (the command an item carries, which LSP 3.18 clients run once
they have inserted it) is matched with what the server sent: where, what text, who answered.
Nothing the editor sends but the id is believed. Bounded in count and age: an editor accepts
what it shows now, not what it was offered minutes ago."""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

MAX_OFFERED = 256  # suggestions remembered; the oldest go first
OFFERED_FOR_S = 300.0  # an older one is forgotten
MAX_ID_CHARS = 32


@dataclass(frozen=True, slots=True)
class Offered:
    uri: str
    offset: int  # where the text was offered, in the document as it was then
    text: str
    endpoint: str
    at: float


class OfferedSuggestions:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._offered: OrderedDict[str, Offered] = OrderedDict()

    def offer(self, *, uri: str, offset: int, text: str, endpoint: str) -> str:
        """Remember a suggestion going out; its id."""
        offer_id = secrets.token_urlsafe(9)
        self._offered[offer_id] = Offered(uri, offset, text, endpoint, self._clock())
        while len(self._offered) > MAX_OFFERED:
            self._offered.popitem(last=False)
        return offer_id

    def take(self, offer_id: str) -> Offered | None:
        """The suggestion offered under `offer_id`, forgotten now; None if there is none (an
        id never given, already taken, or expired)."""
        if len(offer_id) > MAX_ID_CHARS:
            return None
        offered = self._offered.pop(offer_id, None)
        if offered is None or self._clock() - offered.at > OFFERED_FOR_S:
            return None
        return offered
