"""Build the fill-in-the-middle request for a cursor position in a document.

The model sees a window of the document around the cursor: whole lines only, so it never starts
or ends in the middle of a line (unless a single line is longer than the window). Whether the
suggestion should finish the current line or may write a block is decided here, from what
follows the cursor on its line.
"""

from __future__ import annotations

from lsp_server.backends.base import CompletionRequest

# Two blank lines end a suggestion: past that the model is writing the next unit of code.
BLOCK_STOP = "\n\n\n"


def build_completion_request(
    text: str,
    offset: int,
    *,
    language: str,
    path: str,
    max_tokens: int,
    prefix_chars: int = 6000,
    suffix_chars: int = 2000,
) -> CompletionRequest:
    """The request for a suggestion at `offset`, a str index into `text` (0 to len(text))."""
    if not 0 <= offset <= len(text):
        raise ValueError(f"cursor offset {offset} outside a document of {len(text)} characters")
    prefix = prefix_window(text, offset, prefix_chars)
    suffix = suffix_window(text, offset, suffix_chars)
    single_line = is_mid_line(suffix)
    crlf = "\r\n" in prefix or "\r\n" in suffix
    return CompletionRequest(
        prefix=prefix,
        suffix=suffix,
        language=language,
        path=path,
        max_tokens=max_tokens,
        stop=stop_sequences(single_line=single_line, crlf=crlf),
        single_line=single_line,
        prefix_line=text.count("\n", 0, offset - len(prefix)),
    )


def prefix_window(text: str, offset: int, max_chars: int) -> str:
    """Up to `max_chars` before the cursor, starting at a line start."""
    start = offset - max_chars
    if start <= 0:
        return text[:offset]
    newline = text.find("\n", start - 1, offset)
    if newline == -1:
        return text[start:offset]
    return text[newline + 1 : offset]


def suffix_window(text: str, offset: int, max_chars: int) -> str:
    """Up to `max_chars` after the cursor, ending after a line break (or at the end of text)."""
    end = offset + max_chars
    if end >= len(text) or text[end - 1] == "\n":
        return text[offset:end]
    newline = text.rfind("\n", offset, end)
    if newline == -1:
        return text[offset:end]
    return text[offset : newline + 1]


def is_mid_line(suffix: str) -> bool:
    """True when non-whitespace text follows the cursor on its line: finish that line only."""
    return bool(suffix.partition("\n")[0].strip())


def stop_sequences(*, single_line: bool, crlf: bool) -> tuple[str, ...]:
    """Where the backend may stop generating; block ends are left to post-processing."""
    if single_line:
        return ("\n",)
    return (BLOCK_STOP, BLOCK_STOP.replace("\n", "\r\n")) if crlf else (BLOCK_STOP,)
