"""What a Python file imports, read from its import lines alone: a file being edited rarely
parses whole, but its imports usually do."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

# A top-level import statement: one line, or a parenthesised list over several.
_IMPORT = re.compile(
    r"^(?:from[ \t]+[\w.]+[ \t]+import[ \t]*\([^)]*\)"
    r"|(?:from[ \t]+[\w.]+[ \t]+)?import[ \t][^\n]*)",
    re.MULTILINE,
)


@dataclass(frozen=True, slots=True)
class Imported:
    """`from <dots><module> import <names>`, or `import <module>` (no names: all of it)."""

    module: str
    level: int = 0  # leading dots of a relative import
    names: tuple[str, ...] = ()


def import_statements(source: str) -> tuple[str, ...]:
    """The file's top-level import statements, as written."""
    return tuple(match.group(0) for match in _IMPORT.finditer(source))


def imports_of(statements: tuple[str, ...]) -> list[Imported]:
    """What `statements` import; one that does not parse is passed over."""
    found: list[Imported] = []
    for statement in statements:
        found += _parse(statement)
    return found


def _parse(statement: str) -> list[Imported]:
    try:
        tree = ast.parse(statement)
    except (SyntaxError, ValueError, RecursionError):
        return []
    imported: list[Imported] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            names = tuple(alias.name for alias in node.names if alias.name != "*")
            imported.append(Imported(node.module or "", node.level, names))
        elif isinstance(node, ast.Import):
            imported += [Imported(alias.name) for alias in node.names]
    return imported
