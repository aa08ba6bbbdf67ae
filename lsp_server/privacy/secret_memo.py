"""Secret scanning for keystroke after keystroke in one document.

Between two keystrokes the cursor's line changes, or the cursor moves to another line; the rest
of the prompt is mostly the same text again. The lines around the cursor are scanned on every
keystroke. The text before them and the text after them are each remembered whole (typing on
one line rescans nothing else) and, when new, judged block by block: cut into blocks of lines
where the content says (so a block stays the same when lines are added above it), each block's
verdict remembered by its text, so a moved cursor or a new line rescans the blocks at the edges
that moved. A text mostly new (a window opened elsewhere) is scanned whole once instead, as
many small scans cost more than one.

Every rule but the private key block looks at most `_REACH_ABOVE` lines above where a secret
begins (a name and its value on the next line, a `.netrc` entry over three lines, the line
before a hex token, a Terraform variable's name a few lines above its default) and at most
`_REACH_BELOW` lines below it. So the lines around the cursor are scanned with `_REACH_ABOVE`
lines either side (a name typed on the cursor's line may belong to a value below it), each block
with `_REACH_ABOVE` lines before it and `_REACH_BELOW` after, keeping the secrets that begin
inside it, and together they find what a scan of the whole prompt finds. A key block spans any
number of lines: a prompt that may hold one is scanned whole.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from itertools import compress, count, repeat
from operator import lt, mod
from typing import TypeVar
from zlib import crc32

from lsp_server.privacy.block_secrets import BLOCK_REACH
from lsp_server.privacy.secret_rules import first_secret

# The one rule whose match spans any number of lines (`-----BEGIN … PRIVATE KEY-----`, body).
MULTI_LINE_MARKER = "PRIVATE KEY"

_REACH_ABOVE = max(2, BLOCK_REACH)
_REACH_BELOW = 2
# A line ends a block with a chance of its length in `_BLOCK_BYTES`: blocks of that size on
# average, whatever the lines' lengths, and never at a blank line.
_BLOCK_BYTES = 256
# Texts before and after the cursor's lines remembered whole: the last few keystrokes'.
_REGIONS = 4
# Lone surrogates can reach a document through JSON; they round-trip through this encoding.
_ENCODING, _ERRORS = "utf-8", "surrogatepass"

_Key = TypeVar("_Key")


def blocks(lines: list[bytes]) -> Iterator[tuple[int, int]]:
    """The first and last index of each block of `lines`.

    A line ends a block when `crc32(line) % _BLOCK_BYTES < len(line)`, worked out with `map`
    and `compress` so that the loop over lines runs in C: it runs on every moved cursor."""
    chances = map(mod, map(crc32, lines), repeat(_BLOCK_BYTES))
    ends = compress(count(), map(lt, chances, map(len, lines)))
    first = 0
    for end in (*ends, len(lines) - 1):
        if end >= first:
            yield first, end
            first = end + 1


class SecretMemo:
    """The kind of the first secret in a prompt, remembering the verdicts on the text before
    and after the cursor's lines and on each of their blocks."""

    def __init__(self, capacity: int = 256) -> None:
        self._capacity = capacity
        # The text before or after the lines around the cursor -> kind or None.
        self._regions: OrderedDict[str, str | None] = OrderedDict()
        # A block, as `_scanned_block` gives it -> kind or None.
        self._verdicts: OrderedDict[tuple[int, bytes], str | None] = OrderedDict()

    def first_secret_kind(self, prefix: str, suffix: str) -> str | None:
        width = len(MULTI_LINE_MARKER)
        at_cursor = prefix[-width:] + suffix[:width]
        if (
            MULTI_LINE_MARKER in prefix
            or MULTI_LINE_MARKER in suffix
            or MULTI_LINE_MARKER in at_cursor
        ):
            finding = first_secret(prefix + suffix)
            return finding.kind if finding is not None else None
        head, _, line_start = prefix.rpartition("\n")
        line_end, _, tail = suffix.partition("\n")
        around = (
            *head.rsplit("\n", _REACH_ABOVE)[-_REACH_ABOVE:],
            line_start + line_end,
            *tail.split("\n", _REACH_ABOVE)[:_REACH_ABOVE],
        )
        current = first_secret("\n".join(around))
        if current is not None:
            return current.kind
        return self._region_kind(head) or self._region_kind(tail)

    def _region_kind(self, text: str) -> str | None:
        """The verdict on the text before or after the cursor's lines: the same text as at the
        last keystroke while typing on one line, else judged block by block."""
        if not text:
            return None
        if text in self._regions:
            self._regions.move_to_end(text)
            return self._regions[text]
        kind = self._kind_by_blocks(text)
        _remember(self._regions, text, kind, _REGIONS)
        return kind

    def _kind_by_blocks(self, text: str) -> str | None:
        """Blocks judged before are looked up. When most of `text` is new (a window opened
        elsewhere), it is scanned whole: one scan costs less than many small ones, and when it
        is clean so is each of its blocks."""
        encoded = text.encode(_ENCODING, _ERRORS)
        lines = encoded.split(b"\n")
        new = []
        for block in (_scanned_block(lines, first, last) for first, last in blocks(lines)):
            if block in self._verdicts:
                self._verdicts.move_to_end(block)
                if (kind := self._verdicts[block]) is not None:
                    return kind
            else:
                new.append(block)
        if 2 * sum(len(scanned) for _, scanned in new) > len(encoded):
            finding = first_secret(text)
            if finding is not None:
                return finding.kind
            for block in new:
                _remember(self._verdicts, block, None, self._capacity)
            return None
        for block in new:
            kind = _block_kind(*block)
            _remember(self._verdicts, block, kind, self._capacity)
            if kind is not None:
                return kind
        return None


def _scanned_block(lines: list[bytes], first: int, last: int) -> tuple[int, bytes]:
    """The lines `first` to `last` with the lines either side a finding in them may read, and
    where its own begin."""
    start = max(0, first - _REACH_ABOVE)
    own_start = len(b"\n".join(lines[start:first])) + 1 if first > start else 0
    return own_start, b"\n".join(lines[start : last + 1 + _REACH_BELOW])


def _block_kind(own_start: int, scanned: bytes) -> str | None:
    """The first secret in `scanned` that begins at byte `own_start` or later (the lines
    before it belong to another block, which judges them)."""
    text = scanned.decode(_ENCODING, _ERRORS)
    finding = first_secret(text, len(scanned[:own_start].decode(_ENCODING, _ERRORS)))
    return finding.kind if finding is not None else None


def _remember(
    verdicts: OrderedDict[_Key, str | None], key: _Key, kind: str | None, capacity: int
) -> None:
    verdicts[key] = kind
    if len(verdicts) > capacity:
        verdicts.popitem(last=False)
