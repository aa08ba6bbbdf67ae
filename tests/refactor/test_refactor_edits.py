"""From a model's answer to minimal offset edits: extraction, indentation, validation, diff."""

from __future__ import annotations

import difflib
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsp_server.refactor.edits import (
    OffsetEdit,
    RefactorOutputError,
    apply_edits,
    extract_code,
    minimal_edits,
    plan_refactor_edit,
    reindent,
    validate,
)
from lsp_server.text_edits import _changed_blocks

pytestmark = pytest.mark.unit

# --- extract_code -------------------------------------------------------------------------


def test_fenced_block_with_matching_language_wins_over_a_larger_other_block() -> None:
    answer = (
        "Run this first:\n```bash\npip install something-with-a-long-name && echo done\n```\n"
        "Then:\n```python\nx = 1\n```\n"
    )
    assert extract_code(answer, "python") == "x = 1"


def test_language_aliases_match() -> None:
    answer = "```sh\nls -la /tmp && cat file\n```\n```py\nx = 1\n```"
    assert extract_code(answer, "python") == "x = 1"


def test_largest_block_when_no_tag_matches() -> None:
    answer = "```\na = 1\n```\nor\n```\nb = 1\nc = 2\n```\n"
    assert extract_code(answer, "python") == "b = 1\nc = 2"


def test_prose_around_a_fenced_block_is_dropped() -> None:
    answer = (
        "Here is the refactored code:\n\n```python\ndef f(x):\n    return x * 2\n```\n\n"
        "This version avoids the loop."
    )
    assert extract_code(answer, "python") == "def f(x):\n    return x * 2"


def test_indentation_inside_a_block_is_kept() -> None:
    answer = "```python\n    if x:\n        y()\n```"
    assert extract_code(answer, "python") == "    if x:\n        y()"


def test_unterminated_fence_runs_to_the_end() -> None:
    answer = "Sure:\n```python\ndef f():\n    return 1\n"
    assert extract_code(answer, "python") == "def f():\n    return 1"


def test_tilde_fences_and_longer_backtick_fences() -> None:
    assert extract_code("~~~python\nx = 1\n~~~", "python") == "x = 1"
    assert extract_code("````\ns = '```'\n````", "python") == "s = '```'"


def test_answer_without_fences_loses_its_prose_lines() -> None:
    answer = (
        "Here is the refactored code:\n\nresult = compute(a, b)\nreturn result\n\nHope this helps!"
    )
    assert extract_code(answer, "python") == "result = compute(a, b)\nreturn result"


def test_code_alone_is_taken_as_it_is() -> None:
    assert extract_code("  return x + 1\n", "python") == "  return x + 1"


def test_crlf_answer_is_read_as_lines() -> None:
    assert extract_code("```python\r\na = 1\r\nb = 2\r\n```\r\n", "python") == "a = 1\nb = 2"


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("", "is empty"),
        ("   \n", "is empty"),
        ("I cannot refactor this code without more context.", "contains no code"),
        ("```python\n```", "empty code block"),
    ],
)
def test_nothing_code_like_is_an_error(answer: str, reason: str) -> None:
    with pytest.raises(RefactorOutputError, match=reason):
        extract_code(answer, "python")


# --- reindent ----------------------------------------------------------------------------


def test_nested_method_body_is_reindented_to_the_selection() -> None:
    selection = "        value = self.load()\n        return value\n"
    code = "value = self.load()\nif value is None:\n    raise LookupError\nreturn value"
    assert reindent(code, selection) == (
        "        value = self.load()\n"
        "        if value is None:\n"
        "            raise LookupError\n"
        "        return value\n"
    )


def test_model_indentation_is_removed_before_reindenting() -> None:
    selection = "    def a(self):\n        pass\n"
    code = "        def a(self) -> None:\n            pass"
    assert reindent(code, selection) == "    def a(self) -> None:\n        pass\n"


def test_no_trailing_newline_when_the_selection_has_none() -> None:
    assert reindent("y = 2\n", "x = 1", line_prefix="    ") == "y = 2"


def test_selection_starting_mid_line_does_not_indent_the_first_line() -> None:
    selection = "compute(a,\n            b)"
    code = "compute(\n    a,\n    b,\n)"
    result = reindent(code, selection, line_prefix="        total = ")
    assert result == "compute(\n            a,\n            b,\n        )"


def test_selection_after_leading_whitespace_keeps_that_whitespace_once() -> None:
    selection = "x = 1\n        y = 2\n"
    assert reindent("x = 10\ny = 20", selection, line_prefix="        ") == (
        "x = 10\n        y = 20\n"
    )


def test_insertion_at_an_indented_cursor_indents_the_following_lines() -> None:
    assert reindent("if a:\n    b()", "", line_prefix="    ") == "if a:\n        b()"


def test_crlf_selection_gives_crlf_code() -> None:
    selection = "    a = 1\r\n    b = 2\r\n"
    assert reindent("a = 1\nb = 3\n", selection) == "    a = 1\r\n    b = 3\r\n"


def test_blank_lines_carry_no_indentation() -> None:
    assert reindent("a()\n\nb()", "    x\n") == "    a()\n\n    b()\n"


# --- validate ----------------------------------------------------------------------------


def test_invalid_python_is_refused_with_the_line() -> None:
    with pytest.raises(RefactorOutputError) as caught:
        validate("def f():\n    return (1\n\nx = 2\n", "python")
    message = str(caught.value)
    assert message.startswith("the model's answer is not valid Python: ")
    assert "at line 2" in message


def test_valid_python_and_other_languages_pass() -> None:
    validate("def f():\n    return 1\n", "python")
    validate("function f( {", "javascript")


# --- minimal_edits and apply_edits -----------------------------------------------------


def _big_document() -> str:
    return "".join(f"def function_{n}(value):\n    return value + {n}\n\n" for n in range(500))


def test_one_word_change_in_a_big_document_is_one_small_edit() -> None:
    old = _big_document()
    new = old.replace("def function_250(value)", "def function_250(amount)")
    edits = minimal_edits(old, new)
    assert len(edits) == 1
    (edit,) = edits
    assert old.count("\n", 0, edit.start) == old.count("\n", 0, edit.end) == 750
    assert len(edit.text) <= len("amount")
    assert apply_edits(old, edits) == new


def test_separate_changes_give_separate_sorted_edits() -> None:
    old = _big_document()
    new = old.replace("return value + 10\n", "return value - 10\n").replace(
        "return value + 400\n", "return value * 400\n"
    )
    edits = minimal_edits(old, new)
    assert [edit.text for edit in edits] == ["-", "*"]
    assert edits[0].end < edits[1].start
    assert apply_edits(old, edits) == new


def test_edit_after_an_emoji_is_in_str_offsets() -> None:
    old = 'label = "😀 ok"\nvalue = 1\n'
    new = 'label = "😀 fine"\nvalue = 1\n'
    (edit,) = minimal_edits(old, new)
    assert edit == OffsetEdit(11, 13, "fine")
    assert apply_edits(old, [edit]) == new


def test_crlf_line_endings_are_never_split() -> None:
    old = "a\r\nb\r\n"
    new = "a\nb\r\n"
    edits = minimal_edits(old, new)
    for edit in edits:
        for offset in (edit.start, edit.end):
            assert old[offset - 1 : offset + 1] != "\r\n"
    assert apply_edits(old, edits) == new


def test_identical_texts_need_no_edits() -> None:
    assert minimal_edits("same\n", "same\n") == []


def test_apply_edits_refuses_overlaps() -> None:
    edits = [OffsetEdit(0, 3, "x"), OffsetEdit(2, 4, "y")]
    with pytest.raises(ValueError, match="overlapping"):
        apply_edits("abcdef", edits)


_pieces = st.sampled_from(["a", "b", " ", "\n", "\r\n", "\r", "😀", "é", "def ", "    ", "\t"])
_texts = st.lists(_pieces, max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(old=_texts, new=_texts)
def test_applying_minimal_edits_reproduces_the_new_text(old: str, new: str) -> None:
    edits = minimal_edits(old, new)
    assert apply_edits(old, edits) == new
    offsets = [(e.start, e.end) for e in edits]
    assert all(start <= end for start, end in offsets)
    assert all(a[1] <= b[0] for a, b in pairwise(offsets))
    boundaries = [offset for pair in offsets for offset in pair]
    assert not any(old[offset - 1 : offset + 1] == "\r\n" for offset in boundaries if offset)


_line_lists = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "d\n", "e"]), max_size=8)


@settings(max_examples=300, deadline=None)
@given(old=_line_lists, new=_line_lists)
def test_the_changed_line_blocks_are_the_ones_difflib_finds(old: list[str], new: list[str]) -> None:
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    expected = [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]
    assert _changed_blocks(old, new) == expected


@settings(max_examples=100, deadline=None)
@given(old=_texts, data=st.data())
def test_small_changes_to_a_text_round_trip(old: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(old)))
    end = data.draw(st.integers(start, len(old)))
    new = old[:start] + data.draw(_texts) + old[end:]
    assert apply_edits(old, minimal_edits(old, new)) == new


# --- plan_refactor_edit ----------------------------------------------------------------

_DOCUMENT = """import math


class Circle:
    def __init__(self, radius):
        self.radius = radius

    def area(self):
        result = math.pi * self.radius * self.radius
        return result

    def describe(self):
        return f"circle of radius {self.radius}"
"""


def _selection(document: str, first: str, last: str) -> tuple[int, int]:
    start = document.index(first)
    start = document.rfind("\n", 0, start) + 1
    end = document.index(last) + len(last) + 1
    return start, end


def test_plan_replaces_only_the_selected_method_body() -> None:
    start, end = _selection(_DOCUMENT, "result = math.pi", "return result")
    answer = "Here you go:\n```python\nreturn math.pi * self.radius**2\n```\n"
    edits = plan_refactor_edit(_DOCUMENT, start, end, answer, "python")
    new = apply_edits(_DOCUMENT, edits)
    assert "    def area(self):\n        return math.pi * self.radius**2\n\n    def describe" in new
    assert all(8 <= _DOCUMENT.count("\n", 0, e.start) <= 9 for e in edits)
    assert sum(len(e.text) for e in edits) < len("        return math.pi * self.radius**2\n")


def test_plan_keeps_crlf_documents_crlf() -> None:
    document = _DOCUMENT.replace("\n", "\r\n")
    start, end = _selection(document, "result = math.pi", "return result\r")
    answer = "```python\nvalue = math.pi * self.radius ** 2\nreturn value\n```"
    new = apply_edits(document, plan_refactor_edit(document, start, end, answer, "python"))
    assert "\n" not in new.replace("\r\n", "")
    assert "        value = math.pi * self.radius ** 2\r\n        return value\r\n" in new


def test_plan_refuses_an_answer_that_breaks_python() -> None:
    start, end = _selection(_DOCUMENT, "result = math.pi", "return result")
    with pytest.raises(RefactorOutputError, match="not valid Python"):
        plan_refactor_edit(_DOCUMENT, start, end, "```python\nreturn (1 +\n```", "python")


def test_plan_does_not_blame_the_model_for_a_document_that_was_already_broken() -> None:
    document = _DOCUMENT + "def broken(:\n"
    start, end = _selection(document, "result = math.pi", "return result")
    edits = plan_refactor_edit(document, start, end, "```python\nreturn 1\n```", "python")
    assert "        return 1\n" in apply_edits(document, edits)


def test_plan_of_an_unchanged_answer_is_no_edit() -> None:
    start, end = _selection(_DOCUMENT, "result = math.pi", "return result")
    answer = f"```python\n{_DOCUMENT[start:end]}```"
    assert plan_refactor_edit(_DOCUMENT, start, end, answer, "python") == []


def test_plan_of_an_expression_selected_mid_line() -> None:
    start = _DOCUMENT.index("math.pi * self.radius * self.radius")
    end = start + len("math.pi * self.radius * self.radius")
    edits = plan_refactor_edit(
        _DOCUMENT, start, end, "```python\nmath.pi * self.radius ** 2\n```", "python"
    )
    new = apply_edits(_DOCUMENT, edits)
    assert "        result = math.pi * self.radius ** 2\n" in new
