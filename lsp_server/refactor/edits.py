"""From a model's answer to the smallest text edits that apply it to the document.

The answer is prose around a fenced block, or code alone; the code is taken out, indented to
where the selection sits, spliced into the document, checked (Python must still parse), and
diffed against the old document so that the editor receives minimal edits, never a whole-file
replacement. Edits are in str offsets of the document; a front door turns them into its own
positions (the LSP server in the position encoding it negotiated).
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass

from lsp_server.refactor.prompt import SELECTION_END, SELECTION_START
from lsp_server.text_edits import OffsetEdit, apply_edits, minimal_edits

__all__ = ["OffsetEdit", "apply_edits", "minimal_edits"]  # what front doors and tests use


class RefactorOutputError(Exception):
    """The model's answer cannot be applied; the message says why, for the user."""


# --- extracting the code ------------------------------------------------------------------

_FENCE_OPEN = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})\s*(?P<tag>[^\s`{]*)")
# A sentence that introduces or comments on the code ("Here is the refactored code:").
_PROSE_LINE = re.compile(
    r"^(?:[A-Z][\w'’,-]*(?: +[^\s=;{}]+){2,}[.:!]|(?:Sure|Certainly|Of course|Done)[.!:]?)$"
)
_LANGUAGE_ALIASES = {
    "py": "python",
    "python3": "python",
    "js": "javascript",
    "jsx": "javascriptreact",
    "ts": "typescript",
    "tsx": "typescriptreact",
    "rs": "rust",
    "rb": "ruby",
    "sh": "shellscript",
    "bash": "shellscript",
    "shell": "shellscript",
    "zsh": "shellscript",
    "c++": "cpp",
    "cs": "csharp",
    "c#": "csharp",
    "golang": "go",
    "kt": "kotlin",
    "yml": "yaml",
    "md": "markdown",
}


@dataclass(frozen=True, slots=True)
class _FencedBlock:
    tag: str
    code: str


def extract_code(answer: str, language: str) -> str:
    """The code of a model's answer: the fenced block tagged with `language`, else the largest
    fenced block, else the answer without the prose lines that lead or trail it."""
    fenced = _fenced_blocks(answer)
    blocks = [block for block in fenced if block.code.strip()]
    if blocks:
        wanted = _canonical_language(language)
        matching = [block for block in blocks if _canonical_language(block.tag) == wanted]
        return max(matching or blocks, key=lambda block: len(block.code)).code
    if fenced:
        raise RefactorOutputError("the model's answer has an empty code block")
    lines = _trim_blank_lines(answer.splitlines())
    while lines and _PROSE_LINE.match(lines[0].strip()):
        lines = _trim_blank_lines(lines[1:])
    while lines and _PROSE_LINE.match(lines[-1].strip()):
        lines = _trim_blank_lines(lines[:-1])
    if not lines:
        what = "contains no code" if answer.strip() else "is empty"
        raise RefactorOutputError(f"the model's answer {what}")
    return "\n".join(lines)


def without_markers(code: str) -> str:
    """The code without the prompt's selection markers, which never belong in the file.

    A model that echoes the surrounding code with the markers still marks its replacement:
    what lies between them is kept."""
    start, end = code.find(SELECTION_START), code.find(SELECTION_END)
    if start >= 0 and end > start:
        code = code[start + len(SELECTION_START) : end]
    code = code.replace(SELECTION_START, "").replace(SELECTION_END, "")
    if not code.strip():
        raise RefactorOutputError("the model's answer contains no code")
    return "\n".join(_trim_blank_lines(code.splitlines()))


def _fenced_blocks(answer: str) -> list[_FencedBlock]:
    """Fenced blocks in Markdown's sense; a block left open runs to the end of the answer."""
    blocks: list[_FencedBlock] = []
    lines = answer.splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE_OPEN.match(lines[index])
        index += 1
        if not opening:
            continue
        fence = opening["fence"]
        body: list[str] = []
        while index < len(lines):
            line = lines[index]
            index += 1
            closing = line.strip()
            if closing and set(closing) == {fence[0]} and len(closing) >= len(fence):
                break
            body.append(line)
        blocks.append(_FencedBlock(opening["tag"], "\n".join(_trim_blank_lines(body))))
    return blocks


def _trim_blank_lines(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def _canonical_language(name: str) -> str:
    name = name.strip().lower()
    return _LANGUAGE_ALIASES.get(name, name)


# --- fitting the code into the selection ---------------------------------------------------


def reindent(
    code: str, selection_text: str, *, line_prefix: str = "", newline: str | None = None
) -> str:
    """`code` dedented and indented like the selection it replaces.

    `line_prefix` is the text between the start of the selection's first line and the
    selection; when it is not empty the selection starts mid-line, and the first line of code
    is not indented (the prefix already stands before it). The result ends with a line break
    exactly when the selection does, and uses `newline` (by default the selection's own).
    """
    if newline is None:
        newline = "\r\n" if "\r\n" in selection_text else "\n"
    indent = _selection_indent(selection_text, line_prefix)
    code = textwrap.dedent(code.replace("\r\n", "\n").replace("\r", "\n"))
    lines: list[str] = []
    for number, line in enumerate(_trim_blank_lines(code.split("\n"))):
        line = line.rstrip()
        if not line:
            lines.append("")
        elif number == 0 and line_prefix:
            indented = indent + line
            if not line_prefix.strip() and indented.startswith(line_prefix):
                lines.append(indented[len(line_prefix) :])
            else:
                lines.append(line.lstrip())
        else:
            lines.append(indent + line)
    text = newline.join(lines)
    if selection_text.endswith(("\n", "\r")):
        text += newline
    return text


def _selection_indent(selection_text: str, line_prefix: str) -> str:
    """The leading whitespace shared by the selection's lines, its first line read whole."""
    first, *rest = selection_text.splitlines() or [""]
    lines = [line for line in rest if line.strip()]
    first_line = line_prefix + first
    if first_line.strip() or line_prefix:
        lines.insert(0, first_line)
    indents = [line[: len(line) - len(line.lstrip(" \t"))] for line in lines]
    if not indents:
        return ""
    common = indents[0]
    for indent in indents[1:]:
        while not indent.startswith(common):
            common = common[:-1]
    return common


# --- checking the result ------------------------------------------------------------------


def validate(new_document_text: str, language: str) -> None:
    """Refuse a document the model broke; Python is parsed, other languages pass."""
    if _canonical_language(language) != "python":
        return
    try:
        ast.parse(new_document_text)
    except SyntaxError as exc:
        where = f" at line {exc.lineno}" if exc.lineno else ""
        raise RefactorOutputError(
            f"the model's answer is not valid Python: {exc.msg}{where}"
        ) from None
    except ValueError as exc:  # e.g. a NUL character
        raise RefactorOutputError(f"the model's answer is not valid Python: {exc}") from None


def _parses(text: str, language: str) -> bool:
    try:
        validate(text, language)
    except RefactorOutputError:
        return False
    return True


# --- the whole flow ----------------------------------------------------------------------


def plan_refactor_edit(
    document_text: str, selection_start: int, selection_end: int, answer: str, language: str
) -> list[OffsetEdit]:
    """The minimal edits that replace the selection with the code of the model's `answer`.

    A Python document that did not parse before (the user is mid-edit) is not held against
    the model; one that parsed must still parse afterwards.
    """
    selection_text = document_text[selection_start:selection_end]
    line_start = max(
        document_text.rfind("\n", 0, selection_start), document_text.rfind("\r", 0, selection_start)
    )
    line_prefix = document_text[line_start + 1 : selection_start]
    replacement = reindent(
        without_markers(extract_code(answer, language)),
        selection_text,
        line_prefix=line_prefix,
        newline=_document_newline(document_text),
    )
    new_document = document_text[:selection_start] + replacement + document_text[selection_end:]
    if _parses(document_text, language):
        validate(new_document, language)
    return minimal_edits(document_text, new_document)


def _document_newline(text: str) -> str:
    """The line ending the document uses, judged by its first line break."""
    match = re.search(r"\r\n|\r|\n", text)
    return match.group() if match else "\n"
