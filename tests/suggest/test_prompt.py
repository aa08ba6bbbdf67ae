import pytest
from hypothesis import given
from hypothesis import strategies as st

from lsp_server.backends.base import CompletionRequest
from lsp_server.suggest.prompt import BLOCK_STOP, build_completion_request

pytestmark = pytest.mark.unit


def request_at(text: str, marker: str = "|", *, language: str = "python") -> CompletionRequest:
    offset = text.index(marker)
    document = text[:offset] + text[offset + len(marker) :]
    return build_completion_request(
        document, offset, language=language, path="src/app.py", max_tokens=64
    )


def test_small_document_is_sent_whole_around_the_cursor() -> None:
    request = request_at("def add(a, b):\n    return |\n\nprint(add(1, 2))\n")
    assert request.prefix == "def add(a, b):\n    return "
    assert request.suffix == "\n\nprint(add(1, 2))\n"
    assert request.language == "python"
    assert request.path == "src/app.py"
    assert request.max_tokens == 64


def test_empty_document() -> None:
    request = build_completion_request("", 0, language="python", path="a.py", max_tokens=16)
    assert request.prefix == ""
    assert request.suffix == ""
    assert request.single_line is False
    assert request.stop == (BLOCK_STOP,)


def test_cursor_at_start_and_at_end() -> None:
    text = "import os\nimport sys\n"
    at_start = build_completion_request(text, 0, language="python", path="", max_tokens=8)
    assert (at_start.prefix, at_start.suffix) == ("", text)
    assert at_start.single_line is True  # "import os" follows on the same line
    at_end = build_completion_request(text, len(text), language="python", path="", max_tokens=8)
    assert (at_end.prefix, at_end.suffix) == (text, "")
    assert at_end.single_line is False


def test_offset_outside_the_document_is_refused() -> None:
    with pytest.raises(ValueError):
        build_completion_request("abc", 4, language="", path="", max_tokens=8)
    with pytest.raises(ValueError):
        build_completion_request("abc", -1, language="", path="", max_tokens=8)


def test_prefix_window_starts_at_a_line_start() -> None:
    lines = [f"line_{i:03} = {i}\n" for i in range(200)]
    text = "".join(lines)
    request = build_completion_request(text, len(text), language="python", path="", max_tokens=8)
    assert len(request.prefix) <= 6000
    assert request.prefix.startswith("line_")
    assert request.prefix.endswith("line_199 = 199\n")
    assert (len(text) - len(request.prefix)) % len(lines[0]) == 0


@pytest.mark.parametrize("cursor_line", [0, 5, 150, 299])
def test_the_request_says_which_document_line_its_prefix_starts_on(cursor_line: int) -> None:
    lines = [f"line_{i:03} = {i}  # {'x' * 40}\n" for i in range(300)]  # 6000 chars: 100 lines
    text = "".join(lines)
    offset = len("".join(lines[:cursor_line])) + 4
    request = build_completion_request(text, offset, language="python", path="", max_tokens=8)
    assert lines[request.prefix_line].startswith(request.prefix.partition("\n")[0])
    assert request.prefix_line == cursor_line - request.prefix.count("\n")


def test_prefix_window_keeps_a_line_that_starts_exactly_at_the_window_edge() -> None:
    text = "aaaa\nbbbb\ncccc"
    request = build_completion_request(
        text, len(text), language="", path="", max_tokens=8, prefix_chars=9
    )
    assert request.prefix == "bbbb\ncccc"


def test_suffix_window_ends_at_a_line_end() -> None:
    text = "x = 1\n" + "".join(f"value_{i} = {i}\n" for i in range(500))
    request = build_completion_request(
        text, 0, language="python", path="", max_tokens=8, suffix_chars=100
    )
    assert len(request.suffix) <= 100
    assert request.suffix.endswith("\n")
    assert all(line.startswith(("x = ", "value_")) for line in request.suffix.splitlines())


def test_a_single_line_longer_than_the_window_is_cut_where_it_must() -> None:
    line = "x" * 50
    request = build_completion_request(
        line + line, 50, language="", path="", max_tokens=8, prefix_chars=10, suffix_chars=10
    )
    assert request.prefix == "x" * 10
    assert request.suffix == "x" * 10


def test_mid_line_cursor_asks_for_the_rest_of_the_line_only() -> None:
    request = request_at("result = compute(|)\n")
    assert request.single_line is True
    assert request.stop == ("\n",)


def test_trailing_whitespace_after_the_cursor_does_not_make_it_mid_line() -> None:
    request = request_at("def f():|   \n    pass\n")
    assert request.single_line is False
    assert request.stop == (BLOCK_STOP,)


def test_cursor_in_an_indented_block_gets_only_the_blank_lines_stop() -> None:
    request = request_at("class A:\n    def f(self):\n        |\n")
    assert request.single_line is False
    assert request.stop == (BLOCK_STOP,)


def test_crlf_document_gets_a_crlf_block_stop_too() -> None:
    request = request_at("int main() {\r\n    |\r\n}\r\n", language="c")
    assert request.prefix == "int main() {\r\n    "
    assert request.suffix == "\r\n}\r\n"
    assert request.single_line is False  # the "\r" before "\n" is whitespace
    assert request.stop == (BLOCK_STOP, "\r\n\r\n\r\n")


def test_crlf_window_cuts_keep_whole_lines() -> None:
    text = "".join(f"row{i} = {i}\r\n" for i in range(100))
    offset = text.index("row50")
    request = build_completion_request(
        text, offset, language="python", path="", max_tokens=8, prefix_chars=40, suffix_chars=40
    )
    assert request.prefix.startswith("row")
    assert request.suffix.endswith("\r\n")


def test_non_ascii_text_is_windowed_by_characters() -> None:
    text = "# 日本語のコメント\nname = 'Zoë 🚀'\nprint(|name)\n"
    request = request_at(text)
    assert request.prefix == "# 日本語のコメント\nname = 'Zoë 🚀'\nprint("
    assert request.suffix == "name)\n"
    assert request.single_line is True


@given(st.text(alphabet="ab \n\r\té🚀", max_size=300), st.data())
def test_windows_are_contiguous_around_the_cursor(text: str, data: st.DataObject) -> None:
    offset = data.draw(st.integers(0, len(text)))
    request = build_completion_request(
        text, offset, language="", path="", max_tokens=8, prefix_chars=40, suffix_chars=30
    )
    assert text[:offset].endswith(request.prefix)
    assert text[offset:].startswith(request.suffix)
    assert len(request.prefix) <= 40
    assert len(request.suffix) <= 30
