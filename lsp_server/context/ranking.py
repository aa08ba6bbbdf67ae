"""Ranking on the keystroke path: the gathered chunks by their similarity to the text around
the cursor (Jaccard over identifiers), the definitions of names used there first, cut to a
token budget. Ranking a ring of a few dozen chunks costs tens of microseconds."""

from __future__ import annotations

from collections.abc import Iterable

from lsp_server.backends.base import ContextChunk
from lsp_server.context.chunks import Chunk, ChunkKind
from lsp_server.context.identifiers import jaccard

# A definition of a name the cursor's text uses outranks every chunk that only looks alike;
# one reached through a module the cursor's text uses (`errors.` near the cursor) comes next.
_USED_NAME_BONUS = 2.0
_USED_MODULE_BONUS = 1.0
_SMALLEST_TOKENS = 8  # no chunk costs less (its file's name line): a budget below it is spent
_ORDER_STRIDE = 10**12  # kinds apart in prompt order; within a kind, oldest first


def rank(candidates: Iterable[Chunk], cursor_words: frozenset[str]) -> list[Chunk]:
    """Candidates best first; those with nothing in common with the cursor's text are left out."""
    scored: list[tuple[float, int, Chunk]] = []
    for chunk in candidates:
        score = jaccard(chunk.words, cursor_words)
        if chunk.kind == ChunkKind.DEFINITION:
            if chunk.name in cursor_words and not chunk.module:
                score += _USED_NAME_BONUS
            elif chunk.module in cursor_words:
                score += _USED_MODULE_BONUS
        if score > 0:
            scored.append((score, chunk.sequence, chunk))
    scored.sort(key=lambda item: (-item[0], -item[1]))
    return [chunk for _, _, chunk in scored]


def prompt_chunks(
    ranked: Iterable[Chunk], budget_tokens: int, max_chunks: int, window: str = ""
) -> tuple[ContextChunk, ...]:
    """The best chunks that fit `budget_tokens` together, best first, each with its place in a
    prompt: definitions, then file chunks, then recent edits, each kind oldest first. A chunk
    whose text the prompt `window` already holds (a copy of the file, say) says nothing new,
    and a small model tends to echo it: it is left out."""
    chosen: list[ContextChunk] = []
    left = budget_tokens
    for chunk in ranked:
        if len(chosen) >= max_chunks or left < _SMALLEST_TOKENS:
            break
        if chunk.tokens <= left and chunk.text.strip() not in window:
            order = chunk.kind * _ORDER_STRIDE + chunk.sequence
            chosen.append(ContextChunk(chunk.path, chunk.text, order=order))
            left -= chunk.tokens
    return tuple(chosen)
