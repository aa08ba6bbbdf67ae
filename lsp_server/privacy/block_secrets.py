"""Secrets named by the block that holds them, not by their own key.

Terraform's `variable "db_password" { default = "..." }`, a CloudFormation parameter
`DBPassword:` with `Default: ...` under it, `"api_token": {"value": "..."}` in JSON, HCL and Nix
attribute sets: the value's own key (`default`, `value`) says nothing, the enclosing block's name
does. The rule searches for those value keys (a literal the regex engine skips to), then finds
the block around them: the innermost unclosed `{` within reach, else, for indented formats, the
nearest line above that is indented less and ends in `:`, or a TOML or INI table header. The
block's name is the last word or quoted name before its `{` (or its `:`, or in its `[...]`); it
must be secret-like, ending in `password`, `secret`, `token`, `api_key`, ... The value is judged
as a name/value pair's is.

The block's name is looked for at most `BLOCK_REACH` lines above the value, so a scan of a few
lines around a value (the keystroke memo's) sees it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from lsp_server.privacy.pattern_rule import SecretFinding
from lsp_server.privacy.secret_values import code_shaped, has_letter_and_digit, non_trivial

BLOCK_REACH = 4  # lines between a block's name and a value in it

_SECRET_NAME = re.compile(
    r"[\w.-]*(?:pass(?:word|wd|phrase)?|pwd|secret|token|credentials?"
    r"|(?:api|access|private|secret|auth|signing|encryption|client)[_.-]?key)"
)
_BLOCK_NAME = re.compile(r"[\"'`]?(?P<name>[\w.-]+)[\"'`]?[ \t]*(?:=|:)?[ \t]*$")
_YAML_PARENT = re.compile(r"[ \t]*(?:-[ \t]+)?[\"']?(?P<name>[\w.-]+)[\"']?[ \t]*:[ \t]*(?:#.*)?")
_TABLE_HEADER = re.compile(
    r"[ \t]*\[\[?[ \t]*(?:[\w\"'-]+\.)*[\"']?(?P<name>[\w-]+)[\"']?[ \t]*\]\]?[ \t]*(?:#.*)?"
)


# The value's key (`default`, `defaultValue`, `value`), its operator and a quoted or bare value.
_VALUE_TAIL = (
    r"[\"']?[ \t]*(?:=|:)[ \t]*"
    r"(?:(?P<quote>[\"'`])(?P<secret>[^\"'`\n]{6,200})(?P=quote)"
    r"|(?P<bare>[^\s\"'`#,;}\]]{8,200})[ \t]*(?:#[^\n]*)?$)"
)


@dataclass(frozen=True, slots=True)
class BlockNamedRule:
    """A value under a key named `default` (`defaultValue`) or `value` in a block whose name is
    secret-like. One rule per key: a pattern that starts with one literal is searched for far
    faster than one that starts with either of two."""

    pattern: re.Pattern[str]
    kind: str = "block-secret"

    def findings(self, text: str, lowered: str) -> Iterator[SecretFinding]:
        for match in self.pattern.finditer(lowered):
            key_start = match.start()
            if key_start > 0 and (
                lowered[key_start - 1].isalnum() or lowered[key_start - 1] == "_"
            ):
                continue  # `my_default`, `keyvalue`: another key
            group = "secret" if match["secret"] is not None else "bare"
            start, end = match.span(group)
            value = text[start:end]
            if not _accepted(value, quoted=group == "secret"):
                continue
            name = block_name(text, key_start)
            if name is not None and _SECRET_NAME.fullmatch(name.lower()):
                yield SecretFinding(self.kind, start, end)


BLOCK_NAMED_RULES = tuple(
    BlockNamedRule(re.compile(word + _VALUE_TAIL, re.MULTILINE))
    for word in (r"default(?:[_-]?value)?", "value")
)


def _accepted(value: str, *, quoted: bool) -> bool:
    if not non_trivial(value) or code_shaped(value):
        return False
    return quoted or (len(value) >= 8 and has_letter_and_digit(value))


def block_name(text: str, position: int) -> str | None:
    """The name of the innermost block holding `position`, looking `BLOCK_REACH` lines up: of
    the braced block and the indented mapping or table around it, the one that opens nearer."""
    floor = position
    for _ in range(BLOCK_REACH + 1):
        floor = text.rfind("\n", 0, floor)
        if floor == -1:
            break
    floor += 1
    found = [
        opener
        for opener in (_braced(text, position, floor), _indented(text, position, floor))
        if opener is not None
    ]
    # Nearer first; on the same line, the one that has a name.
    return max(found, key=lambda opener: (opener[0], opener[1] is not None))[1] if found else None


def _braced(text: str, position: int, floor: int) -> tuple[int, str | None] | None:
    """Where the line of the innermost unclosed `{` before `position` starts, and the name
    before that `{`."""
    depth = 0
    for index in range(position - 1, floor - 1, -1):
        char = text[index]
        if char == "}":
            depth += 1
        elif char == "{":
            if depth == 0:
                header_start = text.rfind("\n", max(0, floor - 1), index) + 1
                found = _BLOCK_NAME.search(text, header_start, index)
                return header_start, found["name"] if found is not None else None
            depth -= 1
    return None


def _indented(text: str, position: int, floor: int) -> tuple[int, str | None] | None:
    """Where the nearest line above `position`'s that is indented less (or a TOML or INI table
    header, `[mail.smtp_password]`) starts, and the key it opens a mapping with."""
    line_start = text.rfind("\n", 0, position) + 1
    indent = _indent(text, line_start)
    while line_start > floor:
        previous = text.rfind("\n", 0, line_start - 1) + 1
        line = text[previous : line_start - 1]
        line_start = previous
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if (table := _TABLE_HEADER.fullmatch(line)) is not None:
            return previous, table["name"]
        if _indent(text, previous) < indent:
            found = _YAML_PARENT.fullmatch(line)
            return previous, found["name"] if found is not None else None
    return None


def _indent(text: str, line_start: int) -> int:
    end = line_start
    while end < len(text) and text[end] in " \t":
        end += 1
    return end - line_start
