"""A secret found in text, and the rule shape most secret formats take: one compiled pattern."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SecretFinding:
    """A secret in scanned text: its kind and where it is (`text[start:end]`)."""

    kind: str
    start: int
    end: int


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


@dataclass(frozen=True, slots=True)
class PatternRule:
    """A secret format: a pattern whose group `secret` (or whole match) is the secret."""

    kind: str
    pattern: re.Pattern[str]
    # Judges the matched secret text; None accepts every match.
    accept: Callable[[str], bool] | None = None
    # The pattern is written in lower case and runs on the lower-cased text.
    lowercase: bool = False
    # The match must not continue a word: `xAKIA...` is not an AWS key id.
    word_start: bool = True
    # Only white space may come before the match on its line.
    own_line: bool = False

    def findings(self, text: str, lowered: str) -> Iterator[SecretFinding]:
        group = "secret" if "secret" in self.pattern.groupindex else 0
        for match in self.pattern.finditer(lowered if self.lowercase else text):
            if self.word_start and match.start() > 0 and _is_word_char(text[match.start() - 1]):
                continue
            if self.own_line and not _only_blanks_before(text, match.start()):
                continue
            start, end = match.span(group)
            if self.accept is None or self.accept(text[start:end]):
                yield SecretFinding(self.kind, start, end)


def _only_blanks_before(text: str, position: int) -> bool:
    line_start = text.rfind("\n", 0, position) + 1
    return not text[line_start:position].strip()
