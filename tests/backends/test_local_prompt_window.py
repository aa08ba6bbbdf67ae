"""The code before the cursor in a local prompt: from the document's start or an anchor line,
a start that stays put while the cursor moves, and the room kept whatever the text."""

from __future__ import annotations

import pytest

from lsp_server.backends.local.prompt_window import (
    ANCHOR_LINES,
    MAX_CHARS_PER_TOKEN,
    anchored_prefix,
)

pytestmark = pytest.mark.unit

LINE_CHARS = 10  # "v00042 = 1\n" less its line break


class CharTokenizer:
    """One token per character; remembers the longest text it was given."""

    def __init__(self) -> None:
        self.longest = 0

    def __call__(self, text: str) -> list[int]:
        self.longest = max(self.longest, len(text))
        return [ord(c) for c in text]


def document(line_count: int) -> list[str]:
    return [f"v{n:05d} = 1\n" for n in range(line_count)]


def window(lines: list[str], cursor: int, room: int, first_line: int = 0) -> str:
    """The window's text with the cursor at the start of line `cursor`."""
    prefix = "".join(lines[first_line:cursor])
    tokens = anchored_prefix(prefix, first_line, room, CharTokenizer())
    assert len(tokens) <= room
    return "".join(chr(t) for t in tokens)


def start_line(text: str) -> int:
    """The document line a window of `document`'s lines starts with."""
    return int(text[1:6])


def test_a_prefix_that_fits_is_kept_whole() -> None:
    lines = document(20)
    assert window(lines, 20, room=1000) == "".join(lines)


def test_a_longer_prefix_starts_at_the_earliest_anchor_line_that_fits() -> None:
    lines = document(400)
    room = 60 * (LINE_CHARS + 1)
    text = window(lines, 300, room)
    start = start_line(text)
    assert start % ANCHOR_LINES == 0
    assert text == "".join(lines[start:300])
    assert len("".join(lines[start - ANCHOR_LINES : 300])) > room


def test_the_start_stays_put_for_anchor_lines_of_cursor_movement() -> None:
    lines = document(600)
    room = 60 * (LINE_CHARS + 1)
    starts = [start_line(window(lines, cursor, room)) for cursor in range(100, 500)]
    assert starts == sorted(starts)
    runs: dict[int, int] = {}
    for start in starts:
        runs[start] = runs.get(start, 0) + 1
    inner = list(runs.values())[1:-1]  # the first and last runs are cut by the range
    assert inner
    assert all(run == ANCHOR_LINES for run in inner)


def test_a_keystroke_below_the_read_point_extends_the_window() -> None:
    lines = document(600)
    room = 80 * (LINE_CHARS + 1)
    moved = next(
        c for c in range(201, 600) if window(lines, c, room)[:6] != window(lines, c - 1, room)[:6]
    )
    read = window(lines, moved, room)  # read ahead just after the window moved on
    for lines_down in range(1, ANCHOR_LINES):
        assert window(lines, moved + lines_down, room).startswith(read)


def test_a_prefix_cut_out_of_a_longer_document_is_anchored_to_document_lines() -> None:
    lines = document(600)
    room = 60 * (LINE_CHARS + 1)
    for first_line in (0, 37, 150, 203):
        assert window(lines, 260, room, first_line) == window(lines, 260, room)


def test_the_room_holds_in_a_huge_document_and_only_its_end_is_read() -> None:
    prefix = "".join(document(200_000))
    tokenizer = CharTokenizer()
    tokens = anchored_prefix(prefix, 0, 500, tokenizer)
    assert 0 < len(tokens) <= 500
    assert tokenizer.longest <= 500 * MAX_CHARS_PER_TOKEN


@pytest.mark.parametrize("first_line", [0, 7, ANCHOR_LINES])
def test_the_room_holds_for_a_single_huge_line(first_line: int) -> None:
    prefix = "x" * 1_000_000
    tokenizer = CharTokenizer()
    tokens = anchored_prefix(prefix, first_line, 500, tokenizer)
    assert 0 < len(tokens) <= 500
    assert tokenizer.longest <= 500 * MAX_CHARS_PER_TOKEN


def test_lines_too_long_for_any_anchor_leave_the_last_tokens_before_the_cursor() -> None:
    prefix = "".join(f"{n:04d}" + "y" * 300 + "\n" for n in range(100))
    tokens = anchored_prefix(prefix, 0, 200, CharTokenizer())
    assert 0 < len(tokens) <= 200
    assert prefix.endswith("".join(chr(t) for t in tokens))


def test_no_room_leaves_nothing() -> None:
    assert anchored_prefix("a\nb\n", 0, 0, CharTokenizer()) == []
