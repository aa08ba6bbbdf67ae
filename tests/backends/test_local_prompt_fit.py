"""Cutting a prompt the KV cache holds only part of to what a keystroke can read in time: the
read start is kept up to a line break, then the lines just before the cursor."""

from __future__ import annotations

import pytest

from lsp_server.backends.local.keystroke_cost import LONG_LINE_TOKENS, MIN_READ_TOKENS
from lsp_server.backends.local.pace import PLAN_SHARE, Pace
from lsp_server.backends.local.prompt_fit import FimTokens, fit_prompt

pytestmark = pytest.mark.unit

NEWLINE = 10
BOS = [1]
FIM = FimTokens(prefix=2, suffix=3, middle=4)


def lines(count: int, start: int = 100, width: int = 5) -> list[int]:
    """`count` lines of `width` tokens, the last of each a line break; ids from `start` up."""
    tokens: list[int] = []
    for line in range(count):
        tokens += [start + line * width + i for i in range(width - 1)] + [NEWLINE]
    return tokens


def fit(prompt: list[int], cached: int, affordable: int, fim: FimTokens | None) -> list[int]:
    return fit_prompt(
        prompt,
        cached,
        affordable,
        bos=BOS,
        fim=fim,
        line_break_before=lambda index: prompt[index - 1] == NEWLINE,
    )


def test_a_prompt_whose_unread_rest_fits_is_kept_whole() -> None:
    prompt = BOS + lines(40)
    assert fit(prompt, cached=180, affordable=30, fim=None) == prompt


def test_a_plain_prompt_keeps_its_read_lines_and_ends_with_the_lines_before_the_cursor() -> None:
    text = lines(100)
    prompt = BOS + text + [900, 901]  # the cursor's line, begun
    cached = 1 + 5 * 30 + 2  # thirty lines and two tokens into the next one

    fitted = fit(prompt, cached, affordable=23, fim=None)

    assert fitted[: 1 + 5 * 30] == prompt[: 1 + 5 * 30]  # cut back to the line's end
    assert fitted[-2:] == [900, 901]
    tail = fitted[1 + 5 * 30 :]
    assert tail == prompt[-len(tail) :]
    assert 17 <= len(tail) <= 23  # whole lines before the cursor's, within what is affordable


def test_a_plain_prompt_with_nothing_read_is_a_short_window_at_the_cursor() -> None:
    prompt = BOS + lines(100)

    fitted = fit(prompt, cached=0, affordable=40, fim=None)

    assert fitted == BOS + prompt[-40:]


def fim_prompt(before: list[int], after: list[int], typed: tuple[int, ...] = ()) -> list[int]:
    return [*BOS, FIM.prefix, *before, FIM.suffix, *after, FIM.middle, *typed]


def test_a_fim_prompt_read_in_part_keeps_a_little_of_the_suffix_and_its_typed_text() -> None:
    before, after = lines(100), lines(40, start=5000)
    prompt = fim_prompt(before, after, typed=(77, 78))
    cached = 2 + 5 * 50

    fitted = fit(prompt, cached, affordable=44, fim=FIM)

    assert fitted[:cached] == prompt[:cached]
    assert fitted[-3:] == [FIM.middle, 77, 78]
    suffix = fitted[fitted.index(FIM.suffix) + 1 : fitted.index(FIM.middle)]
    assert suffix == after[: len(suffix)] and len(suffix) <= 44 // 4
    before_cursor = fitted[cached : fitted.index(FIM.suffix)]
    assert before_cursor == before[len(before) - len(before_cursor) :]
    assert len(fitted) - cached <= 44


def test_a_fim_prompt_whose_code_before_the_cursor_is_read_cuts_the_suffix_alone() -> None:
    before, after = lines(40), lines(100, start=5000)
    prompt = fim_prompt(before, after)
    cached = 2 + len(before) + 1 + 10  # past the suffix marker, ten tokens into the suffix

    fitted = fit(prompt, cached, affordable=31, fim=FIM)

    assert fitted == [*prompt[: cached + 29], FIM.middle]


def test_a_fim_prompt_with_its_context_unread_starts_again_at_the_prefix_marker() -> None:
    context = [7, *lines(30, start=3000)]  # repository-level context before the prefix marker
    before = lines(100)
    prompt = [*BOS, *context, FIM.prefix, *before, FIM.suffix, *lines(4, start=5000), FIM.middle]

    fitted = fit(prompt, cached=1, affordable=60, fim=FIM)

    assert fitted[:2] == [*BOS, FIM.prefix]
    assert not (set(context) - {NEWLINE}) & set(fitted)
    assert fitted[-1] == FIM.middle and len(fitted) <= 62


def test_the_pace_knows_no_limit_until_it_has_measured_a_read() -> None:
    pace = Pace()
    assert pace.affordable_tokens(1500) is None

    pace.read(150, 1.0)
    idle = pace.affordable_tokens(1500)
    pace.wrote(10, 1.0)  # a slow writer leaves less of the deadline to reading
    assert idle is not None and (pace.affordable_tokens(1500) or 0) < idle
    for _ in range(20):
        pace.read(1, 1.0)  # the machine got busy
    assert pace.affordable_tokens(1500) == MIN_READ_TOKENS


def test_a_keystroke_that_must_cut_its_prompt_leaves_time_for_a_long_line() -> None:
    """Planned around the median line, a cut keystroke's longer lines ran past the deadline
    and showed nothing."""
    pace = Pace(prompt_tps=100.0, generation_tps=20.0)
    affordable = pace.affordable_tokens(1500)
    assert affordable is not None and affordable > MIN_READ_TOKENS
    planned_s = affordable / 100.0 + LONG_LINE_TOKENS / 20.0
    assert planned_s <= 1.5 * PLAN_SHARE
