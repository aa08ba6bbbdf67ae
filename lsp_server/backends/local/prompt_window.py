"""The code before the cursor in a local prompt: a window whose start stays put.

The KV cache holds a prompt up to its first changed token. A window of the last N tokens before
the cursor starts elsewhere whenever the cursor moves a line, so the first keystroke a few lines
from where the document was read ahead finds none of that read in the cache. This window starts
at the document's start while the code before the cursor fits its room, else at an anchor: the
start of a document line whose number is a multiple of `ANCHOR_LINES`, the earliest one from
which the code before the cursor fits. As the cursor moves down it keeps that start until the
window is full, then moves on by `ANCHOR_LINES` lines: a keystroke below the read point
extends what the cache holds instead of replacing it, and one above it finds the start of
the read there while no earlier anchor comes within reach. The window then holds between the
room less `ANCHOR_LINES` lines and the room (bench/README.md, bench_prompt_reuse).

Where no anchor's window fits (a few very long lines), the window is the last tokens before
the cursor, cut in coarse steps: the room is kept whatever the text.
"""

from __future__ import annotations

from collections.abc import Callable

ANCHOR_LINES = 32
# Text further back than this many characters per token of room is never tokenized (a token
# of code is about 4 characters): the work per keystroke stays bounded in a huge document.
MAX_CHARS_PER_TOKEN = 8


def anchored_prefix(
    prefix: str, first_line: int, room: int, tokenize: Callable[[str], list[int]]
) -> list[int]:
    """The tokens of the end of `prefix` within `room`, from the document's start or an anchor.

    `first_line`: the document line `prefix` starts on (0: it starts the document; a prefix
    cut out of a longer document starts at a line start). Assumes that more text does not
    tokenize to fewer tokens, as holds for the tokenizers of code models."""
    if room <= 0:
        return []
    earliest = max(0, len(prefix) - room * MAX_CHARS_PER_TOKEN)
    if first_line == 0 and earliest == 0:
        whole = tokenize(prefix)
        if len(whole) <= room:
            return whole
    anchors = _anchor_offsets(prefix, first_line, earliest)
    fitting: list[int] | None = None
    low, high = 0, len(anchors)
    while low < high:  # the earliest anchor whose window fits
        middle = (low + high) // 2
        tokens = tokenize(prefix[anchors[middle] :])
        if len(tokens) <= room:
            fitting, high = tokens, middle
        else:
            low = middle + 1
    if fitting is not None:
        return fitting
    nearest = anchors[-1] if anchors else earliest
    return keep_tail(tokenize(prefix[nearest:]), room)


def _anchor_offsets(prefix: str, first_line: int, earliest: int) -> list[int]:
    """Offsets in `prefix` of the starts of its lines numbered a multiple of `ANCHOR_LINES` in
    the document, at or after `earliest`; the document's own start is not one."""
    start = prefix.find("\n", earliest - 1) + 1 if earliest else 0
    if earliest and not start:
        return []  # no line starts that late
    line = first_line + prefix.count("\n", 0, start)
    offsets: list[int] = []
    while True:
        if line % ANCHOR_LINES == 0 and line > 0:
            offsets.append(start)
        start = prefix.find("\n", start) + 1
        if not start:
            return offsets
        line += 1


def keep_tail(tokens: list[int], budget: int) -> list[int]:
    """The end of `tokens` within `budget`, cut at multiples of a quarter budget: the start
    stays fixed while the user types at the end."""
    if len(tokens) <= budget:
        return tokens
    step = max(1, budget // 4)
    excess = len(tokens) - budget
    cut = -(-excess // step) * step
    return tokens[cut:]
