"""The refactor prompt: the selection, its surroundings within a budget, and the ask."""

from __future__ import annotations

import pytest

from lsp_server.backends.base import ChatMessage
from lsp_server.refactor.prompt import (
    CONTEXT_BUDGET_CHARS,
    READY_INSTRUCTIONS,
    SELECTION_END,
    SELECTION_START,
    build_refactor_messages,
)

pytestmark = pytest.mark.unit

_PYTHON = '''"""Shapes."""

import math
from dataclasses import dataclass

SCALE = 2


def helper():
    return 1


@dataclass
class Circle:
    radius: float

    @property
    def area(self) -> float:
        value = math.pi * self.radius * self.radius
        return value * SCALE

    def describe(self) -> str:
        return f"circle {self.radius}"


def far_away():
    return "unrelated code"
'''


def _messages(
    document: str,
    selected: str,
    language: str = "python",
    *,
    context_budget: int = CONTEXT_BUDGET_CHARS,
) -> tuple[ChatMessage, ...]:
    start = document.index(selected)
    return build_refactor_messages(
        document_text=document,
        selection_start=start,
        selection_end=start + len(selected),
        language=language,
        path="src/shapes.py",
        instruction="Use ** for the square.",
        context_budget=context_budget,
    )


def test_system_then_user_message_with_the_ask() -> None:
    system, user = _messages(_PYTHON, "value = math.pi * self.radius * self.radius")
    assert (system.role, user.role) == ("system", "user")
    assert "only" in system.content and "fenced code block" in system.content
    assert "src/shapes.py" in user.content
    assert "Language: python" in user.content
    assert "Instruction: Use ** for the square." in user.content
    assert "```python block" in user.content


def test_selection_is_marked_inside_its_enclosing_python_method() -> None:
    _, user = _messages(_PYTHON, "value = math.pi * self.radius * self.radius")
    text = user.content
    marked = f"{SELECTION_START}value = math.pi * self.radius * self.radius{SELECTION_END}"
    assert marked in text
    assert "    @property\n    def area(self) -> float:" in text
    assert "return value * SCALE" in text
    assert "`class Circle:`" in text  # the scope the method lives in
    assert "def describe" not in text  # the rest of the class is not the enclosing definition
    assert "far_away" not in text


def test_imports_come_from_the_top_of_the_file() -> None:
    _, user = _messages(_PYTHON, "value = math.pi * self.radius * self.radius")
    assert "import math\nfrom dataclasses import dataclass" in user.content
    assert "Top of the file (lines 1–4)" in user.content


def test_other_languages_get_a_window_of_lines_within_the_budget() -> None:
    lines = [f"const value{n} = compute({n});" for n in range(400)]
    document = "import { compute } from './compute';\n" + "\n".join(lines) + "\n"
    _, user = _messages(document, "const value200 = compute(200);", "typescript")
    text = user.content
    assert "import { compute } from './compute';" in text
    assert "const value199 = compute(199);" in text and "const value201" in text
    assert "const value0 = compute(0);" not in text and "const value399" not in text
    assert "```typescript" in text


def test_the_budget_bounds_the_prompt_but_never_cuts_the_selection() -> None:
    body = "".join(f"    total += item_{n}\n" for n in range(2000))
    document = f"import os\n\n\ndef huge():\n    total = 0\n{body}    return total\n"
    selected = "    total += item_1000\n    total += item_1001\n"
    _, user = _messages(document, selected, context_budget=2000)
    assert len(user.content) < 2000 + len(selected) + 1500
    assert f"{SELECTION_START}{selected}{SELECTION_END}" in user.content


def test_module_level_python_selection_uses_a_window() -> None:
    _, user = _messages(_PYTHON, "SCALE = 2")
    assert f"{SELECTION_START}SCALE = 2{SELECTION_END}" in user.content
    assert "def helper" in user.content


def test_backticks_in_the_document_do_not_break_the_fence() -> None:
    document = 'DOC = """\n```python\nx = 1\n```\n"""\n\nvalue = 1\n'
    _, user = _messages(document, "value = 1")
    assert "````python" in user.content


def test_a_selection_outside_the_document_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        build_refactor_messages(
            document_text="x = 1\n",
            selection_start=2,
            selection_end=99,
            language="python",
            path="a.py",
            instruction="Simplify",
        )


def test_ready_instructions_are_titled_code_actions() -> None:
    titles = [title for title, _ in READY_INSTRUCTIONS]
    assert titles == ["Extract function", "Add type hints", "Simplify", "Add docstrings"]
    assert all(instruction.endswith(".") for _, instruction in READY_INSTRUCTIONS)
