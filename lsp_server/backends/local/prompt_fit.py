"""Fitting a prompt the KV cache holds only part of into what a keystroke can still read.

The first keystroke in a document, or one after the cursor jumped, finds at best the start of
its prompt read ahead; on one CPU core the rest of a window of several hundred tokens takes
seconds, past the deadline. Such a prompt keeps the part that is read (cut back to a line's
end) and goes on with the lines just before the cursor, as many as can be read in time: the
lines between are left out. In a fill-in-the-middle prompt the code after the cursor is cut
first (a quarter of the room at most while the code before is still unread). With nothing read
ahead this is a short window ending at the cursor. The model writes its line in time instead
of nothing; the read-ahead fills in the gap while the person reads the suggestion.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FimTokens:
    prefix: int
    suffix: int
    middle: int


def fit_prompt(
    prompt: Sequence[int],
    cached: int,
    affordable: int,
    *,
    bos: Sequence[int],
    fim: FimTokens | None,
    line_break_before: Callable[[int], bool],
) -> list[int]:
    """`prompt`, or a shorter one sharing its first `cached` tokens (cut back to a line break)
    whose tokens past them number about `affordable`.

    `line_break_before(i)`: a line ends between `prompt[i - 1]` and `prompt[i]`, where a cut
    leaves whole lines on both sides. A fill-in-the-middle prompt is `bos`, the prefix marker,
    the code before the cursor, the suffix marker, the code after it, the middle marker, and
    possibly text typed since (`MiddleAnchor`); context beyond the file may come before or
    just after the prefix marker."""
    tokens = list(prompt)
    if len(tokens) - cached <= affordable:
        return tokens
    if fim is None:
        head, resume = _head(tokens, cached, len(bos), bos, None, line_break_before)
        start = _line_start(tokens, len(tokens) - affordable, len(tokens), line_break_before)
        return head + tokens[max(start, resume) :]
    suffix_at = tokens.index(fim.suffix)
    middle_at = tokens.index(fim.middle, suffix_at)
    suffix = tokens[suffix_at + 1 : middle_at]
    typed = tokens[middle_at + 1 :]
    room = affordable - len(typed) - 2  # the suffix and middle markers
    if cached > suffix_at:  # the code before the cursor is read: the rest is the suffix's
        read = min(len(suffix), cached - suffix_at - 1)
        kept = min(len(suffix), read + max(room, 0))
        return [*tokens[: suffix_at + 1], *suffix[:kept], fim.middle, *typed]
    kept_suffix = suffix[: max(room, 0) // 4]
    room -= len(kept_suffix)
    prefix_at = tokens.index(fim.prefix)
    head, resume = _head(tokens, cached, prefix_at + 1, bos, fim.prefix, line_break_before)
    if len(head) > cached:
        room -= 1  # the prefix marker, read again after a context that was not read
    start = _line_start(tokens, suffix_at - max(room, 0), suffix_at, line_break_before)
    before_cursor = tokens[max(start, resume) : suffix_at]
    return [*head, *before_cursor, fim.suffix, *kept_suffix, fim.middle, *typed]


def _head(
    tokens: list[int],
    cached: int,
    least: int,
    bos: Sequence[int],
    prefix_marker: int | None,
    line_break_before: Callable[[int], bool],
) -> tuple[list[int], int]:
    """The read start of `tokens` to keep, and where in `tokens` the prompt goes on after it:
    up to the last line break within the first `cached`, and at least `least` tokens (which
    end with `prefix_marker`, if any); when fewer than that are read, the beginning alone
    (`bos` and the marker), and the rest of what comes before `least` is left out."""
    if cached < least:
        return ([*bos, prefix_marker] if prefix_marker is not None else list(bos)), least
    end = cached
    while end > least and not line_break_before(end):
        end -= 1
    return tokens[:end], end


def _line_start(
    tokens: list[int], earliest: int, end: int, line_break_before: Callable[[int], bool]
) -> int:
    """The first line start at or after `earliest` before `end`; `earliest` if there is none."""
    earliest = max(earliest, 0)
    for index in range(earliest, end):
        if line_break_before(index):
            return index
    return earliest
