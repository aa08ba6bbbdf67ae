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
    for node in tree.body:
        for name, text in _shown(node):
            found.setdefault(name, Definition(name, node.lineno - 1, text))
    return found


def _shown(node: ast.stmt) -> list[tuple[str, str]]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return [(node.name, _function(node, ""))]
    if isinstance(node, ast.ClassDef):
        return [(node.name, _class(node))]
    if isinstance(node, ast.Assign | ast.AnnAssign):
        text = ast.unparse(node)
        if len(text) > MAX_ASSIGNMENT_CHARS:
            return []
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [(t.id, text + "\n") for t in targets if isinstance(t, ast.Name)]
    return []


def _function(node: ast.FunctionDef | ast.AsyncFunctionDef, indent: str) -> str:
    keyword = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    head = f"{indent}{keyword} {node.name}({ast.unparse(node.args)}){returns}:"
    return head + "\n" + _body_line(node, indent + "    ")


def _class(node: ast.ClassDef) -> str:
    bases = [ast.unparse(b) for b in node.bases] + [ast.unparse(k) for k in node.keywords]
    head = f"class {node.name}({', '.join(bases)}):" if bases else f"class {node.name}:"
    doc = _docstring_line(node)
    lines = [head + "\n"]
    if doc:
        lines.append(f'    """{doc}"""\n')
    methods = [
        item
        for item in node.body
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
        and (item.name == "__init__" or not item.name.startswith("_"))
    ]
    for method in methods[: MAX_METHODS + 1]:
        lines.append(_function(method, "    "))
    if len(lines) == 1:
        lines.append("    ...\n")
    return "".join(lines)


def _body_line(node: ast.FunctionDef | ast.AsyncFunctionDef, indent: str) -> str:
    doc = _docstring_line(node)
    return f'{indent}"""{doc}"""\n' if doc else f"{indent}...\n"


def _docstring_line(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
    doc = ast.get_docstring(node)
    if not doc:
        return ""
    return doc.strip().splitlines()[0].replace('"""', "'''")
