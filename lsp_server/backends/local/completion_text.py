"""What the local model's text for an editor goes through, on a CPU where every token counts.

- The indentation before the cursor, on a line that holds nothing else, is left out of the
  prompt (`indent_to_heal`); the model writes it, and `LeadingBlanks` takes it off again.
- Text typed at the cursor since the last fill-in-the-middle prompt goes after that prompt, as
  the start of the middle (`MiddleAnchor`), instead of into a new prompt.
- `LineTime` ends a suggestion at a line break once it has had its time, and leaves out a
  later line not complete by then.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from lsp_server.backends.base import CompletionRequest, ContextChunk

# Typed text longer than this since the anchored prompt: a new prompt, with a window that
# follows the cursor.
MAX_TYPED_CHARS = 200

# An editor's suggestion grows by more lines only for half of `local.deadline_ms` after its
# first token, and at most 0.75 s; then it ends at the next line break (llama.cpp's server does
# the same with `t_max_predict_ms`). On a CPU every token costs tens of milliseconds: a finished
# line in time beats a block that misses the deadline and is shown nowhere.
MORE_LINES_SHARE = 0.5
MORE_LINES_MAX_S = 0.75


def more_lines_seconds(deadline_ms: int) -> float:
    """How long after its first token a suggestion may still grow by lines."""
    return min(deadline_ms / 1000 * MORE_LINES_SHARE, MORE_LINES_MAX_S)


def indent_to_heal(request: CompletionRequest) -> str:
    """The blanks before the cursor on a line that holds nothing else, when the suggestion may
    be a block: the prompt ends at the line start instead, and the model writes the indentation.

    A prompt that ends in a run of blanks is one no model saw in training (its tokenizer joins
    the indentation to the word after it), and small models answer it with indentation of
    their own or with code for another level."""
    if request.single_line:
        return ""
    tail = request.prefix[request.prefix.rfind("\n") + 1 :]
    return tail if tail and not tail.strip(" \t") else ""


class LeadingBlanks:
    """Drops up to `count` blanks from the start of a streamed answer: the indentation the
    prompt left out (`indent_to_heal`), which the editor's line already has."""

    def __init__(self, count: int) -> None:
        self._left = count

    def drop(self, text: str) -> str:
        if not self._left:
            return text
        blanks = 0
        while blanks < min(self._left, len(text)) and text[blanks] in " \t":
            blanks += 1
        self._left = self._left - blanks if blanks == len(text) else 0
        return text[blanks:]


class LineTime:
    """Bounds how long a suggestion grows by lines; `seconds` None: never.

    The first line goes out as it comes and, once `seconds` have passed since the first text,
    ends the suggestion at its line break (the break left out). Each later line is held until
    it is complete, and one not complete by then is dropped and the suggestion ends: a line the
    model had only begun would otherwise hold the whole answer back for as long as it is (on a
    CPU, a long second line took the 1.5B from 0.7 s to 3.4 s a keystroke)."""

    def __init__(self, seconds: float | None) -> None:
        self._seconds = seconds
        self._first: float | None = None
        self._written = False  # some non-blank text came: a line break now ends a line
        self._held: str | None = None  # a later line under way, from its line break

    def feed(self, text: str) -> tuple[str, bool]:
        """The part of `text` to send, and whether the suggestion is complete."""
        if self._seconds is None or not text:
            return text, False
        now = time.monotonic()
        if self._first is None:
            self._first = now
        late = now - self._first >= self._seconds
        sent: list[str] = []
        for char in text:
            if self._held is None:  # the first line
                if char == "\n" and self._written:
                    if late:
                        return "".join(sent), True
                    self._held = char
                    continue
                sent.append(char)
                if not char.isspace():
                    self._written = True
            elif char == "\n":
                sent.append(self._held)  # a complete line
                if late:
                    return "".join(sent), True
                self._held = char
            else:
                self._held += char
        if late and self._held is not None:
            self._held = None  # the line under way is not complete in time: left out
            return "".join(sent), True
        return "".join(sent), False

    def rest(self) -> str:
        """What is held when the generation ended by itself: its last line."""
        held, self._held = self._held or "", None
        return held


@dataclass(frozen=True, slots=True)
class MiddleAnchor:
    """A fill-in-the-middle prompt the KV cache holds, and the request text it was built from.

    In such a prompt the code after the cursor follows the code before it, so a keystroke that
    adds to the prefix changes the prompt before the whole suffix, and the model would read the
    suffix again at every keystroke: a second or more for a few hundred tokens on a CPU core.
    Text typed at the cursor is instead the start of the middle: the model continues after
    the anchored prompt and the typed tokens, as it was trained to fill in, and reads only those.
    """

    prefix: str  # the request's prefix as the prompt holds it (healed indentation left out)
    suffix: str
    context: tuple[ContextChunk, ...]
    tokens: tuple[int, ...]

    def typed_since(self, request: CompletionRequest) -> str | None:
        """What was typed at the cursor since this prompt, when that is all that changed and
        it is part of one line with something besides blanks; else None."""
        if request.suffix != self.suffix or request.context != self.context:
            return None
        if not request.prefix.startswith(self.prefix):
            return None
        typed = request.prefix[len(self.prefix) :]
        if not typed.strip() or "\n" in typed or len(typed) > MAX_TYPED_CHARS:
            return None
        return typed
