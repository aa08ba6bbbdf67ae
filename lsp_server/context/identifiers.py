"""Identifiers of a piece of code, and the Jaccard similarity of two such sets: the ranking
Copilot uses for neighbouring tabs, cheap enough for every keystroke."""

from __future__ import annotations

import re

# Two characters or more: one-letter names say nothing either.
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]+")
# Words every file of a language is full of; they say nothing about what a piece is about.
_COMMON = frozenset(
    {
        "and", "as", "async", "await", "bool", "break", "case", "catch", "class", "const",
        "continue", "def", "default", "del", "elif", "else", "export", "false", "fn", "for",
        "from", "func", "function", "if", "import", "in", "int", "is", "let", "new", "none",
        "not", "null", "or", "pass", "pub", "return", "self", "str", "this", "true", "try",
        "var", "void", "while", "with", "None", "True", "False",
    }
)  # fmt: skip


def identifiers(text: str) -> frozenset[str]:
    """The distinct identifiers in `text`, common keywords and one-letter names left out."""
    return frozenset(_IDENTIFIER.findall(text)).difference(_COMMON)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b|; 0 for two empty sets."""
    if not a or not b:
        return 0.0
    common = len(a & b)
    return common / (len(a) + len(b) - common)
