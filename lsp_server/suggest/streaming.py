"""Clean a suggestion while it streams: send what can no longer change, hold back the tail.

`clean_suggestion` sees the whole answer; a streaming client should not wait for it. What
post-processing can still change lies at the end of the text: an unfinished line (a string or
comment not yet closed, a special token half written), a partial stop string, lines that may
turn out to repeat the code after the cursor, text the suffix begins with. `StreamingCleaner`
cleans the settled part of what has arrived, sends the cleaned text minus that tail, and at
the end sends the rest of what the whole answer cleans to, so the chunks add up to the answer
a non-streaming request gets for the same upstream text.
"""

from __future__ import annotations

import logging

from lsp_server.backends.base import CompletionRequest
from lsp_server.suggest.postprocess import ECHO_LOOKBACK_LINES, clean_suggestion

log = logging.getLogger(__name__)

_QUOTES = "\"'`"


def cut_at_stops(text: str, stops: tuple[str, ...]) -> str:
    """`text` up to the first of `stops` (an upstream applies only the first four)."""
    cuts = [text.find(stop) for stop in stops if stop and stop in text]
    return text[: min(cuts)] if cuts else text


class StreamingCleaner:
    def __init__(self, request: CompletionRequest) -> None:
        self._request = request
        self._raw = ""
        self._sent = ""
        self._settled_before = ""  # the settled text the last piece left
        self._settled_clean: str | None = None  # its cleaning; None: not cleaned (none sent)
        self._diverged = False
        self._echoes = _echo_candidates(request.prefix.replace("\r\n", "\n"))
        self._following = _following_lines(request.suffix.replace("\r\n", "\n"))
        self._suffix = request.suffix.replace("\r\n", "\n")

    def feed(self, piece: str) -> str:
        """Take the next piece of raw text; return what may be sent now (possibly "")."""
        self._raw += piece
        if self._diverged:
            return ""
        settled = self._settled(cut_at_stops(self._raw, self._request.stop))
        if settled == self._settled_before:
            return ""  # most pieces settle nothing: a line (a word) settles at its end
        self._settled_before, self._settled_clean = settled, None
        if not settled.strip() or any(echo.startswith(settled) for echo in self._echoes):
            return ""  # nothing yet, or possibly the start of a copy of the text before the cursor
        self._settled_clean = clean_suggestion(settled, self._request)
        cleaned = self._settled_clean.replace("\r\n", "\n")
        sendable = cleaned[: len(cleaned) - self._held_back(cleaned)]
        return self._send(sendable)

    def clean(self, raw: str) -> str:
        """`clean_suggestion` of the whole answer, `raw` (cut at the stops): an answer that
        ended its last line settled whole with its last piece, and was cleaned then."""
        if self._settled_clean is not None and raw == self._settled_before:
            return self._settled_clean
        return clean_suggestion(raw, self._request)

    def finish(self, final: str) -> str:
        """What is left to send once the whole answer cleans to `final` (`clean`)."""
        if final.startswith(self._sent):
            return final[len(self._sent) :]
        log.warning("a streamed suggestion diverged from its cleaned answer")
        return ""

    def _send(self, sendable: str) -> str:
        sendable = self._crlf(sendable)
        if not sendable.startswith(self._sent):
            self._diverged = True  # a rule rewrote text already sent: send only the end
            return ""
        new, self._sent = sendable[len(self._sent) :], sendable
        return new

    def _crlf(self, text: str) -> str:
        request = self._request
        crlf = "\r\n" in request.prefix or "\r\n" in request.suffix
        return text.replace("\n", "\r\n") if crlf else text

    def _settled(self, raw: str) -> str:
        """The part of `raw` whose cleaning more text cannot change, but for the tail rules."""
        kept = _without_partial_stop(raw, self._request.stop)
        if raw[len(kept) :].startswith(("\n", "\r\n")):
            kept += "\n"  # a stop may start at this line break, but the line itself is whole
        raw = kept.replace("\r\n", "\n")
        if self._request.single_line:
            # Words are whole before a blank; a string not yet closed may hide a bracket.
            blank = max(raw.rfind(" "), raw.rfind("\t"), raw.rfind("\n"))
            settled = raw[: blank + 1] if blank >= 0 else ""
            for quote in _QUOTES:
                if settled.count(quote) % 2:
                    settled = settled[: settled.index(quote)]
            return settled
        fences = "```" in raw or "~~~" in raw
        if fences:
            return ""  # a fenced answer is cut as a whole: the code of the block
        return raw[: raw.rfind("\n") + 1]

    def _held_back(self, cleaned: str) -> int:
        """How many characters at the end of `cleaned` the rest of the answer may still cut."""
        lines = cleaned.split("\n")
        held = 0
        # Trailing lines that could be the start of a copy of the lines after the cursor.
        for count in range(len(lines), 0, -1):
            stripped = [line.strip() for line in lines[-count:] if line.strip()]
            if stripped and stripped == self._following[: len(stripped)]:
                held = len("\n".join(lines[-count:])) + (1 if count < len(lines) else 0)
                break
        # Trailing text the suffix begins with.
        for size in range(min(len(cleaned), len(self._suffix)), 0, -1):
            if cleaned.endswith(self._suffix[:size]):
                held = max(held, size)
                break
        return held


def _without_partial_stop(raw: str, stops: tuple[str, ...]) -> str:
    """`raw` without the longest end that may be the beginning of a stop string."""
    held = 0
    for stop in stops:
        for size in range(min(len(stop) - 1, len(raw)), held, -1):
            if raw.endswith(stop[:size]):
                held = size
                break
    return raw[: len(raw) - held]


def _echo_candidates(prefix: str) -> list[str]:
    """What `remove_echoed_prefix` would drop if the suggestion began with it."""
    line_start = prefix.rfind("\n") + 1
    line_before = prefix[line_start:]
    if not line_before:
        return []
    starts = [line_start]
    while len(starts) < ECHO_LOOKBACK_LINES and starts[-1] > 0:
        starts.append(prefix.rfind("\n", 0, starts[-1] - 1) + 1)
    return [prefix[start:] for start in starts] + [line_before.lstrip()]


def _following_lines(suffix: str) -> list[str]:
    return [line.strip() for line in suffix.split("\n")[1:] if line.strip()]
