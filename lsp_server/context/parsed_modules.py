"""Definitions of modules already parsed, by file and text: a module is parsed once per
version, however many documents import it and however often they are gathered (parsing holds
the interpreter lock, and the event loop waits that long)."""

from __future__ import annotations

from collections import OrderedDict

from lsp_server.context.python_definitions import Definition, module_definitions


class ParsedModules:
    def __init__(self, capacity: int = 128) -> None:
        self.capacity = capacity
        self._parsed: OrderedDict[tuple[str, int, int], dict[str, Definition] | None] = (
            OrderedDict()
        )
        self.parses = 0

    def definitions(self, real_path: str, text: str) -> dict[str, Definition] | None:
        """`module_definitions(text)`, parsed only if this text of this file is new."""
        key = (real_path, len(text), hash(text))
        if key in self._parsed:
            self._parsed.move_to_end(key)
            return self._parsed[key]
        self.parses += 1
        definitions = self._parsed[key] = module_definitions(text)
        while len(self._parsed) > self.capacity:
            self._parsed.popitem(last=False)
        return definitions
