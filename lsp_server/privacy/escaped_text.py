"""Text inside escaped string literals, with its quotes back: a notebook's JSON cell source
(`"os.environ[\\"TOKEN\\"] = \\"...\\"\\n"`), a command in a shell string (`"export
KEY=\\"...\\""`). The rules judge an assignment by its quotes; escaped, they see none.

`unescaped` takes the lines that hold an escaped quote, undoes the backslash escapes of quotes
and backslashes in them, and says where each character of the result came from, so a finding
in it can be placed in the original text. Other lines read the same either way and are not
repeated: most code has no escaped quote, and a file with a few pays for those lines alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ESCAPED_QUOTE = re.compile(r"\\[\"']")
_ESCAPE = re.compile(r"\\([\"'\\/])")


@dataclass(frozen=True, slots=True)
class UnescapedView:
    text: str
    # origins[i]: where text[i] is in the original text.
    origins: list[int]

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        return self.origins[start], self.origins[max(start, end - 1)] + 1


def unescaped(text: str) -> UnescapedView | None:
    """The lines of `text` with an escaped quote, unescaped; None when there is none."""
    pieces: list[str] = []
    origins: list[int] = []
    run_end = -1
    for quote in _ESCAPED_QUOTE.finditer(text):
        if quote.start() < run_end:
            continue  # on a line taken already
        line_start = text.rfind("\n", 0, quote.start()) + 1
        line_end = text.find("\n", quote.end())
        line_end = len(text) if line_end == -1 else line_end
        if pieces:
            pieces.append("\n")  # consecutive lines stay together; other runs are apart
            origins.append(run_end)
        _append_unescaped(text, line_start, line_end, pieces, origins)
        run_end = line_end
    if not pieces:
        return None
    return UnescapedView("".join(pieces), origins)


def _append_unescaped(
    text: str, start: int, end: int, pieces: list[str], origins: list[int]
) -> None:
    done = start
    for escape in _ESCAPE.finditer(text, start, end):
        pieces.append(text[done : escape.start()])
        origins.extend(range(done, escape.start()))
        pieces.append(escape[1])
        origins.append(escape.start() + 1)
        done = escape.end()
    pieces.append(text[done:end])
    origins.extend(range(done, end))
