"""The store's knobs: llama.vim's ring by default, and the caps that bound what it reads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ContextSettings:
    chunk_lines: int = 64  # lines of a ring chunk
    ring_chunks: int = 16  # chunks the ring keeps
    evict_similarity: float = 0.9  # a new chunk evicts kept ones more alike than this
    edit_lines: int = 16  # lines around a recent edit
    recent_edits: int = 8  # recent edits kept
    max_file_bytes: int = 256 * 1024  # a larger file is neither read nor parsed
    # A larger open document neither contributes context nor gets any (a log, a data dump).
    max_document_chars: int = 1024 * 1024
    max_chunk_chars: int = 8 * 1024  # a longer chunk (minified code) is left out
    max_import_files: int = 16  # files read for one document's imports
    max_definitions: int = 48  # definitions kept for one document
    max_documents: int = 64  # documents whose definitions and text are kept
    max_prompt_chunks: int = 24  # chunks one request carries, before any budget
    # Characters around the cursor the ranking compares chunks with (about 48 lines of code).
    cursor_chars_before: int = 2400
    cursor_chars_after: int = 800
    settle_s: float = 0.25  # an edit is gathered once typing pauses this long
    # A document keeps the chunks it was given while its prompt window moves this little.
    sticky_lines: int = 16
