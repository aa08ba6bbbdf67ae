"""The editable region: the whole lines around the cursor a model may rewrite.

Mercury's guidance is 10 to 15 lines, about 25 at most: a region much larger costs output
tokens (the model writes it out whole) and invites edits far from where the person works.
The sizes are settings of this module so the benchmark can choose them
(`bench/bench_next_edit.py`).
"""

from __future__ import annotations

# Lines before and after the cursor's line: 13 lines in all. On bench_next_edit's 40 real edit
# sequences, 4+8 holds the next edit in 77.5 % of them for a median 427 characters the model
# writes out; 2+5 holds 57.5 % (298), 6+12 90 % (592), 8+16 all (778) (bench/README.md).
REGION_LINES_BEFORE = 4
REGION_LINES_AFTER = 8
# Lines of the file around the region that a prompt shows as context (the current file's
# content is sent whole when it is shorter).
CONTEXT_LINES = 150
# The local model's: none, it sees the region and the history. A CPU reads every line it is
# shown (about 60 tokens a second on one busy core), and a 0.5B model copies code from the
# context into the region. On bench_next_edit's first 10 edit and 10 nothing-to-do tasks
# Qwen2.5-Coder 0.5B scored, with 16 lines, 4 and none: edit similarity 55.6, 57.5 and 59.2,
# false edits 3, 3 and 2 of 10, and read a median 230 tokens fewer with none (bench/README.md,
# "Next-edit quality"). For the same reasons it reads no recently viewed snippets either: the
# shipped presets take no context beyond the file (`context_tokens` 0, where bench_quality found
# it no help), and the 1024 tokens a remote prompt may carry would take the 0.5B 8 s to read on
# two free cores (about 130 tokens a second, bench/README.md, "A local next edit inside
# `local.deadline_ms`?").
LOCAL_CONTEXT_LINES = 0
_GUESSED_LINE_CHARS = 64  # the first stretch searched for line breaks, per line


def editable_region(
    text: str,
    cursor: int,
    *,
    lines_before: int = REGION_LINES_BEFORE,
    lines_after: int = REGION_LINES_AFTER,
) -> tuple[int, int]:
    """(start, end) offsets of the region: from the start of the line `lines_before` above the
    cursor's to the end of the line `lines_after` below it, before its line break."""
    start = _line_start(text, cursor)
    for _ in range(lines_before):
        if start == 0:
            break
        start = _line_start(text, start - 1)
    end = _line_end(text, cursor)
    for _ in range(lines_after):
        end = _next_line_end(text, end)
    return start, end


def context_window(
    text: str, region: tuple[int, int], lines: int = CONTEXT_LINES
) -> tuple[int, int]:
    """(start, end) of `lines` whole lines before and after `region`.

    The line breaks are counted and split in C, in a stretch of text that doubles until it
    holds them all: a line at a time in Python, 150 lines each way took a tenth of a
    millisecond, twice a next edit (its privacy and its prompt)."""
    start, end = region
    if lines <= 0:
        return start, end
    return _start_lines_above(text, start, lines), _end_lines_below(text, end, lines)


def _start_lines_above(text: str, start: int, lines: int) -> int:
    """Where `_line_start(text, start - 1)`, taken `lines` times, arrives: just after the
    `lines`-th line break before `start - 1`, or the text's start."""
    if start <= 0:
        return 0
    stop = start - 1
    width = _GUESSED_LINE_CHARS * lines
    while True:
        low = max(0, stop - width)
        if text.count("\n", low, stop) >= lines:
            before = text[low:stop].rsplit("\n", lines)[0]
            return low + len(before) + 1
        if low == 0:
            return 0
        width *= 2


def _end_lines_below(text: str, end: int, lines: int) -> int:
    """Where `_next_line_end(text, end)`, taken `lines` times, arrives: the end of the line
    that the `lines + 1`-th line break from `end` ends; with fewer, the text's end (or `end`
    itself with none)."""
    width = _GUESSED_LINE_CHARS * (lines + 1)
    while True:
        high = min(len(text), end + width)
        if text.count("\n", end, high) > lines:
            after = text[end:high].split("\n", lines + 1)[-1]
            newline = high - len(after) - 1
            return newline - 1 if newline > 0 and text[newline - 1] == "\r" else newline
        if high == len(text):
            return len(text) if text.find("\n", end) >= 0 else end
        width *= 2


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _next_line_end(text: str, end: int) -> int:
    """The end of the line after the one that ends at `end` (`end` itself on the last line)."""
    newline = text.find("\n", end)
    return end if newline < 0 else _line_end(text, newline + 1)


def _line_end(text: str, offset: int) -> int:
    end = text.find("\n", offset)
    if end < 0:
        return len(text)
    return end - 1 if end > 0 and text[end - 1] == "\r" else end
