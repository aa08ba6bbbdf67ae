"""The chat prompt of a refactor request: the selection, in enough of its file to be understood.

The model sees the top of the file (imports), the code around the selection with the selection
marked, the language and the instruction, and is asked for the replacement of the selection
alone, in one fenced block. The surrounding code is bounded by a character budget so that a
selection in a huge file still makes a prompt of predictable size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lsp_server.backends.base import ChatMessage

# Characters of surrounding code (header and context, not the selection itself) in one prompt.
CONTEXT_BUDGET_CHARS = 12_000
# The header (imports) gets at most this share of the budget.
HEADER_SHARE = 0.3
# Imports are looked for in this many lines at the top of the file.
HEADER_SCAN_LINES = 80

SELECTION_START = "⟦selection⟧"
SELECTION_END = "⟦/selection⟧"

READY_INSTRUCTIONS: tuple[tuple[str, str], ...] = (
    (
        "Extract function",
        "Extract the core of the selected code into a new, well-named function defined just "
        "before it, and replace the original code with a call to it.",
    ),
    (
        "Add type hints",
        "Add precise type annotations to the parameters, return values and variables where "
        "they help; do not change behaviour.",
    ),
    (
        "Simplify",
        "Simplify the selected code: remove duplication and needless complexity, use clearer "
        "names and idioms of the language; keep the behaviour exactly the same.",
    ),
    (
        "Add docstrings",
        "Add concise docstrings (or the language's documentation comments) that explain the "
        "purpose, parameters and return values; do not change the code itself.",
    ),
)

_IMPORT_LINE = re.compile(
    r"^\s*(?:import\s|from\s+\S+\s+import\s|#\s*include\s|#\s*import\s|using\s|use\s|"
    r"package\s|require[\s(]|extern\s+crate\s|@import\s|library\s|"
    r"(?:const|let|var)\s+\S.*=\s*require\()"
)
_PYTHON_DEFINITION = re.compile(r"^\s*(?:async\s+def|def|class)\s")
_PYTHON_DECORATOR = re.compile(r"^\s*@")


@dataclass(frozen=True, slots=True)
class _Lines:
    """The file split into lines that keep their endings, with each line's start offset."""

    texts: tuple[str, ...]
    starts: tuple[int, ...]

    @classmethod
    def of(cls, text: str) -> _Lines:
        texts = tuple(text.splitlines(keepends=True)) or ("",)
        starts, offset = [], 0
        for line in texts:
            starts.append(offset)
            offset += len(line)
        return cls(texts, tuple(starts))

    def index_at(self, offset: int) -> int:
        """The line holding `offset` (the last line for the end of the text)."""
        low, high = 0, len(self.starts) - 1
        while low < high:
            middle = (low + high + 1) // 2
            if self.starts[middle] <= offset:
                low = middle
            else:
                high = middle - 1
        return low

    def end(self, index: int) -> int:
        """The offset just past line `index` (exclusive end of a span of lines)."""
        return self.starts[index] + len(self.texts[index])


def build_refactor_messages(
    *,
    document_text: str,
    selection_start: int,
    selection_end: int,
    language: str,
    path: str,
    instruction: str,
    context_budget: int = CONTEXT_BUDGET_CHARS,
) -> tuple[ChatMessage, ...]:
    """A system and a user message asking to rewrite the selected part of `document_text`."""
    if not 0 <= selection_start <= selection_end <= len(document_text):
        raise ValueError("the selection is outside the document")
    lines = _Lines.of(document_text)
    first = lines.index_at(selection_start)
    last = lines.index_at(max(selection_start, selection_end - 1))

    header_end = _header_end(lines, int(context_budget * HEADER_SHARE))
    context_budget -= sum(len(lines.texts[i]) for i in range(header_end))
    span = None
    if _is_python(language):
        span = _enclosing_python_definition(lines, first, last, context_budget)
    if span is None:
        span = _window(lines, first, last, context_budget)
    context_first, context_last = span
    if context_first <= header_end:
        context_first, header_end = 0, 0

    excerpt = (
        document_text[lines.starts[context_first] : selection_start]
        + SELECTION_START
        + document_text[selection_start:selection_end]
        + SELECTION_END
        + document_text[selection_end : lines.end(context_last)]
    )
    tag = _fence_tag(language)
    parts = [f"File: {path or 'untitled'}", f"Language: {language or 'unknown'}", ""]
    if header_end:
        header = document_text[: lines.end(header_end - 1)]
        parts += [f"Top of the file (lines 1–{header_end}):", _fenced(header, tag), ""]
    scopes = _python_scopes(lines, context_first) if _is_python(language) else []
    if scopes:
        parts += ["The code below is inside: " + " → ".join(f"`{s}`" for s in scopes), ""]
    parts += [
        f"The code around the selection (lines {context_first + 1}–{context_last + 1}); "
        f"the selection is between {SELECTION_START} and {SELECTION_END}:",
        _fenced(excerpt, tag),
        "",
        f"Instruction: {instruction.strip()}",
        "",
        "Answer with the code that replaces the selection, and only that code, in one fenced "
        f"```{tag} block. Do not include the markers or any code outside the selection.",
    ]
    return (
        ChatMessage("system", _system_prompt(language)),
        ChatMessage("user", "\n".join(parts)),
    )


def _system_prompt(language: str) -> str:
    return (
        f"You are an expert {language or 'software'} engineer editing code inside an editor. "
        "You rewrite the selected code as instructed, keep everything the instruction does not "
        "ask to change, and keep the code consistent with the rest of the file (names, imports, "
        "style, indentation). Your answer is the replacement for the selection only, in a "
        "single fenced code block, with no explanation before or after it."
    )


def _header_end(lines: _Lines, budget: int) -> int:
    """The number of leading lines that hold the file's imports, within `budget` characters."""
    last_import = -1
    for index, text in enumerate(lines.texts[:HEADER_SCAN_LINES]):
        if _IMPORT_LINE.match(text):
            last_import = index
    size, end = 0, 0
    for index in range(last_import + 1):
        size += len(lines.texts[index])
        if size > budget:
            break
        end = index + 1
    return end


def _enclosing_python_definition(
    lines: _Lines, first: int, last: int, budget: int
) -> tuple[int, int] | None:
    """The lines of the innermost def or class around the selection, with its decorators, when
    it fits the budget; found by indentation, as Python defines blocks."""
    texts = lines.texts
    target = min(
        (_indent_width(texts[i]) for i in range(first, last + 1) if texts[i].strip()),
        default=0,
    )
    start = None
    for index in range(first - 1, -1, -1):
        text = texts[index]
        if not _is_code(text):
            continue
        width = _indent_width(text)
        if width >= target:
            continue
        if _PYTHON_DEFINITION.match(text):
            start = index
            break
        target = width
        if width == 0:
            return None
    if start is None:
        return None
    definition_width = _indent_width(texts[start])
    while start > 0 and _PYTHON_DECORATOR.match(texts[start - 1]):
        start -= 1
    end = last
    for index in range(last + 1, len(texts)):
        text = texts[index]
        if _is_code(text):
            if _indent_width(text) <= definition_width:
                break
            end = index
    selection_size = sum(len(texts[i]) for i in range(first, last + 1))
    span_size = sum(len(texts[i]) for i in range(start, end + 1)) - selection_size
    return (start, end) if span_size <= budget else None


def _python_scopes(lines: _Lines, index: int) -> list[str]:
    """The headers of the defs and classes that contain line `index`, outermost first."""
    headers: list[str] = []
    width = _indent_width(lines.texts[index]) if lines.texts[index].strip() else 0
    for line in range(index - 1, -1, -1):
        text = lines.texts[line]
        if width == 0:
            break
        if _is_code(text) and _indent_width(text) < width:
            width = _indent_width(text)
            if _PYTHON_DEFINITION.match(text):
                headers.append(text.strip())
    return headers[::-1]


def _window(lines: _Lines, first: int, last: int, budget: int) -> tuple[int, int]:
    """The selection's lines widened by whole lines on both sides while the budget lasts."""
    texts = lines.texts
    start, end, spent = first, last, 0
    while start > 0 or end < len(texts) - 1:
        grew = False
        for candidate in (start - 1, end + 1):
            if 0 <= candidate < len(texts) and spent + len(texts[candidate]) <= budget:
                spent += len(texts[candidate])
                start, end = min(start, candidate), max(end, candidate)
                grew = True
        if not grew:
            break
    return start, end


def _is_code(text: str) -> bool:
    """A Python line that is neither blank nor only a comment, so its indentation counts."""
    stripped = text.strip()
    return bool(stripped) and not stripped.startswith("#")


def _indent_width(text: str) -> int:
    stripped = text.lstrip(" \t")
    return len(text[: len(text) - len(stripped)].expandtabs(8))


def _is_python(language: str) -> bool:
    return language.lower() in ("python", "py", "python3")


def _fence_tag(language: str) -> str:
    return language.lower().replace(" ", "") if language else ""


def _fenced(text: str, tag: str) -> str:
    """`text` in a fence longer than any backtick run inside it, so the fence cannot break."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{tag}\n{text.rstrip(chr(10))}\n{fence}"
