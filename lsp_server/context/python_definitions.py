"""The definitions of names, as a prompt shows them: a signature and the first line of its
docstring (a class: its signature, docstring line and method signatures), read with `ast`."""

from __future__ import annotations

import ast
from dataclasses import dataclass

MAX_METHODS = 8  # of a class, besides __init__
MAX_ASSIGNMENT_CHARS = 200  # a module constant longer than this is left out


@dataclass(frozen=True, slots=True)
class Definition:
    name: str
    line: int  # 0-based
    text: str


def module_definitions(source: str) -> dict[str, Definition] | None:
    """Every top-level definition of a module by name; None if it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    found: dict[str, Definition] = {}
    lines = source.splitlines()
    for node in tree.body:
        for name, text in _shown(node, lines):
            found.setdefault(name, Definition(name, node.lineno - 1, text))
    return found


def _shown(node: ast.stmt, lines: list[str]) -> list[tuple[str, str]]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return [(node.name, _function(node, "", lines))]
    if isinstance(node, ast.ClassDef):
        return [(node.name, _class(node, lines))]
    if isinstance(node, ast.Assign | ast.AnnAssign):
        text = ast.unparse(node)
        if len(text) > MAX_ASSIGNMENT_CHARS:
            return []
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [(t.id, text + "\n") for t in targets if isinstance(t, ast.Name)]
    return []


def _function(node: ast.FunctionDef | ast.AsyncFunctionDef, indent: str, lines: list[str]) -> str:
    return _signature(node, indent, lines) + _body_line(node, indent + "    ")


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef, indent: str, lines: list[str]) -> str:
    """The signature as the file writes it (its own spacing and line breaks), re-indented;
    rebuilt from the tree when the body shares its line."""
    first, body = node.lineno - 1, node.body[0].lineno - 1
    written = lines[first:body]
    if written and written[-1].rstrip().endswith(":"):
        margin = len(written[0]) - len(written[0].lstrip())
        return "".join(indent + line[margin:].rstrip() + "\n" for line in written)
    keyword = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return f"{indent}{keyword} {node.name}({ast.unparse(node.args)}){returns}:\n"


def _class(node: ast.ClassDef, lines: list[str]) -> str:
    bases = [ast.unparse(b) for b in node.bases] + [ast.unparse(k) for k in node.keywords]
    head = f"class {node.name}({', '.join(bases)}):" if bases else f"class {node.name}:"
    doc = _docstring_line(node)
    shown = [head + "\n"]
    if doc:
        shown.append(f'    """{doc}"""\n')
    methods = [
        item
        for item in node.body
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
        and (item.name == "__init__" or not item.name.startswith("_"))
    ]
    for method in methods[: MAX_METHODS + 1]:
        shown.append(_function(method, "    ", lines))
    if len(shown) == 1:
        shown.append("    ...\n")
    return "".join(shown)


def _body_line(node: ast.FunctionDef | ast.AsyncFunctionDef, indent: str) -> str:
    doc = _docstring_line(node)
    return f'{indent}"""{doc}"""\n' if doc else f"{indent}...\n"


def _docstring_line(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
    doc = ast.get_docstring(node)
    if not doc:
        return ""
    return doc.strip().splitlines()[0].replace('"""', "'''")
