"""Gathering, off the keystroke path: a document event in, the chunks and definitions it yields
out, every one judged by the privacy guard. Pure but for reading files inside the workspace,
so it runs on a worker thread."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lsp_server.context.chunks import Chunk, ChunkKind, lines_around
from lsp_server.context.parsed_modules import ParsedModules
from lsp_server.context.python_definitions import Definition
from lsp_server.context.python_imports import import_statements, imports_of
from lsp_server.context.settings import ContextSettings
from lsp_server.context.workspace import WorkspaceFolders, file_path
from lsp_server.privacy.guard import PrivacyGuard

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DocumentEvent:
    """A document as it is now, and the lines that are worth a chunk."""

    uri: str
    text: str
    language: str
    chunk_lines: tuple[int, ...] = ()  # a ring chunk around each
    edit_lines: tuple[int, ...] = ()  # a recent-edit chunk around each
    # The import statements the kept definitions were read for; the same again: not re-read.
    known_imports: tuple[str, ...] | None = None


@dataclass(slots=True)
class Gathered:
    uri: str
    path: str | None = None  # relative to its folder; None: it contributes nothing
    ring: list[Chunk] = field(default_factory=list)
    edits: list[Chunk] = field(default_factory=list)
    definitions: tuple[Chunk, ...] | None = None  # None: the kept ones stand
    imports: tuple[str, ...] = ()
    sources: frozenset[str] = frozenset()  # real paths the definitions were read from


class Gatherer:
    def __init__(
        self,
        privacy: PrivacyGuard,
        folders: WorkspaceFolders,
        settings: ContextSettings,
        open_texts: Mapping[str, str],
        parsed: ParsedModules,
    ) -> None:
        """`open_texts`: open documents' texts by real path, read before the disk; `parsed`:
        the modules parsed before (used from one thread at a time)."""
        self.privacy = privacy
        self.folders = folders
        self.settings = settings
        self.open_texts = open_texts
        self.parsed = parsed

    def gather_all(self, events: list[DocumentEvent]) -> list[Gathered]:
        gathered: list[Gathered] = []
        for event in events:
            try:
                gathered.append(self.gather(event))
            except Exception:  # one document's trouble never stops the others' context
                log.exception("gathering context from %s failed", event.uri)
        return gathered

    def gather(self, event: DocumentEvent) -> Gathered:
        gathered = Gathered(event.uri)
        path = file_path(event.uri)
        relative = self.folders.relative(path) if path is not None else None
        if path is None or relative is None or not self._shareable(event.uri):
            return gathered
        gathered.path = relative
        size = self.settings
        for line in event.chunk_lines:
            chunk = self._chunk(event, relative, line, size.chunk_lines, ChunkKind.FILE)
            if chunk is not None:
                gathered.ring.append(chunk)
        for line in event.edit_lines:
            chunk = self._chunk(event, relative, line, size.edit_lines, ChunkKind.EDIT)
            if chunk is not None:
                gathered.edits.append(chunk)
        if event.language == "python" or path.suffix == ".py":
            statements = import_statements(event.text)
            if statements != event.known_imports:
                gathered.imports = statements
                gathered.definitions, gathered.sources = self._definitions(path, statements)
        return gathered

    def _shareable(self, uri: str, excerpt: str = "", document: str = "") -> bool:
        return self.privacy.may_join(uri, excerpt, document)

    def _chunk(
        self, event: DocumentEvent, relative: str, line: int, lines: int, kind: int
    ) -> Chunk | None:
        start, text = lines_around(event.text, line, lines)
        if not text.strip() or len(text) > self.settings.max_chunk_chars:
            return None
        if not self._shareable(event.uri, text, event.text):
            return None
        return Chunk.of(event.uri, relative, start, text, kind)

    def _definitions(
        self, path: Path, statements: tuple[str, ...]
    ) -> tuple[tuple[Chunk, ...], frozenset[str]]:
        """The definitions of what `statements` import from files inside the workspace."""
        found: list[Chunk] = []
        sources: set[str] = set()
        reads = [0]  # files opened so far, against `max_import_files`

        def take(module_path: Path, names: tuple[str, ...], via: str = "") -> set[str]:
            """Keep the definitions of `names` (none: all) in a module, reached through the
            module's name `via` if given; the names it has."""
            if reads[0] >= self.settings.max_import_files or not module_path.is_file():
                return set()
            reads[0] += 1
            module = self._module(module_path)
            if module is None:
                return set()
            real, relative, definitions = module
            sources.add(real)
            uri = Path(real).as_uri()
            for name in names or tuple(definitions):
                definition = definitions.get(name)
                # The module's path was judged in `_module`; each definition's text is here.
                if definition is not None and self.privacy.may_join(uri, definition.text):
                    found.append(_definition_chunk(uri, relative, definition, via))
            return set(definitions)

        for imported in imports_of(statements):
            parts = imported.module.split(".") if imported.module else []
            for base in self._bases(imported.level, path):
                target = base.joinpath(*parts)
                module_file = target.with_suffix(".py") if parts else None
                # `import package.module`: its names are reached as `module.name`.
                via = "" if imported.names or not parts else parts[-1]
                if module_file is not None and module_file.is_file():
                    held = take(module_file, imported.names, via)
                else:
                    held = take(target / "__init__.py", imported.names, via)
                submodules = [name for name in imported.names if name not in held]
                for name in submodules:  # `from package import module`
                    if take(target / f"{name}.py", (), via=name):
                        held.add(name)
                if held:
                    break  # the first folder that holds the module is where it comes from
        return tuple(found[: self.settings.max_definitions]), frozenset(sources)

    def _bases(self, level: int, path: Path) -> list[Path]:
        """Where an import of `path` may start: for a relative one, its package; for an
        absolute one, the workspace folders (and their `src`), then the folders above the
        file up to its workspace folder, nearest first (a package whose root is deeper than
        the workspace folder, as in a repository of several projects)."""
        if level:
            base = path.parent
            for _ in range(level - 1):
                base = base.parent
            return [base]
        roots = self.folders.roots
        above: list[Path] = []
        for folder in Path(os.path.realpath(path)).parents:
            if not any(folder.is_relative_to(root) for root in roots):
                break
            above.append(folder)
        # A workspace folder is also a folder above the file: each is tried once.
        return list(dict.fromkeys([*roots, *(root / "src" for root in roots), *above]))

    def _module(self, module_path: Path) -> tuple[str, str, dict[str, Definition]] | None:
        """(real path, relative path, definitions) of a module file inside the workspace that
        is not sensitive and parses; None otherwise."""
        if not module_path.is_file():
            return None
        real = os.path.realpath(module_path)
        relative = self.folders.relative(module_path)
        if relative is None or not self._shareable(module_path.as_uri()):
            return None
        text = self.open_texts.get(real)
        if text is None:
            text = self.folders.read(module_path, self.settings.max_file_bytes)
        if text is None or len(text) > self.settings.max_file_bytes:
            return None
        definitions = self.parsed.definitions(real, text)
        return None if definitions is None else (real, relative, definitions)


def _definition_chunk(uri: str, relative: str, definition: Definition, via: str) -> Chunk:
    chunk = Chunk.of(uri, relative, definition.line, definition.text, ChunkKind.DEFINITION)
    return Chunk(
        chunk.uri,
        chunk.path,
        chunk.start_line,
        chunk.text,
        chunk.kind,
        name=definition.name,
        module=via,
        words=chunk.words,
        tokens=chunk.tokens,
    )
