"""The local model's text for an editor: the indentation the prompt leaves out and takes off
again, text typed since the last prompt as the start of the middle, and the time after which a
suggestion ends at its next line break."""

from __future__ import annotations

import time

import pytest

from lsp_server.backends.base import CompletionRequest, ContextChunk
from lsp_server.backends.local.completion_text import (
    LeadingBlanks,
    LineTime,
    MiddleAnchor,
    indent_to_heal,
    more_lines_seconds,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("prefix", "single_line", "healed"),
    [
        ("def f():\n        ", False, "        "),
        ("def f():\n\t", False, "\t"),
        ("    ", False, "    "),  # the document's first line
        ("def f():\n    x", False, ""),  # a word before the cursor
        ("def f():\n", False, ""),  # nothing to heal
        ("def f():\n    ", True, ""),  # finishing a line: its text after the cursor stays
    ],
)
def test_only_a_line_of_blanks_before_the_cursor_is_healed(
    prefix: str, single_line: bool, healed: str
) -> None:
    request = CompletionRequest(prefix=prefix, suffix="", single_line=single_line)
    assert indent_to_heal(request) == healed


def test_the_indentation_comes_off_even_split_over_pieces() -> None:
    blanks = LeadingBlanks(8)
    assert [blanks.drop(p) for p in ("    ", "  ", "    return x", "    y")] == [
        "",
        "",
        "  return x",  # the model went deeper than the line: the extra stays
        "    y",
    ]


def test_less_indentation_than_the_line_takes_nothing_else() -> None:
    blanks = LeadingBlanks(8)
    assert blanks.drop("  return x") == "return x"
    assert blanks.drop("  later") == "  later"
    assert LeadingBlanks(4).drop("\n    x") == "\n    x"
    assert LeadingBlanks(0).drop("  x") == "  x"


def test_a_suggestion_ends_at_its_first_line_break_once_its_time_is_up() -> None:
    now = LineTime(0.0)
    assert now.feed("\n") == ("\n", False)  # a blank line first ends nothing
    assert now.feed("    x = 1") == ("    x = 1", False)
    assert now.feed(")\n    y = 2\n") == (")", True)


def test_a_later_line_not_complete_in_time_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    lines = LineTime(0.75)
    assert lines.feed("x = 1\n    y") == ("x = 1", False)  # the first line, within its time
    clock[0] += 0.5
    assert lines.feed(" = 2\n    z") == ("\n    y = 2", False)  # a second line, complete
    clock[0] += 0.5
    assert lines.feed(" = long_call(") == ("", True)  # the third, begun too late: left out
    assert lines.rest() == ""


def test_before_its_time_a_suggestion_keeps_its_lines() -> None:
    later = LineTime(60.0)
    assert later.feed("x = 1\n") == ("x = 1", False)
    assert later.feed("y = 2\n") == ("\ny = 2", False)  # each later line once complete
    assert later.rest() == "\n"  # the generation ended: what is held is sent
    never = LineTime(None)
    assert never.feed("x = 1\ny = 2\n") == ("x = 1\ny = 2\n", False)


def anchored(prefix: str = "def f(a):\n    ", suffix: str = "\n\nf(1)\n") -> MiddleAnchor:
    return MiddleAnchor(prefix, suffix, (), (1, 2, 3))


def test_text_typed_at_the_cursor_continues_the_middle() -> None:
    anchor = anchored(prefix="def f(a):\n")
    request = CompletionRequest(prefix="def f(a):\n    ret", suffix="\n\nf(1)\n")
    assert anchor.typed_since(request) == "    ret"


@pytest.mark.parametrize(
    "request_",
    [
        CompletionRequest(prefix="def f(a):\n    ret", suffix="\nf(2)\n"),  # the suffix changed
        CompletionRequest(prefix="def g(a):\n    ret", suffix="\n\nf(1)\n"),  # an edit above
        CompletionRequest(prefix="def f(a):\n    x\n    ", suffix="\n\nf(1)\n"),  # a new line
        CompletionRequest(prefix="def f(a):\n      ", suffix="\n\nf(1)\n"),  # blanks only
        CompletionRequest(prefix="def f(a):\n    " + "x" * 201, suffix="\n\nf(1)\n"),  # long
        CompletionRequest(
            prefix="def f(a):\n    r",
            suffix="\n\nf(1)\n",
            context=(ContextChunk("other.py", "x = 1\n"),),  # other context
        ),
    ],
)
def test_anything_else_changed_makes_a_new_prompt(request_: CompletionRequest) -> None:
    assert anchored().typed_since(request_) is None


def test_more_lines_for_half_the_deadline_and_at_most_three_quarters_of_a_second() -> None:
    assert more_lines_seconds(1000) == 0.5
    assert more_lines_seconds(1500) == 0.75
    assert more_lines_seconds(60_000) == 0.75
