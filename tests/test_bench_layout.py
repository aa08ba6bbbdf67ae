"""The benchmarks' layout (bench/README.md): each runs as `python -m bench.NAME`, shares what it
shares through `bench/harness/`, and imports no other benchmark."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

BENCH = Path(__file__).resolve().parents[1] / "bench"


def imported_modules(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_no_benchmark_imports_another() -> None:
    wrong = []
    for module in sorted(BENCH.rglob("*.py")):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        for name in imported_modules(tree):
            parts = name.split(".")
            if parts[0] == "bench" and any(part.startswith("bench_") for part in parts[1:]):
                wrong.append(f"{module.relative_to(BENCH)} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_no_benchmark_edits_the_import_path() -> None:
    wrong = []
    for module in sorted(BENCH.rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "path"
                and isinstance(node.value, ast.Name)
                and node.value.id == "sys"
            ):
                wrong.append(f"{module.relative_to(BENCH)}:{node.lineno}")
    assert not wrong, "sys.path used in " + ", ".join(wrong)
