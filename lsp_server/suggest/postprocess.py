"""Turn a model's raw output into the text an editor shows as an inline suggestion.

Rules, in the order they apply:

1. Line endings: the rules work on "\\n"; the result uses the document's line ending.
2. Special tokens: cut at the first end-of-text or fill-in-the-middle marker a model leaked.
3. Code fences (not in prose documents): from a chat answer keep the code of the first fenced
   block; code followed by a closing fence keeps the code.
4. Chat prose (not in prose documents): drop leading lines such as "Here is the code:".
5. Echo: drop a repeat of the text before the cursor (its line, possibly with a few lines above,
   or the line without its indentation).
6. Boundary: a single-line request ends at the first line break. A block ends at the first line
   that dedents below the line the cursor is on, or back to it when the suggestion starts on a
   new line with the body of that line (indentation languages), and at a closing bracket that
   takes the nesting below zero (kept, with the punctuation that ends its line, for rule 7 to
   weigh); at most `MAX_LINES` lines.
7. Suffix overlap: cut where the suggestion runs on into a copy of the code after the cursor (a
   later line that is the next non-blank line after the cursor, and the one after it too when
   both have one), whatever the language; drop trailing lines that repeat the lines after the
   cursor, then trailing text
   that the suffix begins with when it is closing punctuation or runs to the end of a suffix line;
   neither may leave a bracket of the suggestion unclosed.
8. Trailing whitespace goes; a suggestion with nothing but whitespace left is "".

Before them, an answer the deadline cut keeps its complete lines only (`complete_lines`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from lsp_server.backends.base import CompletionRequest

MAX_LINES = 20
# How many lines above the cursor line an echo may start.
ECHO_LOOKBACK_LINES = 8
# The shortest line after the cursor whose copy in a suggestion ends the suggestion.
MIN_REPEAT_CHARS = 6

_OFFSIDE_LANGUAGES = frozenset(
    {"python", "cython", "starlark", "nim", "coffeescript", "yaml", "gdscript", "pug", "sass"}
)
_HASH_COMMENT_LANGUAGES = frozenset(
    {
        "python", "cython", "starlark", "nim", "coffeescript", "yaml", "gdscript", "ruby",
        "perl", "r", "shellscript", "powershell", "toml", "makefile", "dockerfile", "elixir",
        "julia", "cmake",
    }
)  # fmt: skip
_DASH_COMMENT_LANGUAGES = frozenset({"lua", "sql", "haskell", "elm", "ada", "purescript"})
# Where a single quote is a one-character literal, not a string (Rust lifetimes, OCaml 'a).
_CHAR_QUOTE_LANGUAGES = frozenset(
    {"rust", "c", "cpp", "objective-c", "java", "go", "csharp", "kotlin", "scala", "ocaml", "zig"}
)
_PROSE_LANGUAGES = frozenset({"markdown", "mdx", "plaintext", "restructuredtext", "asciidoc"})

_OPENERS = "([{"
_CLOSERS = ")]}"
# What a closing bracket that ends a block keeps when they end its line: `});`, `]),`, `):`.
_CLOSER_TAIL = _CLOSERS + ";,:"
# What an editor auto-inserts after the cursor and a model tends to write again.
_CLOSING_PUNCTUATION = frozenset(_CLOSER_TAIL + ">\"'` \t")

_SPECIAL_TOKEN = re.compile(
    r"<\|[A-Za-z0-9_]+\|>|<(?:end_of_turn|start_of_turn|eos|eot|EOT|fim_(?:prefix|middle|suffix|pad))>"
)
_FENCE = re.compile(r"^[ \t]*(?:```|~~~)([^`\n]*)$", re.MULTILINE)
_PROSE_OPENER = re.compile(
    r"(?:sure|certainly|of course|okay|ok|here(?:'s| is| are)|below is|"
    r"the (?:completed?|missing|following|rest)|this (?:is|completes|code|will))\b",
    re.IGNORECASE,
)
_CODE_CHARS = re.compile(r"[=;{}()\[\]<>]")


@dataclass(frozen=True, slots=True)
class Syntax:
    """What the boundary rules need to know about a language."""

    offside: bool  # blocks are delimited by indentation
    prose: bool  # text rather than code: no bracket, fence or chat-prose rules
    tokens: re.Pattern[str]  # groups "skip" (strings, comments), "open", "close"


@cache
def syntax_for(language: str) -> Syntax:
    language = language.lower()
    prose = language in _PROSE_LANGUAGES
    return Syntax(
        offside=language in _OFFSIDE_LANGUAGES,
        prose=prose,
        tokens=_token_pattern(language, prose=prose),
    )


def _token_pattern(language: str, *, prose: bool) -> re.Pattern[str]:
    brackets = r"(?P<open>[(\[{])|(?P<close>[)\]}])"
    if prose:
        return re.compile(brackets)
    single_quote = (
        r"'(?:\\.|[^'\\\n])'" if language in _CHAR_QUOTE_LANGUAGES else r"'(?:\\.|[^'\\\n])*'"
    )
    if language in _HASH_COMMENT_LANGUAGES:
        comment = "#"
    elif language in _DASH_COMMENT_LANGUAGES:
        comment = "--"
    else:
        comment = "//"
    skip = rf'"(?:\\.|[^"\\\n])*"|{single_quote}|`(?:\\.|[^`\\\n])*`|{re.escape(comment)}.*'
    return re.compile(rf"(?P<skip>{skip})|{brackets}")


def clean_suggestion(raw: str, request: CompletionRequest, *, max_lines: int = MAX_LINES) -> str:
    """The part of `raw` worth showing at the cursor of `request`, or "" if there is none."""
    syntax = syntax_for(request.language)
    prefix = _lf(request.prefix)
    suffix = _lf(request.suffix)
    text = cut_at_special_tokens(_lf(raw))
    if not syntax.prose:
        text = strip_leading_prose(strip_code_fences(text))
    text = remove_echoed_prefix(text, prefix)
    text = cut_at_block_end(
        text, prefix, syntax, max_lines=1 if request.single_line else max_lines
    ).rstrip()
    text = cut_at_suffix_repeat(text, suffix)
    text = trim_repeated_suffix_lines(text, suffix, syntax)
    text = trim_suffix_overlap(text, suffix, syntax).rstrip()
    if not text.strip():
        return ""
    crlf = "\r\n" in request.prefix or "\r\n" in request.suffix
    return text.replace("\n", "\r\n") if crlf else text


def complete_lines(text: str) -> str:
    """An answer the deadline cut, back to its last line break: a line the model had only begun
    (half a word, half a call) is no suggestion, and none is better than a wrong fragment."""
    return text[: text.rfind("\n") + 1]


def cut_at_special_tokens(text: str) -> str:
    match = _SPECIAL_TOKEN.search(text)
    return text[: match.start()] if match else text


def strip_code_fences(text: str) -> str:
    """The code of a fenced answer; text before a closing fence when the model wrote code first."""
    fences = list(_FENCE.finditer(text))
    if not fences:
        return text
    first = fences[0]
    before = text[: first.start()]
    if not (first.group(1).strip() or _is_preamble(before)):
        return before
    body_end = fences[1].start() if len(fences) > 1 else len(text)
    return text[first.end() + 1 : body_end]


def strip_leading_prose(text: str) -> str:
    """Drop chat sentences ("Sure! Here is the code:") before the code, and blank lines after."""
    lines = text.split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    end = first
    while end < len(lines) and _is_prose_line(lines[end]):
        end += 1
    if end == first or end == len(lines):
        return text
    while end < len(lines) and not lines[end].strip():
        end += 1
    return "\n".join(lines[:first] + lines[end:])


def remove_echoed_prefix(text: str, prefix: str) -> str:
    """Drop a copy of the text before the cursor that the model wrote again."""
    line_start = prefix.rfind("\n") + 1
    line_before = prefix[line_start:]
    if not line_before:
        return text
    starts = [line_start]
    while len(starts) < ECHO_LOOKBACK_LINES and starts[-1] > 0:
        starts.append(prefix.rfind("\n", 0, starts[-1] - 1) + 1)
    for start in reversed(starts):
        echo = prefix[start:]
        if text.startswith(echo):
            return text[len(echo) :]
    unindented = line_before.lstrip()
    if len(unindented.rstrip()) >= 3 and text.startswith(unindented):
        return text[len(unindented) :]
    return text


def cut_at_block_end(text: str, prefix: str, syntax: Syntax, *, max_lines: int) -> str:
    """The suggestion up to the end of the block the cursor is in (see rule 6)."""
    lines = text.split("\n")[:max_lines]
    start_indent = _indent(prefix[prefix.rfind("\n") + 1 :] + lines[0])
    # A body under a header the cursor line already holds ends back at the header's level.
    opens_body: bool | None = None if not lines[0].strip() else False
    depth = 0
    kept: list[str] = []
    for number, line in enumerate(lines):
        if number and syntax.offside and line.strip() and line.lstrip()[0] not in _CLOSERS:
            indent = _indent(line)
            if opens_body is None:
                opens_body = indent > start_indent
            if indent < start_indent or (opens_body and indent == start_indent):
                break
        if not syntax.prose:
            depth, cut = _over_closing_cut(line, depth, syntax)
            if cut is not None:
                kept.append(line[:cut])
                break
        kept.append(line)
    return "\n".join(kept)


def cut_at_suffix_repeat(text: str, suffix: str) -> str:
    """The suggestion up to where it starts repeating the lines after the cursor."""
    following = _following_lines(suffix, limit=2)
    if not following or not _is_distinctive(following[0]):
        return text
    lines = text.split("\n")
    for number in range(1, len(lines)):
        if lines[number].strip() != following[0]:
            continue
        after = next((line.strip() for line in lines[number + 1 :] if line.strip()), None)
        if len(following) > 1 and after is not None and after != following[1]:
            continue
        return "\n".join(lines[:number]).rstrip()
    return text


def _is_distinctive(line: str) -> bool:
    """A line worth matching: not a lone bracket, `end` or `else:`."""
    return len(line) >= MIN_REPEAT_CHARS and sum(c.isalnum() for c in line) >= 3


def trim_repeated_suffix_lines(text: str, suffix: str, syntax: Syntax) -> str:
    """Drop the suggestion's last lines when they are the lines that follow the cursor."""
    lines = text.split("\n")
    following = _following_lines(suffix, limit=len(lines) - 1)
    if not following:
        return text
    for count in range(len(lines) - 1, 0, -1):
        tail = lines[-count:]
        if not tail[0].strip():
            continue
        stripped = [line.strip() for line in tail if line.strip()]
        kept = "\n".join(lines[:-count])
        if stripped == following[: len(stripped)] and bracket_depth(kept, syntax) <= 0:
            return kept
    return text


def trim_suffix_overlap(text: str, suffix: str, syntax: Syntax) -> str:
    """Drop trailing text the suffix begins with: `foo(|)` + `a, b)` gives `a, b`."""
    for size in range(min(len(text), len(suffix)), 0, -1):
        if suffix[size - 1] != text[-1]:
            continue
        overlap = suffix[:size]
        if not overlap.strip() or not text.endswith(overlap):
            continue
        ends_line = size == len(suffix) or suffix[size] == "\n"
        if not (ends_line or _CLOSING_PUNCTUATION.issuperset(overlap)):
            continue
        kept = text[:-size]
        if bracket_depth(kept, syntax) <= 0:
            return kept
    return text


def bracket_depth(text: str, syntax: Syntax) -> int:
    """Opening minus closing brackets outside strings and comments."""
    depth = 0
    for token in syntax.tokens.finditer(text):
        if token.lastgroup == "open":
            depth += 1
        elif token.lastgroup == "close":
            depth -= 1
    return depth


def _over_closing_cut(line: str, depth: int, syntax: Syntax) -> tuple[int, int | None]:
    """The depth after `line`, and where to cut it if a bracket closes below zero."""
    for token in syntax.tokens.finditer(line):
        if token.lastgroup == "open":
            depth += 1
        elif token.lastgroup == "close":
            depth -= 1
            if depth < 0:
                end = token.end()
                closers_end = len(line) - len(line[end:].lstrip(_CLOSER_TAIL))
                return depth, closers_end if not line[closers_end:].strip() else end
    return depth, None


def _following_lines(suffix: str, *, limit: int) -> list[str]:
    """Up to `limit` non-blank lines after the cursor's line, stripped."""
    found: list[str] = []
    for line in suffix.split("\n")[1:]:
        if len(found) >= limit:
            break
        if line.strip():
            found.append(line.strip())
    return found


def _is_prose_line(line: str) -> bool:
    """A chat sentence such as "Here is the completed function:"."""
    stripped = line.strip()
    return (
        bool(stripped)
        and stripped[-1] in ":.!"
        and _PROSE_OPENER.match(stripped) is not None
        and _CODE_CHARS.search(stripped) is None
    )


def _is_preamble(text: str) -> bool:
    """Whether text before a fence is chat talk (so the fence opens the code)."""
    for line in text.split("\n"):
        stripped = line.strip()
        if not stripped or _is_prose_line(stripped):
            continue
        if not (stripped[0].isupper() and " " in stripped and not _CODE_CHARS.search(stripped)):
            return False
    return True


def _indent(line: str) -> int:
    expanded = line.expandtabs(8)
    return len(expanded) - len(expanded.lstrip())


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n")
