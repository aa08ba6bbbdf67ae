"""The LSP reference: the methods and commands the server registers, each with its handler's
first docstring paragraph."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from lsprotocol.types import METHOD_TO_TYPES

from docgen.markdown import GENERATED, code, summary, table
from lsp_server.config.model import Config
from lsp_server.lsp.server import create_server


def registrations() -> tuple[Mapping[str, Callable[..., Any]], Mapping[str, Callable[..., Any]]]:
    """The server's features and commands as pygls holds them once registered."""
    server = create_server(Config(), watch_config=False)
    manager = server.protocol.fm
    return dict(manager.features), dict(manager.commands)


def _original(handler: Callable[..., Any]) -> Callable[..., Any]:
    """The function registered: pygls holds it bound to the server in a `partial`, or, for a
    coroutine, in a closure of its own that sets no `__wrapped__`."""
    if isinstance(handler, functools.partial):
        return _original(handler.func)
    for cell in getattr(handler, "__closure__", None) or ():
        if inspect.isfunction(cell.cell_contents):
            return _original(cell.cell_contents)
    return handler


def _meaning(name: str, handler: Callable[..., Any]) -> str:
    words = summary(_original(handler).__doc__)
    if not words:
        raise ValueError(f"the handler of {name} has no docstring to document it by")
    return words


def lsp_page(
    features: Mapping[str, Callable[..., Any]] | None = None,
    commands: Mapping[str, Callable[..., Any]] | None = None,
) -> str:
    if features is None or commands is None:
        features, commands = registrations()
    methods = [
        (code(name), "LSP" if name in METHOD_TO_TYPES else "gateway-ls", _meaning(name, handler))
        for name, handler in sorted(features.items())
    ]
    command_rows = [
        (code(name), _meaning(name, handler)) for name, handler in sorted(commands.items())
    ]
    return "".join(
        [
            "# LSP methods and commands\n\n",
            GENERATED,
            "\nWhat `gateway-ls serve` registers. *LSP*: a method of the protocol; *gateway-ls*: "
            "one of its own or another server's it speaks. See [The LSP methods](../lsp.md).\n",
            "\n## Methods\n\n",
            table(("method", "from", "what the server does"), methods),
            "\n## Commands (`workspace/executeCommand`)\n\n",
            table(("command", "what it does"), command_rows),
        ]
    )
