"""The context window around an editable region (whole lines, broken at `\\n`, a `\\r` before
one belonging to its line), checked against its definition: a line at a time."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lsp_server.nextedit.region import context_window

pytestmark = pytest.mark.unit


def window_a_line_at_a_time(text: str, region: tuple[int, int], lines: int) -> tuple[int, int]:
    start, end = region
    for _ in range(lines):
        if start == 0:
            break
        start = text.rfind("\n", 0, start - 1) + 1
    for _ in range(lines):
        newline = text.find("\n", end)
        if newline < 0:
            break
        following = text.find("\n", newline + 1)
        end = len(text) if following < 0 else following
        if following > 0 and text[following - 1] == "\r":
            end = following - 1
    return start, end


LINE = st.text(alphabet="ab\r", max_size=200).map(lambda line: line + "\n")


@given(
    lines_of_text=st.lists(LINE, max_size=60),
    tail=st.text(alphabet="ab\r", max_size=5),
    bounds=st.tuples(st.floats(0, 1), st.floats(0, 1)),
    lines=st.integers(0, 80),
)
def test_the_window_is_the_lines_counted_one_at_a_time(
    lines_of_text: list[str], tail: str, bounds: tuple[float, float], lines: int
) -> None:
    text = "".join(lines_of_text) + tail
    start, end = sorted(int(bound * len(text)) for bound in bounds)
    assert context_window(text, (start, end), lines) == window_a_line_at_a_time(
        text, (start, end), lines
    )


def test_a_window_of_a_file_with_long_lines_reaches_past_the_first_guess() -> None:
    text = "".join(f"{'x' * 500}{i}\n" for i in range(400))
    region = (text.index("x" * 500 + "200\n"), text.index("\n", text.index("x" * 500 + "205")))
    start, end = context_window(text, region, 150)
    assert text[start:].startswith("x" * 500 + "50\n")
    assert text[:end].endswith("x" * 500 + "355")
