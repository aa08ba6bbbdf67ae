"""The package's layers (docs/architecture.md, "Layers"): imports flow from the front doors
down to the backends, never up and never sideways between parts of one layer."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "lsp_server"

# Lower numbers sit higher; a module may import only from parts below its own.
LAYERS: dict[str, int] = {
    "__main__": -1,
    "cli": 0,
    "lsp": 1,
    "gateway": 1,
    "core": 2,
    "suggest": 3,
    "refactor": 3,
    "chat": 3,
    "nextedit": 3,
    "routing": 4,
    "context": 4,
    "limits": 4,
    "backends": 5,
    "privacy": 5,
    "config": 6,
    # Shared vocabulary and small helpers at the top of the package, below everything.
    "reasons": 7,
    "failures": 7,
    "progress": 7,
    "loopback": 7,
    "event_loop": 7,
    "text_edits": 7,
    "json_codec": 7,
    "__init__": 7,
}


def part_of(module: Path) -> str:
    relative = module.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def imported_parts(module: Path) -> set[str]:
    tree = ast.parse(module.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name.split(".")[1] for name in names if name.startswith("lsp_server.") and "." in name}


def test_every_part_has_a_layer() -> None:
    parts = {part_of(module) for module in PACKAGE.rglob("*.py")}
    assert parts <= set(LAYERS), f"give these a layer: {sorted(parts - set(LAYERS))}"


def test_imports_flow_down() -> None:
    wrong = []
    for module in sorted(PACKAGE.rglob("*.py")):
        part = part_of(module)
        for imported in imported_parts(module):
            if imported != part and LAYERS[imported] <= LAYERS[part]:
                wrong.append(f"{module.relative_to(PACKAGE)} imports lsp_server.{imported}")
    assert not wrong, "\n".join(wrong)


TESTS = Path(__file__).resolve().parent


def test_test_modules_import_helpers_from_tests_support_only() -> None:
    """A helper two test modules share lives in tests/support; importing it from another test
    module runs that module's fixtures and ties the two together."""
    offenders = []
    for module in TESTS.rglob("test_*.py"):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                package, _, name = node.module.rpartition(".")
                if package.startswith("tests") and name.startswith("test_"):
                    offenders.append(f"{module.relative_to(TESTS)} imports {node.module}")
    assert not offenders, "\n".join(offenders)
