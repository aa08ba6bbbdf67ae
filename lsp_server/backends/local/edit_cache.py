"""The next edits' KV cache, kept apart from the keystrokes'.

One `Llama` has one KV cache, and the next request reuses only the longest prefix it shares
with what the cache holds. A next edit's prompt (its chat template: the system prompt, the
recent edits, the region) shares nothing with a keystroke's (fill in the middle), so a
keystroke between two next edits made the second read its whole prompt again (500 tokens:
11.7 s on one core, against 4.5 s when the cache held it), and each next edit made the next
keystroke read its prompt again. So the state of the cache is put aside around a next edit:
the keystrokes' before it, put back after it; the edit's own prompt after it, put back before
the next edit where it shares more of that edit's prompt than the cache does. The answer
written is not kept (no prompt holds it). A state is the sequence's KV cells copied out with
llama.cpp's state API, about 12 KB a token for Qwen2.5-Coder 0.5B, at most the context window.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llama_cpp import Llama

_SEQ = 0  # llama-cpp-python's one sequence


@dataclass(frozen=True, slots=True)
class Saved:
    """The KV state of `tokens`, of the model `llm`."""

    llm: Llama
    tokens: tuple[int, ...]
    data: ctypes.Array[ctypes.c_uint8]


def save(llm: Llama, upto: int | None = None) -> Saved | None:
    """The state of what the cache holds (the first `upto` tokens of it); None when empty.
    The cells past `upto` are dropped from the cache."""
    import llama_cpp

    held = llm.n_tokens if upto is None else min(upto, llm.n_tokens)
    if held <= 0:
        return None
    llm._ctx.kv_cache_seq_rm(_SEQ, held, -1)
    llm.n_tokens = held
    size = llama_cpp.llama_state_seq_get_size(llm.ctx, _SEQ)
    data = (ctypes.c_uint8 * size)()
    if llama_cpp.llama_state_seq_get_data(llm.ctx, data, size, _SEQ) == 0:
        return None
    return Saved(llm, tuple(llm.input_ids[:held].tolist()), data)


def restore(llm: Llama, saved: Saved) -> bool:
    """Make the cache hold `saved` instead of what it holds; False (the cache then empty)
    when llama.cpp refuses it."""
    import llama_cpp

    llm._ctx.kv_cache_seq_rm(_SEQ, -1, -1)
    llm.n_tokens = 0
    if saved.llm is not llm:
        return False
    if llama_cpp.llama_state_seq_set_data(llm.ctx, saved.data, len(saved.data), _SEQ) == 0:
        llm._ctx.kv_cache_seq_rm(_SEQ, -1, -1)
        return False
    held = len(saved.tokens)
    llm.input_ids[:held] = saved.tokens
    llm.n_tokens = held
    return True
