"""The context store: what the server has seen of the workspace, ready to join a prompt.

Fed by document events (opened, changed, saved, closed) and completion positions, which only
note what to gather: the chunking, the privacy judgement of every chunk, and the reading and
parsing of imported files happen on a worker thread once typing pauses, and their results are
applied on the event loop. A keystroke only ranks what is already gathered (`ranked`).

It holds a ring of chunks of the files the person opens and edits, the ranges recently edited,
and, for Python, the definitions of the names each open document imports from workspace files.
Only `file:` documents inside the workspace folders contribute, and no chunk that the privacy
guard rules out: not one of a sensitive file, not one holding a secret.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from lsp_server.backends.base import ContextChunk
from lsp_server.context.chunks import Chunk
from lsp_server.context.gather import DocumentEvent, Gathered, Gatherer
from lsp_server.context.identifiers import identifiers
from lsp_server.context.parsed_modules import ParsedModules
from lsp_server.context.ranking import prompt_chunks, rank
from lsp_server.context.recent_edits import RecentEdits
from lsp_server.context.ring import ChunkRing
from lsp_server.context.settings import ContextSettings
from lsp_server.context.workspace import WorkspaceFolders, file_path
from lsp_server.privacy.guard import PrivacyGuard

log = logging.getLogger(__name__)

_MAX_LINES_PER_EVENT = 4  # chunk positions one pending event accumulates

K = TypeVar("K")
V = TypeVar("V")


class ContextStore:
    def __init__(
        self,
        privacy: PrivacyGuard,
        settings: ContextSettings | None = None,
        *,
        enabled: Callable[[], bool] = lambda: True,
    ) -> None:
        """`enabled` reads `[routing] context` in force; off, the store holds nothing."""
        self.privacy = privacy
        self.settings = settings or ContextSettings()
        self._enabled = enabled
        self._folders = WorkspaceFolders()
        self.ring = ChunkRing(self.settings.ring_chunks, self.settings.evict_similarity)
        self.edits = RecentEdits(self.settings.recent_edits)
        self._definitions: OrderedDict[str, tuple[Chunk, ...]] = OrderedDict()
        self._imports: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self._sources: OrderedDict[str, frozenset[str]] = OrderedDict()
        self._paths: OrderedDict[str, str] = OrderedDict()
        self._open_texts: OrderedDict[str, str] = OrderedDict()  # by real path
        self._real_paths: OrderedDict[str, str] = OrderedDict()  # by URI
        self._pending: dict[str, DocumentEvent] = {}
        self._given: OrderedDict[str, _Given] = OrderedDict()  # by URI
        self._parsed = ParsedModules()
        self._worker: ThreadPoolExecutor | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._running: set[asyncio.Future[list[Gathered]]] = set()
        # Counts the changes of what `ranked` and `workspace_path` read, for work done ahead.
        self.revision = 0

    @property
    def enabled(self) -> bool:
        return self._enabled()

    # -- feeding: cheap, called from document events -----------------------------------------

    def set_workspace_folders(self, uris: Sequence[str]) -> None:
        self._folders = WorkspaceFolders(uris)
        self.revision += 1

    def opened(self, uri: str, text: str, language: str) -> None:
        """A document was opened: a chunk of its top, and its imports' definitions."""
        self._note(uri, text, language, chunk_line=0, fresh_imports=True, delay_s=0.0)

    def changed(self, uri: str, text: str, language: str, line: int) -> None:
        """The person edited `line`: a chunk and a recent edit around it, once typing pauses."""
        self._note(uri, text, language, chunk_line=line, edit_line=line)

    def saved(self, uri: str, text: str, language: str) -> None:
        """Saved: its imports' definitions are read again, and so are those of the documents
        that import from it (a signature may have changed)."""
        self._note(uri, text, language, fresh_imports=True, delay_s=0.0)
        real = self._real_path(uri)
        for importer, sources in list(self._sources.items()):
            importer_real = self._real_path(importer)
            if importer == uri or real not in sources or importer_real is None:
                continue
            importer_text = self._open_texts.get(importer_real)
            if importer_text is not None:
                self._note(importer, importer_text, "", fresh_imports=True, delay_s=0.0)

    def completion_at(self, uri: str, text: str, language: str, window: tuple[int, int]) -> None:
        """A suggestion was asked with the prompt window on `text[window[0]:window[1]]`: the
        chunks just above and below the window join the ring, as llama.vim does."""
        if not self.enabled or len(text) > self.settings.max_document_chars:
            return
        first, after_last = _line_span(text, window)
        half = self.settings.chunk_lines // 2
        above, below = first - half - 1, after_last + half
        if above >= 0:
            self._note(uri, text, language, chunk_line=above)
        if below < text.count("\n", window[1]) + after_last:
            self._note(uri, text, language, chunk_line=below)

    def closed(self, uri: str) -> None:
        """Its definitions go; chunks already in the ring stay, as recently seen code."""
        self.revision += 1
        self._pending.pop(uri, None)
        for table in (self._definitions, self._imports, self._sources):
            table.pop(uri, None)
        real = self._real_path(uri)
        if real is not None:
            self._open_texts.pop(real, None)
        self._real_paths.pop(uri, None)
        self._given.pop(uri, None)

    # -- the keystroke path ------------------------------------------------------------------

    def ranked(
        self, uri: str, text: str, window: tuple[int, int], offset: int, budget_tokens: int
    ) -> tuple[ContextChunk, ...]:
        """The chunks for a prompt at `offset` in `uri`, best first, within `budget_tokens`.
        `window` is the prompt window's (start, end) offsets: recent edits of this document
        that overlap it would repeat it, and are left out; so are the ring's chunks of this
        document, wherever they lie: its text reaches the prompt through the window, and a
        model reading another part of the same file tends to echo it (a backend's window may
        also be smaller than the request's)."""
        if budget_tokens <= 0 or len(text) > self.settings.max_document_chars or not self.enabled:
            return ()
        first_line, after_last = _line_span(text, window)
        before, after = self.settings.cursor_chars_before, self.settings.cursor_chars_after
        cursor = text[max(0, offset - before) : offset + after]

        def repeats_window(chunk: Chunk) -> bool:
            return (
                chunk.uri == uri and chunk.start_line < after_last and first_line < chunk.end_line
            )

        candidates = [
            *self._definitions.get(uri, ()),
            *(chunk for chunk in self.ring if chunk.uri != uri),
            *(chunk for chunk in self.edits if not repeats_window(chunk)),
        ]
        given = self._given.get(uri)
        sticky_lines = self.settings.sticky_lines
        if given is not None and given.still_fits(
            first_line, budget_tokens, candidates, sticky_lines
        ):
            return given.chunks
        ranked = rank(candidates, identifiers(cursor))
        limit = self.settings.max_prompt_chunks
        chosen = prompt_chunks(ranked, budget_tokens, limit, text[window[0] : window[1]])
        given = _Given(first_line, budget_tokens, chosen)
        _put(self._given, uri, given, self.settings.max_documents)
        return chosen

    def workspace_path(self, uri: str) -> str:
        """The document's path relative to its workspace folder, once gathered; else ""."""
        return self._paths.get(uri, "")

    def status(self) -> dict[str, int | bool]:
        """What it holds, for `gatewayLs.status`: counts only, never content."""
        return {
            "enabled": self.enabled,
            "chunks": len(self.ring),
            "recent_edits": len(self.edits),
            "definitions": sum(len(chunks) for chunks in self._definitions.values()),
            "modules_parsed": self._parsed.parses,
            "gathering": len(self._pending) + len(self._running),
        }

    # -- configuration and life cycle --------------------------------------------------------

    def reconfigure(self) -> None:
        """The configuration changed: turned off, everything goes; else what has become
        sensitive (new globs) goes."""
        self.revision += 1
        if not self.enabled:
            self.clear()
            return
        verdicts: dict[str, bool] = {}

        def now_sensitive(chunk: Chunk) -> bool:
            if chunk.uri not in verdicts:
                verdicts[chunk.uri] = self.privacy.excerpt_reason(chunk.uri, "") is not None
            return verdicts[chunk.uri]

        self.ring.drop(now_sensitive)
        self.edits.drop(now_sensitive)
        for uri, chunks in list(self._definitions.items()):
            self._definitions[uri] = tuple(c for c in chunks if not now_sensitive(c))

    def clear(self) -> None:
        self.revision += 1
        self.ring.drop(lambda _chunk: True)
        self.edits.drop(lambda _chunk: True)
        for table in (self._definitions, self._imports, self._sources, self._open_texts):
            table.clear()
        self._pending.clear()

    async def settled(self) -> None:
        """Return once everything noted so far is gathered and applied."""
        if self._timer is not None:
            self._timer.cancel()
            self._flush()
        while self._running:
            await asyncio.gather(*tuple(self._running), return_exceptions=True)

    def gather_now(self) -> None:
        """Gather what is noted, on this thread (no event loop: a benchmark, a test)."""
        events = self._take_pending()
        for gathered in self._gatherer().gather_all(events):
            self._apply(gathered)

    async def aclose(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for future in tuple(self._running):
            future.cancel()
        if self._worker is not None:
            self._worker.shutdown(wait=False, cancel_futures=True)

    # -- inside ------------------------------------------------------------------------------

    def _note(
        self,
        uri: str,
        text: str,
        language: str,
        *,
        chunk_line: int | None = None,
        edit_line: int | None = None,
        fresh_imports: bool = False,
        delay_s: float | None = None,
    ) -> None:
        if not self.enabled or len(text) > self.settings.max_document_chars:
            return
        real = self._real_path(uri)
        if real is None:
            return
        if len(text) <= self.settings.max_file_bytes:
            _put(self._open_texts, real, text, self.settings.max_documents)
        pending = self._pending.get(uri)
        chunk_lines = pending.chunk_lines if pending else ()
        edit_lines = pending.edit_lines if pending else ()
        if chunk_line is not None:
            chunk_lines = (*chunk_lines, chunk_line)[-_MAX_LINES_PER_EVENT:]
        if edit_line is not None:
            edit_lines = (*edit_lines, edit_line)[-_MAX_LINES_PER_EVENT:]
        fresh = fresh_imports or (pending is not None and pending.known_imports is None)
        known = None if fresh else self._imports.get(uri)
        self._pending[uri] = DocumentEvent(uri, text, language, chunk_lines, edit_lines, known)
        self._schedule(self.settings.settle_s if delay_s is None else delay_s)

    def _real_path(self, uri: str) -> str | None:
        """The real path of a `file:` document, remembered (a keystroke makes no system call)."""
        real = self._real_paths.get(uri)
        if real is None:
            path = file_path(uri)
            if path is None:
                return None
            real = os.path.realpath(path)
            _put(self._real_paths, uri, real, self.settings.max_documents)
        return real

    def _schedule(self, delay_s: float) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no event loop: the caller gathers with `gather_now`
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_later(delay_s, self._flush)

    def _flush(self) -> None:
        self._timer = None
        events = self._take_pending()
        if not events:
            return
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="gateway-ls-context")
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._worker, self._gatherer().gather_all, events)
        self._running.add(future)
        future.add_done_callback(self._applied)

    def _applied(self, future: asyncio.Future[list[Gathered]]) -> None:
        self._running.discard(future)
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:
            log.warning("gathering context failed: %s", error, exc_info=error)
            return
        if not self.enabled:
            return
        for gathered in future.result():
            self._apply(gathered)

    def _take_pending(self) -> list[DocumentEvent]:
        events = list(self._pending.values())
        self._pending.clear()
        return events

    def _gatherer(self) -> Gatherer:
        open_texts = dict(self._open_texts)
        return Gatherer(self.privacy, self._folders, self.settings, open_texts, self._parsed)

    def _apply(self, gathered: Gathered) -> None:
        if gathered.path is None:
            return
        self.revision += 1
        limit = self.settings.max_documents
        _put(self._paths, gathered.uri, gathered.path, limit)
        for chunk in gathered.ring:
            self.ring.add(chunk)
        for chunk in gathered.edits:
            self.edits.add(chunk)
        if gathered.definitions is not None:
            _put(self._definitions, gathered.uri, gathered.definitions, limit)
            _put(self._imports, gathered.uri, gathered.imports, limit)
            _put(self._sources, gathered.uri, gathered.sources, limit)


@dataclass(frozen=True, slots=True)
class _Given:
    """What `ranked` gave a document last. The same again while the prompt window starts
    within `sticky_lines` of where it did and every chunk is still held: the prompt's start
    then stays the same from one keystroke to the next, and a model's KV cache (or a
    provider's prompt cache) reuses it, where a ranking that moved with every character, or
    a chunk gathered meanwhile, would make the model read the whole prompt again."""

    first_line: int
    budget_tokens: int
    chunks: tuple[ContextChunk, ...]

    def still_fits(
        self, first_line: int, budget_tokens: int, held: Sequence[Chunk], sticky_lines: int
    ) -> bool:
        if not self.chunks or budget_tokens != self.budget_tokens:
            return False
        if abs(first_line - self.first_line) > sticky_lines:
            return False
        texts = {(chunk.path, chunk.text) for chunk in held}
        return all((chunk.path, chunk.text) in texts for chunk in self.chunks)


def _line_span(text: str, window: tuple[int, int]) -> tuple[int, int]:
    """The lines `text[start:end]` is on: (first, after the last)."""
    start, end = window
    first = text.count("\n", 0, start)
    return first, first + text.count("\n", start, end) + 1


def _put(table: OrderedDict[K, V], key: K, value: V, limit: int) -> None:
    """Set `key` as the most recent entry, dropping the oldest beyond `limit`."""
    table[key] = value
    table.move_to_end(key)
    while len(table) > limit:
        table.popitem(last=False)
