"""A rewritten region ends where it copies the rest of the region (`rejoin`): the rest is
the region's own, and an answer that has not changed and rejoined is never cut."""

from __future__ import annotations

import pytest

from lsp_server.backends.local.rejoin import rest_of_answer
from lsp_server.nextedit.chat_format import read_chat_answer

pytestmark = pytest.mark.unit

REGION = "\n".join(
    [
        "def scale(amount, factor):",
        "    result = value * factor",
        "    log(result)",
        "    check(result)",
        "    return result",
        "",
        "def area(r):",
        "    return r * r",
    ]
)


def completed(written: str, region: str = REGION) -> str | None:
    rest = rest_of_answer(written, region)
    return None if rest is None else read_chat_answer(written + rest)


def test_a_line_changed_then_two_copied_ends_with_the_rest_of_the_region() -> None:
    written = "```python\n" + REGION.replace("value", "amount").split("    return")[0]
    assert completed(written) == REGION.replace("value", "amount")


def test_the_line_under_way_is_completed_from_the_region() -> None:
    written = "```python\n" + REGION.replace("value", "amount").split("return")[0]
    assert written.endswith("\n    ")  # the next line's indent came with the line break
    assert completed(written) == REGION.replace("value", "amount")


def test_a_line_added_or_removed_rejoins_where_the_copy_resumes() -> None:
    added = REGION.replace("factor):\n", "factor):\n    amount = abs(amount)\n")
    assert completed("```python\n" + added.split("    check")[0]) == added
    removed = REGION.replace("    log(result)\n", "")
    assert completed("```python\n" + removed.split("\ndef area")[0]) == removed


@pytest.mark.parametrize(
    "written",
    [
        "```python\n" + REGION.split("    return")[0],  # a copy so far: a change may come below
        "```python\n" + REGION.replace("value", "amount").split("    log")[0],  # one line after
        "def scale(amount, factor):\n    result = amount * factor\n    log(result)\n",  # no fence
    ],
)
def test_an_answer_that_has_not_changed_and_rejoined_goes_on(written: str) -> None:
    assert rest_of_answer(written, REGION) is None


def test_lines_found_twice_below_the_change_do_not_end_it() -> None:
    region = "a = 1\nx = 0\ny = 0\nz = 2\nx = 0\ny = 0\nw = 3"
    assert rest_of_answer("```\na = 5\nx = 0\ny = 0\n", region) is None
    assert completed("```\na = 5\nx = 0\ny = 0\nz = 2\n", region) == region.replace("1", "5")


def test_a_rejoin_at_the_regions_end_is_left_to_the_model() -> None:
    written = "```python\n" + REGION.replace("r * r", "r ** 2").rsplit("\n", 1)[0] + "\n"
    assert rest_of_answer(written.replace("r ** 2", "r * r"), REGION) is None
    region = "a = 1\nb = 2\nc = 3"
    assert rest_of_answer("```\na = 5\nb = 2\nc = 3\n", region) is None


def test_an_echoed_region_marker_and_crlf_lines_are_kept_as_the_region_has_them() -> None:
    region = REGION.replace("\n", "\r\n")
    written = (
        "```python\n<|editable_region_start|>\n"
        + REGION.replace("value", "amount").split("    return")[0]
    )
    rest = rest_of_answer(written, region)
    assert rest is not None and rest.startswith("    return result\r\n\r\ndef area(r):\r\n")
