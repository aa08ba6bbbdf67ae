"""Reading Python for context: the imports of a file mid-edit, and definitions as a prompt
shows them."""

from __future__ import annotations

from pathlib import Path

import pytest

from lsp_server.backends.base import ContextChunk
from lsp_server.config.model import RoutingConfig
from lsp_server.context.python_definitions import module_definitions
from lsp_server.context.python_imports import Imported, import_statements, imports_of
from lsp_server.context.store import ContextStore
from lsp_server.privacy.guard import PrivacyGuard

pytestmark = pytest.mark.unit


def test_imports_are_read_from_a_file_that_does_not_parse() -> None:
    source = (
        "import os.path\n"
        "from .models import (\n    Order,\n    Invoice,  # billed\n)\n"
        "from ..util import helper as h\n"
        "from pkg import *\n"
        "def broken(:\n"
        "    import late_inside  # not top level\n"
    )
    assert imports_of(import_statements(source)) == [
        Imported("os.path"),
        Imported("models", 1, ("Order", "Invoice")),
        Imported("util", 2, ("helper",)),
        Imported("pkg", 0, ()),
    ]


def test_definitions_keep_the_written_signature_and_one_docstring_line() -> None:
    source = (
        "import attr\n\n"
        "RATE: float = 0.2\n"
        "LONG = " + repr("x" * 300) + "\n\n"
        "@attr.s\n"
        "async def fetch(\n    url: str,\n    *,\n    retries: int = 3,  # enough\n) -> bytes:\n"
        '    """Fetch it.\n\n    Details.\n    """\n'
        "def one_line(x): return x\n"
    )
    definitions = module_definitions(source)
    assert definitions is not None
    assert definitions["RATE"].text == "RATE: float = 0.2\n"
    assert "LONG" not in definitions
    assert definitions["fetch"].text == (
        "async def fetch(\n    url: str,\n    *,\n    retries: int = 3,  # enough\n) -> bytes:\n"
        '    """Fetch it."""\n'
    )
    assert definitions["one_line"].text == "def one_line(x):\n    ...\n"
    assert module_definitions("def broken(:\n") is None


def context_at_end(root: Path, main: Path, text: str) -> tuple[ContextChunk, ...]:
    """The chunks a prompt at the end of `text`, open as `main` in workspace `root`, gets."""
    config = RoutingConfig()
    store = ContextStore(PrivacyGuard(lambda: config))
    store.set_workspace_folders([root.as_uri()])
    store.opened(main.as_uri(), text, "python")
    store.gather_now()
    return store.ranked(main.as_uri(), text, (0, len(text)), len(text), 4000)


def test_relative_and_package_imports_resolve_inside_the_workspace(tmp_path: Path) -> None:
    package = tmp_path / "app"
    package.mkdir()
    (package / "__init__.py").write_text("def make_app(name: str):\n    ...\n")
    (package / "models.py").write_text("class Order:\n    def total(self) -> int: ...\n")
    main = package / "views.py"
    text = "from . import make_app, models\nfrom .models import Order\n\nOrder().tot"
    chunks = context_at_end(tmp_path, main, text)
    paths = {chunk.path for chunk in chunks}
    assert paths == {"app/__init__.py", "app/models.py"}
    assert any("def total(self) -> int:" in chunk.text for chunk in chunks)


def test_an_absolute_import_resolves_from_a_package_deeper_than_the_workspace(
    tmp_path: Path,
) -> None:
    """A repository of several projects: `services/billing/invoices/...` imports
    `invoices.models`, whose root is `services/billing`, not the workspace folder."""
    package = tmp_path / "services" / "billing" / "invoices"
    package.mkdir(parents=True)
    (package / "models.py").write_text("class Invoice:\n    def total(self) -> int: ...\n")
    main = package / "views.py"
    text = "from invoices import models\n\nmodels.Invoice().tot"
    chunks = context_at_end(tmp_path, main, text)
    assert [chunk.path for chunk in chunks] == ["services/billing/invoices/models.py"]


def test_a_module_imported_twice_is_parsed_once(tmp_path: Path) -> None:
    (tmp_path / "shared.py").write_text("def common_helper(x):\n    ...\n")
    config = RoutingConfig()
    store = ContextStore(PrivacyGuard(lambda: config))
    store.set_workspace_folders([tmp_path.as_uri()])
    for name in ("a.py", "b.py"):
        store.opened((tmp_path / name).as_uri(), "from shared import common_helper\n", "python")
    store.gather_now()
    store.saved((tmp_path / "a.py").as_uri(), "from shared import common_helper\n", "python")
    store.gather_now()
    status = store.status()
    assert status["definitions"] == 2 and status["modules_parsed"] == 1
