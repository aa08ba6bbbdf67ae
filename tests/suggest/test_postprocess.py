import pytest
from hypothesis import given
from hypothesis import strategies as st

from lsp_server.backends.base import CompletionRequest
from lsp_server.suggest.postprocess import (
    bracket_depth,
    clean_suggestion,
    remove_echoed_prefix,
    strip_code_fences,
    strip_leading_prose,
    syntax_for,
)
from lsp_server.suggest.prompt import build_completion_request

pytestmark = pytest.mark.unit


def at(text: str, language: str = "python") -> CompletionRequest:
    """A request for the cursor marked with "|" in `text`."""
    offset = text.index("|")
    document = text[:offset] + text[offset + 1 :]
    return build_completion_request(document, offset, language=language, path="file", max_tokens=64)


def accept(text: str, raw: str, language: str = "python") -> str:
    """The document after accepting the cleaned suggestion at "|"."""
    suggestion = clean_suggestion(raw, at(text, language))
    return text.replace("|", suggestion)


# Suffix overlap


def test_closing_paren_already_in_the_document_is_not_repeated() -> None:
    assert clean_suggestion("a, b)", at("foo(|)\n")) == "a, b"


def test_closing_quote_and_paren_are_not_repeated() -> None:
    assert clean_suggestion('hello")', at('print("|")\n')) == "hello"


def test_quoted_arguments_keep_their_inner_quotes() -> None:
    assert accept('f("|")\n', 'a", "b")') == 'f("a", "b")\n'


def test_a_balanced_call_keeps_its_own_closing_paren() -> None:
    assert clean_suggestion("bar()", at("foo(|)\n")) == "bar()"


def test_a_line_closing_past_the_cursor_brackets_stops_at_the_first_close() -> None:
    assert accept("foo(bar(|))\n", "x), y)") == "foo(bar(x))\n"


def test_colon_after_the_parameters_is_not_repeated() -> None:
    assert clean_suggestion("a, b):", at("def f(|):\n    pass\n")) == "a, b"


def test_rest_of_the_line_written_again_is_dropped() -> None:
    assert clean_suggestion("42  # answer", at("x = |  # answer\n")) == "42"


def test_suggestion_that_only_repeats_the_suffix_is_empty() -> None:
    assert clean_suggestion(")", at("foo(|)\n")) == ""


def test_unrelated_text_that_happens_to_share_a_letter_is_kept() -> None:
    assert clean_suggestion("total", at("x = |t\n")) == "total"


def test_next_lines_repeated_at_the_end_are_dropped() -> None:
    text = "def f(a):\n    |\n    return a\n"
    assert clean_suggestion("a += 1\n    return a", at(text)) == "a += 1"


def test_closing_brace_of_the_enclosing_block_is_not_repeated() -> None:
    text = "function f() {\n  |\n}\n"
    assert clean_suggestion("return 1;\n}", at(text, "javascript")) == "return 1;"


def test_closing_brace_past_a_blank_line_is_not_repeated() -> None:
    text = "function f() {\n  |\n\n}\n"
    assert clean_suggestion("return 1;\n}", at(text, "javascript")) == "return 1;"


def test_closing_brace_of_a_block_the_suggestion_opened_is_kept() -> None:
    text = "function f() {\n  |\n}\n"
    raw = "if (x) {\n    y();\n  }"
    assert clean_suggestion(raw, at(text, "javascript")) == raw


# Block boundaries


def test_python_block_ends_where_the_code_dedents() -> None:
    text = "def f(a):\n    |\n\nprint(f(1))\n"
    raw = "b = a * 2\n    return b\n\ndef g():\n    pass\n"
    assert clean_suggestion(raw, at(text)) == "b = a * 2\n    return b"


def test_python_body_after_a_header_ends_at_the_next_sibling() -> None:
    text = "def f(a):|\n"
    raw = "\n    return a + 1\n\ndef g():\n    return 2\n"
    assert clean_suggestion(raw, at(text)) == "\n    return a + 1"


def test_python_nested_blocks_stay_whole() -> None:
    text = "def f(items):\n    |\n"
    raw = "for item in items:\n        if item:\n            yield item\n    return None"
    assert clean_suggestion(raw, at(text)) == raw


def test_python_closing_bracket_line_of_a_call_is_kept() -> None:
    text = "values = dict(|\n"
    raw = "\n    a=1,\n    b=2,\n)\nprint(values)"
    assert clean_suggestion(raw, at(text)) == "\n    a=1,\n    b=2,\n)"


def test_brace_block_ends_when_the_depth_goes_below_zero() -> None:
    text = "int f(void) {\n    |"
    raw = "int x = g();\n    return x;\n}\n\nint h(void) {\n    return 0;\n}"
    assert clean_suggestion(raw, at(text, "c")) == "int x = g();\n    return x;\n}"


def test_brace_block_keeps_the_closers_that_follow() -> None:
    text = "items.forEach(function (item) {\n  |"
    raw = "console.log(item);\n});\nother();"
    assert clean_suggestion(raw, at(text, "javascript")) == "console.log(item);\n});"


def test_brackets_in_strings_and_comments_do_not_count() -> None:
    text = "fn main() {\n    |\n}\n"
    raw = "let s = \"}\";\n    let c = '}'; // }\n    f::<'a>(s)"
    assert clean_suggestion(raw, at(text, "rust")) == raw


def test_python_hash_comment_hides_brackets() -> None:
    text = "def f():\n    |\n"
    raw = "x = 1  # a ) in a comment\n    return x"
    assert clean_suggestion(raw, at(text)) == raw


def test_single_line_request_keeps_the_first_line_only() -> None:
    assert clean_suggestion("a + b\nprint(x)", at("total = sum(|)\n")) == "a + b"


def test_single_line_request_starting_with_a_line_break_is_empty() -> None:
    assert clean_suggestion("\n    a,\n", at("foo(|)\n")) == ""


def test_long_suggestions_are_capped() -> None:
    raw = "\n".join(f"x{i} = {i}" for i in range(100))
    assert clean_suggestion(raw, at("|")).count("\n") == 19
    assert clean_suggestion(raw, at("|"), max_lines=3) == "x0 = 0\nx1 = 1\nx2 = 2"


def test_markdown_keeps_brackets_and_fences() -> None:
    raw = "see (this\n```sh\nmake\n```"
    assert clean_suggestion(raw, at("Text |\n", "markdown")) == raw


# Chat answers


def test_fenced_chat_answer_gives_the_code_inside() -> None:
    raw = "Here is the completion:\n\n```python\nreturn a + b\n```\n\nThis adds the numbers."
    assert clean_suggestion(raw, at("def add(a, b):\n    |\n")) == "return a + b"


def test_fence_without_language_after_prose() -> None:
    raw = "Sure! Here you go\n```\nreturn 1\n```"
    assert clean_suggestion(raw, at("def f():\n    |\n")) == "return 1"


def test_unterminated_fence_keeps_everything_after_it() -> None:
    assert strip_code_fences("```js\nconst x = 1;\n") == "const x = 1;\n"


def test_code_then_a_closing_fence_keeps_the_code() -> None:
    assert strip_code_fences("x = 1\n```\nThat sets x.") == "x = 1\n"


def test_fenced_answer_echoing_the_whole_function_gives_only_the_new_part() -> None:
    text = "def add(a, b):\n    |\n"
    raw = "```python\ndef add(a, b):\n    return a + b\n```"
    assert clean_suggestion(raw, at(text)) == "return a + b"


def test_leading_chat_sentence_without_fence_is_dropped() -> None:
    raw = "Certainly! Here is the missing code:\n\nreturn a + b"
    assert clean_suggestion(raw, at("def add(a, b):\n    |\n")) == "return a + b"


def test_code_that_looks_like_a_word_is_not_prose() -> None:
    assert strip_leading_prose("okay = True\nhere = 1") == "okay = True\nhere = 1"
    assert strip_leading_prose("Sure.") == "Sure."  # nothing but prose: left to the caller


def test_special_tokens_end_the_suggestion() -> None:
    assert clean_suggestion("x + 1<|endoftext|>junk", at("y = |")) == "x + 1"
    assert clean_suggestion("x + 1<end_of_turn>\n", at("y = |")) == "x + 1"
    assert clean_suggestion("<|fim_middle|>oops", at("y = |")) == ""


# Echo of the text before the cursor


def test_echo_of_the_current_line_is_removed() -> None:
    assert clean_suggestion("    return a + b", at("def f(a, b):\n    return |\n")) == "a + b"


def test_echo_of_the_current_line_without_indentation_is_removed() -> None:
    assert clean_suggestion("return a + b", at("def f(a, b):\n    return a|\n")) == " + b"


def test_whole_line_echo_in_a_single_line_request_leaves_the_middle() -> None:
    assert clean_suggestion("result = compute(a, b)", at("result = compute(|)\n")) == "a, b"


def test_echo_of_the_lines_above_is_removed() -> None:
    prefix = "import os\n\ndef f():\n    pa"
    assert remove_echoed_prefix("def f():\n    pass", prefix) == "ss"


def test_echo_of_indentation_only_is_removed() -> None:
    assert clean_suggestion("    return 1", at("def f():\n    |\n")) == "return 1"


def test_short_words_are_not_mistaken_for_an_echo() -> None:
    assert clean_suggestion("if_ready()", at("def f():\n    if|\n")) == "if_ready()"


def test_nothing_to_echo_at_a_line_start() -> None:
    assert remove_echoed_prefix("x = 1", "y = 2\n") == "x = 1"


# Whitespace, line endings, text


def test_trailing_blank_lines_are_dropped() -> None:
    assert clean_suggestion("return 1\n\n   \n", at("def f():\n    |\n")) == "return 1"


def test_whitespace_only_is_empty() -> None:
    assert clean_suggestion(" \n\t\n", at("x = |")) == ""
    assert clean_suggestion("", at("x = |")) == ""


def test_crlf_document_gets_crlf_suggestion() -> None:
    text = "def f():\r\n    |\r\n"
    raw = "x = 1\r\n    return x\r\n\r\ndef g():"
    assert clean_suggestion(raw, at(text)) == "x = 1\r\n    return x"


def test_crlf_closing_brace_in_the_suffix_is_not_repeated() -> None:
    text = "void f() {\r\n  |\r\n}\r\n"
    assert clean_suggestion("g();\n}", at(text, "c")) == "g();"


def test_non_ascii_text_survives() -> None:
    text = "greeting = {\n    'ja': 'こんにちは',\n    |\n}\n"
    raw = "'fr': 'Ça va 🚀',\n}"
    assert clean_suggestion(raw, at(text)) == "'fr': 'Ça va 🚀',"


def test_empty_document() -> None:
    assert clean_suggestion("import os", at("|")) == "import os"


def test_cursor_at_the_very_start_of_a_document() -> None:
    assert clean_suggestion("#!/usr/bin/env python", at("|\nimport os\n")) == (
        "#!/usr/bin/env python"
    )


def test_bracket_depth_ignores_strings_and_comments() -> None:
    python = syntax_for("python")
    assert bracket_depth("f(')', \"(\")  # (", python) == 0
    assert bracket_depth("f(a, [b", python) == 2
    assert bracket_depth("f(x) }", syntax_for("go")) == -1


@given(st.text(max_size=200), st.sampled_from(["python", "c", "markdown", ""]))
def test_any_output_cleans_without_error(raw: str, language: str) -> None:
    request = at("def f(a):\n    x = g(|)\n    return x\n", language)
    cleaned = clean_suggestion(raw, request)
    assert cleaned == "" or cleaned.strip()
    assert "\n" not in cleaned  # the request is single-line
