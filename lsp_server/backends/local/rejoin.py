"""Where a rewritten region rejoins the region it rewrites, so the rest need not be written.

A next edit's answer is the region written out in a fence, a token at a time, and most of it
is a copy. Once the answer has changed a line and then written `REJOIN_LINES` lines that are,
in order, lines of the region after that change (and found there once), the model is copying
the rest: the remaining lines of the region and the closing fence are the answer's end, and
writing them a token at a time (90 to 220 tokens for a 13-line region) is where much of a CPU
model's time went. An answer that has changed nothing yet is never cut (it may change a line
further down), nor one whose next lines cannot be told apart in the region.
"""

from __future__ import annotations

REJOIN_LINES = 2
_FENCES = ("```", "~~~")
_MARKERS = ("<|editable_region_start|>", "<|editable_region_end|>")


def rest_of_answer(answer: str, region: str) -> str | None:
    """What completes `answer` (a fence opened, the region being rewritten) by copying the
    rest of `region` and closing the fence; None while it has not rejoined the region."""
    lines = answer.split("\n")
    opening = lines[0].strip()
    if len(lines) < 2 or not opening.startswith(_FENCES):
        return None
    fence = opening[: len(opening) - len(opening.lstrip(opening[0]))]
    written = [line for line in lines[1:-1] if line.strip() not in _MARKERS]
    partial = lines[-1]
    kept = region.split("\n")  # as written, a "\r" and all
    old = [line.rstrip("\r") for line in kept]
    changed = next((i for i, line in enumerate(written) if i >= len(old) or line != old[i]), None)
    if changed is None or len(written) - REJOIN_LINES < changed:
        return None
    last = written[-REJOIN_LINES:]
    if not any(line.strip() for line in last):
        return None
    places = [
        j for j in range(changed, len(old) - REJOIN_LINES + 1) if old[j : j + REJOIN_LINES] == last
    ]
    if len(places) != 1:
        return None
    remaining = kept[places[0] + REJOIN_LINES :]
    if not remaining:
        return None  # the model is at the region's end: it closes the fence itself
    rest = "\n".join(remaining) + "\n" + fence
    return rest[len(partial) :] if rest.startswith(partial) else None
