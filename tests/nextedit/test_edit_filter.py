"""The filter between the model and the screen: what it drops at each eagerness."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lsp_server.config.model import EditEagerness
from lsp_server.nextedit.edit_filter import DISMISSED_FOR_S, MEDIUM_MAX_CHANGED_LINES, EditFilter
from lsp_server.nextedit.history import unified_diff
from lsp_server.nextedit.request import EditRequest, HistoryEdit
from lsp_server.text_edits import OffsetEdit, minimal_edits

pytestmark = pytest.mark.unit

BEFORE = "def scale(value, factor):\n    result = value * factor\n    return result\n"
TEXT = BEFORE.replace("(value", "(amount")  # the user's last edit: the parameter renamed
LEVELS: tuple[EditEagerness, ...] = ("low", "medium", "high")


def asked(text: str = TEXT, cursor: int | None = None, before: str = BEFORE) -> EditRequest:
    history = (HistoryEdit("s.py", "s.py", unified_diff("s.py", before, text)),)
    return EditRequest(
        uri="s.py",
        path="s.py",
        text=text,
        cursor=text.index("amount") + len("amount") if cursor is None else cursor,
        region=(0, len(text) - 1),
        history=history,
    )


def edits_to(request: EditRequest, new_text: str) -> list[OffsetEdit]:
    return minimal_edits(request.text, new_text)


@pytest.mark.parametrize("eagerness", LEVELS)
def test_the_next_use_renamed_is_shown_at_every_level(eagerness: EditEagerness) -> None:
    request = asked()
    edits = edits_to(request, TEXT.replace("= value", "= amount"))
    assert EditFilter().verdict(request, edits, eagerness) is None


@pytest.mark.parametrize("eagerness", LEVELS)
def test_a_whitespace_only_edit_is_dropped(eagerness: EditEagerness) -> None:
    request = asked()
    edits = edits_to(request, TEXT.replace("value * factor", "value  *  factor"))
    assert EditFilter().verdict(request, edits, eagerness) == "whitespace only"


def test_undoing_the_last_edit_is_dropped_unless_eager() -> None:
    request = asked(cursor=len(TEXT) - 1)
    edits = edits_to(request, BEFORE)
    assert EditFilter().verdict(request, edits, "medium") == "undoes the last edit"
    assert EditFilter().verdict(request, edits, "high") is None


def test_rewriting_the_line_being_typed_is_ghost_texts_job() -> None:
    request = asked()  # the cursor on the signature the user just changed
    edits = edits_to(request, TEXT.replace("factor):", "factor: float):"))
    assert EditFilter().verdict(request, edits, "medium") == "rewrites what is being typed"
    elsewhere = asked(cursor=TEXT.index("return"))
    assert EditFilter().verdict(elsewhere, edits, "medium") is None


def test_an_edit_dismissed_here_is_not_shown_again_for_a_minute() -> None:
    now = [100.0]
    screen = EditFilter(clock=lambda: now[0])
    request = asked()
    edits = edits_to(request, TEXT.replace("= value", "= amount"))
    (edit,) = edits
    screen.dismissed("s.py", TEXT[edit.start : edit.end], edit.text)
    assert screen.verdict(request, edits, "high") == "dismissed here a moment ago"
    assert screen.verdict(replace(request, uri="t.py", path="t.py"), edits, "high") is None
    now[0] += DISMISSED_FOR_S + 1
    assert screen.verdict(request, edits, "high") is None


def test_low_eagerness_shows_only_small_edits_near_the_cursor() -> None:
    lines = [f"x{i} = {i}" for i in range(20)]
    text = "\n".join(lines) + "\n"
    request = asked(text, cursor=0, before=text.replace("x0 = 0", "x0 = 9"))
    far = edits_to(request, text.replace("x15 = 15", "x15 = 16"))
    near = edits_to(request, text.replace("x2 = 2", "x2 = 3"))
    assert EditFilter().verdict(request, far, "low") == "far from the cursor or large"
    assert EditFilter().verdict(request, far, "medium") is None
    assert EditFilter().verdict(request, near, "low") is None


def test_medium_eagerness_drops_an_edit_that_rewrites_much_of_the_region() -> None:
    lines = [f"x{i} = {i}" for i in range(20)]
    text = "\n".join(lines) + "\n"
    request = asked(text, cursor=0, before=text.replace("x0 = 0", "x0 = 9"))
    rewritten = text
    for i in range(4, 4 + MEDIUM_MAX_CHANGED_LINES + 1):
        rewritten = rewritten.replace(f"x{i} = {i}\n", f"x{i} = {i + 1}\n")
    large = edits_to(request, rewritten)
    assert EditFilter().verdict(request, large, "medium") == "rewrites much of the region"
    assert EditFilter().verdict(request, large, "high") is None
    fewer = rewritten.replace("x4 = 5\n", "x4 = 4\n")
    assert EditFilter().verdict(request, edits_to(request, fewer), "medium") is None
