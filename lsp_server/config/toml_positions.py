"""Where a key is written in a configuration's TOML text, for errors that name the line.

tomllib gives values without positions; this finds the 1-based line of each table header and key
in text tomllib has accepted, and the line of a TOML syntax error in tomllib's message."""

from __future__ import annotations

import re
from collections.abc import Mapping

KeyPath = tuple[str | int, ...]


def dotted(path: KeyPath) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


_TOML_ERROR_POSITION = re.compile(r"\s*\(at (?:line (\d+), column \d+|end of document)\)\s*$")
_KEY_PART = r"""(?:[A-Za-z0-9_\-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
_DOTTED_KEY = rf"{_KEY_PART}(?:\s*\.\s*{_KEY_PART})*"
_HEADER_LINE = re.compile(rf"^\s*(\[\[?)\s*({_DOTTED_KEY})\s*\]\]?\s*(?:#.*)?$")
_KEY_LINE = re.compile(rf"^\s*({_DOTTED_KEY})\s*=\s*(.*)$")
_INLINE_KEY = re.compile(rf"[{{,]\s*({_DOTTED_KEY})\s*=")


def split_toml_error(message: str, text: str) -> tuple[str, int | None]:
    match = _TOML_ERROR_POSITION.search(message)
    if not match:
        return message, None
    line = int(match.group(1)) if match.group(1) else max(1, len(text.splitlines()))
    return message[: match.start()], line


def _key_parts(dotted_key: str) -> list[str]:
    return [p[1:-1] if p[0] in "\"'" else p for p in re.findall(_KEY_PART, dotted_key)]


def key_lines(text: str) -> dict[KeyPath, int]:
    """The 1-based line where each table header and key is written.

    A line scanner, not a parser: it runs only on text tomllib has accepted, and is good for
    headers, `key = value` lines (dotted keys included) and keys inside one-line inline tables.
    """
    lines: dict[KeyPath, int] = {}
    array_lengths: dict[KeyPath, int] = {}
    table: KeyPath = ()
    in_multiline_string = False
    for number, line in enumerate(text.splitlines(), start=1):
        if in_multiline_string:
            in_multiline_string = _toggles_multiline(line, in_multiline_string)
            continue
        header = _HEADER_LINE.match(line)
        if header:
            parts = _key_parts(header.group(2))
            if header.group(1) == "[[":
                table = (*_resolve(parts[:-1], array_lengths), parts[-1])
                index = array_lengths.get(table, 0)
                array_lengths[table] = index + 1
                table = (*table, index)
            else:
                table = _resolve(parts, array_lengths)
            lines.setdefault(table, number)
            continue
        assignment = _KEY_LINE.match(line)
        if not assignment:
            continue
        key_path = (*table, *_key_parts(assignment.group(1)))
        lines.setdefault(key_path, number)
        value = assignment.group(2)
        if value.startswith("{"):
            for inner in _INLINE_KEY.finditer(value):
                lines.setdefault((*key_path, *_key_parts(inner.group(1))), number)
        in_multiline_string = _toggles_multiline(value, False)
    return lines


def _resolve(parts: list[str], array_lengths: Mapping[KeyPath, int]) -> KeyPath:
    """A header's path, where a name of an array of tables means its last element."""
    path: KeyPath = ()
    for part in parts:
        path = (*path, part)
        if path in array_lengths:
            path = (*path, array_lengths[path] - 1)
    return path


def _toggles_multiline(text: str, inside: bool) -> bool:
    for quote in ('"""', "'''"):
        if text.count(quote) % 2:
            return not inside
    return inside


def line_of(path: KeyPath, lines: Mapping[KeyPath, int]) -> int | None:
    for end in range(len(path), 0, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return None
