"""Each `edit_format`'s prompt and the reading of its answer, on one request."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lsp_server.backends.base import ContextChunk
from lsp_server.config.model import EndpointConfig
from lsp_server.nextedit import chat_format, sweep_format, zeta2_format, zeta_format
from lsp_server.nextedit.edits import OutsideTheRegion, region_edits
from lsp_server.nextedit.history import EditHistory, _common_prefix, _common_suffix, unified_diff
from lsp_server.nextedit.mercury_format import mercury_prompt, parse_mercury_prompt
from lsp_server.nextedit.prompts import edit_call, read_answer
from lsp_server.nextedit.region import LOCAL_CONTEXT_LINES, REGION_LINES_BEFORE, editable_region
from lsp_server.nextedit.request import EditRequest, HistoryEdit

pytestmark = pytest.mark.unit

TEXT = "import os\n\ndef scale(amount, factor):\n    return value * factor\n\nprint(scale(1, 2))\n"
CURSOR = TEXT.index("amount") + len("amount")


def request() -> EditRequest:
    region = editable_region(TEXT, CURSOR, lines_before=0, lines_after=1)
    diff = unified_diff("s.py", TEXT.replace("amount", "value"), TEXT)
    return EditRequest(
        uri="s.py",
        path="s.py",
        text=TEXT,
        cursor=CURSOR,
        region=region,
        history=(HistoryEdit("s.py", "s.py", diff),),
        snippets=(ContextChunk("util.py", "def helper(): ..."),),
    )


def test_the_region_is_whole_lines_around_the_cursor() -> None:
    assert request().region_text == "def scale(amount, factor):\n    return value * factor"


def test_a_mercury_prompt_reads_back_as_the_request_it_was_written_from() -> None:
    asked = request()
    parsed = parse_mercury_prompt(mercury_prompt(asked, (0, len(TEXT))))
    assert parsed.text == asked.text
    assert parsed.region == asked.region and parsed.cursor == asked.cursor
    assert parsed.snippets == asked.snippets
    assert "+def scale(amount, factor):" in parsed.history[0].diff


def test_a_zeta_prompt_reads_back_and_its_answer_is_read_as_zed_reads_it() -> None:
    asked = request()
    prompt = zeta_format.zeta_prompt(asked, (0, len(TEXT)))
    assert prompt.startswith("### Instruction:") and prompt.endswith("### Response:\n")
    assert "User edited s.py:\n```diff\n@@" in prompt  # hunks, as Zed's events carry them
    parsed = zeta_format.parse_zeta_prompt(prompt)
    assert (parsed.text, parsed.region, parsed.cursor) == (asked.text, asked.region, asked.cursor)
    new = "def scale(amount, factor):\n    return amount * factor"
    assert zeta_format.read_zeta_answer(zeta_format.zeta_answer(new)) == new


def test_an_endpoint_hosting_zeta2_is_asked_in_its_form_and_read_back() -> None:
    endpoint = EndpointConfig(
        name="z", kind="llamacpp", base_url="http://h", model="zeta-2", edit_format="zeta2"
    )
    asked = request()
    call = edit_call(asked, endpoint)
    assert call.path == "/v1/completions"
    assert call.prompt is not None and call.prompt.startswith(zeta2_format.FIM_SUFFIX)
    parsed = zeta2_format.parse_zeta2_prompt(call.prompt).request
    assert (parsed.region_text, parsed.path) == (asked.region_text, "s.py")
    assert parsed.cursor - parsed.region[0] == asked.cursor - asked.region[0]
    assert [e.diff for e in parsed.history] == [e.diff for e in asked.history]
    assert [c.text for c in parsed.snippets] == ["def helper(): ..."]
    new = asked.region_text.replace("value", "amount")
    answer = f"{new}\n{zeta2_format.END_MARKER}"
    assert read_answer("zeta2", answer) == new + "\n"
    assert read_answer("zeta2", "NO_EDITS\n>>>>>>> UPDATED\n") is None


@pytest.mark.parametrize(
    "prompt",
    [
        "<[fim-suffix]>\n<[fim-prefix]><filename>a.py\n<[fim-middle]>",
        "<[fim-suffix]>\n<[fim-prefix]><filename>a.py\n<<<<<<< CURRENT\nx<|user_cursor|>\n"
        "<[fim-middle]>",
        "<[fim-suffix]>\n<[fim-prefix]><filename>a.py\n<|marker_2|>x<|user_cursor|>"
        "<|marker_1|>\n<[fim-middle]>",
    ],
)
def test_a_broken_zeta2_prompt_is_refused(prompt: str) -> None:
    with pytest.raises(ValueError):
        zeta2_format.parse_zeta2_prompt(prompt)


def test_sweep_asks_for_the_updated_block_and_stops_at_the_next_file() -> None:
    prompt = sweep_format.sweep_prompt(request(), (0, len(TEXT)))
    assert "<|file_sep|>s.py.diff\noriginal:\n" in prompt
    assert "<|file_sep|>current/s.py:3:4\ndef scale(amount<|cursor|>, factor):" in prompt
    assert prompt.endswith("<|file_sep|>updated/s.py:3:4\n")
    answer = "def scale(amount, factor):\n    return amount * factor\n<|file_sep|>junk"
    assert sweep_format.read_sweep_answer(answer) == answer.split("\n<|file_sep|>")[0]


def test_a_chat_answer_without_a_fence_is_malformed() -> None:
    with pytest.raises(ValueError):
        chat_format.read_chat_answer("def scale(amount, factor): ...")


def test_edits_stay_inside_the_region_or_the_answer_is_dropped() -> None:
    asked = request()
    renamed = "def scale(amount, factor):\n    return amount * factor"
    (edit,) = region_edits(asked, renamed)
    assert TEXT[edit.start : edit.end] == "value" and edit.text == "amount"
    assert region_edits(asked, asked.region_text) == []
    # The end marker on a line of its own after a blank one: the same edit, no line added.
    assert region_edits(asked, renamed + "\n\n") == [edit]
    with pytest.raises(OutsideTheRegion):
        region_edits(asked, "\n" + renamed + "\n\nprint(scale(1, 2))")


def test_keystrokes_on_one_line_are_one_edit_and_the_history_is_bounded() -> None:
    now = [0.0]
    history = EditHistory(clock=lambda: now[0])
    history.opened("a", "x = 1\n")
    for typed in ("x = 12\n", "x = 123\n", "x = 1234\n"):
        now[0] += 0.1
        history.changed("a", "a.py", typed, 0)
    (edit,) = history.recent()
    assert "-x = 1\n+x = 1234" in edit.diff
    for step in range(20):  # edits far apart: each one its own, the oldest forgotten
        now[0] += 5
        text = "".join(f"line {i}\n" for i in range(200))
        history.opened(f"d{step}", text)
        history.changed(f"d{step}", f"d{step}.py", text.replace("line 100", "LINE"), 100)
    assert 0 < len(history.recent()) <= 8


def test_a_chat_answer_cut_short_by_the_token_cap_is_malformed() -> None:
    """A fence left open: the model stopped at its cap, and the rest of the region is missing
    from the answer, so applying it would delete that rest."""
    with pytest.raises(ValueError):
        chat_format.read_chat_answer("```python\ndef scale(amount, factor):\n    result =")


def test_the_chat_prompt_marks_the_region_and_not_the_cursor() -> None:
    asked = request()
    _, user = chat_format.chat_messages(asked, (0, len(TEXT)))
    assert f"{chat_format.REGION_START}\ndef scale(amount, factor):\n" in user.content
    assert "<|cursor|>" not in user.content and "cursor" not in chat_format.SYSTEM


def test_a_region_at_the_end_of_the_file_keeps_its_final_line_break() -> None:
    """The region reaches the empty last line of a file that ends with a break; an answer in a
    fence cannot show that line, and leaving it out is no edit."""
    text = "def scale(amount, factor):\n    return value * factor\n"
    asked = EditRequest(
        uri="s.py", path="s.py", text=text, cursor=16, region=editable_region(text, 16)
    )
    assert asked.region_text.endswith("\n")
    assert region_edits(asked, text.rstrip("\n")) == []
    (edit,) = region_edits(asked, text.replace("value", "amount").rstrip("\n"))
    assert (text[edit.start : edit.end], edit.text) == ("value", "amount")


def test_the_local_model_sees_a_shorter_stretch_of_the_file() -> None:
    """A CPU model reads every line it is shown before it writes: the local model's prompt
    holds `LOCAL_CONTEXT_LINES` around the region, a chat endpoint's `CONTEXT_LINES`."""
    text = "".join(f"line_{i} = {i}\n" for i in range(200))
    cursor = text.index("line_100")
    asked = EditRequest(
        uri="s.py", path="s.py", text=text, cursor=cursor, region=editable_region(text, cursor)
    )
    remote = EndpointConfig("chat", "openai", "http://127.0.0.1:1/v1", "m", roles=("edit",))
    far = f"line_{100 - REGION_LINES_BEFORE - LOCAL_CONTEXT_LINES - 1} ="
    near = f"line_{100 - REGION_LINES_BEFORE - LOCAL_CONTEXT_LINES} ="
    local_prompt = edit_call(asked, None).messages[-1].content
    assert near in local_prompt and far not in local_prompt
    assert far in edit_call(asked, remote).messages[-1].content


def test_the_local_model_reads_no_recently_viewed_snippets() -> None:
    """A snippet the context store ranked reaches a chat endpoint's prompt, never the local
    model's: a CPU model reads every token before it writes (`LOCAL_CONTEXT_LINES`)."""
    text = "def scale(amount, factor):\n    return value * factor\n"
    snippet = ContextChunk("units.py", "def convert(value, unit):\n    pass")
    asked = EditRequest(
        uri="s.py",
        path="s.py",
        text=text,
        cursor=16,
        region=editable_region(text, 16),
        snippets=(snippet,),
    )
    remote = EndpointConfig("chat", "openai", "http://127.0.0.1:1/v1", "m", roles=("edit",))
    assert "def convert(value, unit)" in edit_call(asked, remote).messages[-1].content
    assert "def convert(value, unit)" not in edit_call(asked, None).messages[-1].content


@given(st.text("ab\n", max_size=9000), st.data())
def test_the_stretch_a_diff_compares_ends_where_the_texts_first_and_last_differ(
    before: str, data: st.DataObject
) -> None:
    start = data.draw(st.integers(0, len(before)))
    end = data.draw(st.integers(start, len(before)))
    after = before[:start] + data.draw(st.text("abc\n", max_size=20)) + before[end:]
    head = 0
    while head < min(len(before), len(after)) and before[head] == after[head]:
        head += 1
    limit = min(len(before), len(after)) - head
    tail = 0
    while tail < limit and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    assert _common_prefix(before, after) == head
    assert _common_suffix(before, after, limit) == tail
