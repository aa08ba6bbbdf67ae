"""Greedy generation that drafts its next tokens from its own prompt and verifies them in one
decode ("speculative edits", prompt lookup decoding).

A next edit rewrites a region the prompt already holds, so most of the answer is a copy of
it. Written a token per decode, each token costs a pass over the weights; a pass over several
tokens costs less per token (on one CPU core about half). So the tokens that followed the same
place in the prompt are drafted, and the last token written and the draft are decoded
together, with logits at each of their positions (and nowhere else: the prompt is read as
usual, with logits for its last token alone). The model's own greedy choice at each position
keeps the draft up to the first token it would not have written, and that choice is the next
token: the answer is the greedy answer in fewer decodes (up to rounding: decodes of other
widths round differently, which can tip a choice the model weighs evenly).

The draft follows the copy: after a kept token it continues from where that token was found in
the prompt; after a token of the model's own it is found again by the last few tokens written,
first ahead of the last place copied from (a rewrite runs forward through its region), else
anywhere. On one CPU core a decode costs about 20 ms more per token in it (40 ms for one, 119
for 4, 322 for 13, 337 for 16: `bench/README.md`), so a draft pays only when most of it is kept:
after a draft refused early the next decode writes one token alone, and the draft grows back,
doubling, as drafts are kept whole.

It works on llama-cpp-python's `Llama` through its low-level API, and leaves the `Llama`'s
record of what its KV cache holds (`input_ids`, `n_tokens`) true, so the next request reuses
the prefix as after any other generation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llama_cpp import Llama, llama_batch

MAX_DRAFT_TOKENS = 15
FIRST_DRAFT_TOKENS = 4  # after a decode without a draft
KEPT_TO_GO_ON = 3  # a draft refused before this many were kept: the next decode has none
MATCH_TOKENS = 3  # the longest run of last tokens written that is looked up in the prompt


@dataclass(slots=True)
class CopyStats:
    """What a generation decoded: `decodes` passes wrote `tokens` tokens, `drafted` tokens were
    proposed and `kept` of them were the model's own choice; `rejoined` answers ended where
    they copied the rest of what they rewrite (`rejoin`)."""

    decodes: int = 0
    tokens: int = 0
    drafted: int = 0
    kept: int = 0
    rejoined: int = 0

    def add(self, other: CopyStats) -> None:
        self.decodes += other.decodes
        self.tokens += other.tokens
        self.drafted += other.drafted
        self.kept += other.kept
        self.rejoined += other.rejoined


class PromptLookup:
    """Drafts from `prompt` the tokens that follow the copy under way."""

    def __init__(self, prompt: Sequence[int]) -> None:
        self._prompt = list(prompt)
        self._at: int | None = None  # where the next copied token is, in the prompt
        self._last = 0  # just after the last place copied from

    def wrote(self, written: Sequence[int]) -> None:
        """The answer so far is `written` (its last token just added)."""
        token = written[-1]
        at = self._at
        if at is not None and at < len(self._prompt) and self._prompt[at] == token:
            self._at = at + 1
        else:
            self._at = self._find(written)
        if self._at is not None:
            self._last = self._at

    def draft(self, count: int) -> list[int]:
        if self._at is None:
            return []
        return self._prompt[self._at : self._at + count]

    def _find(self, written: Sequence[int]) -> int | None:
        """Just after the last `MATCH_TOKENS` (or fewer, down to 2) tokens written, where the
        prompt holds them: the first place at or after the last copy, else the last place."""
        for size in range(min(MATCH_TOKENS, len(written)), 1, -1):
            tail = list(written[-size:])
            found = _occurrences(self._prompt, tail)
            if not found:
                continue
            ahead = [end for end in found if end >= self._last]
            return ahead[0] if ahead else found[-1]
        return None


def _occurrences(tokens: list[int], run: list[int]) -> list[int]:
    """Each index just after an occurrence of `run` in `tokens`, in order."""
    first, size = run[0], len(run)
    ends: list[int] = []
    start = 0
    while True:
        try:
            index = tokens.index(first, start)
        except ValueError:
            return ends
        if tokens[index : index + size] == run and index + size < len(tokens):
            ends.append(index + size)
        start = index + 1


def generate(
    llm: Llama,
    prompt: Sequence[int],
    *,
    max_tokens: int,
    stop: threading.Event,
    is_end: Callable[[int], bool],
    stats: CopyStats | None = None,
) -> Iterator[int]:
    """The greedy answer to `prompt`, a token at a time, drafting from the prompt.

    All of `prompt` but its last token must already be in the KV cache (`prompt_steps`). Ends
    after `max_tokens`, at a token `is_end` accepts (not yielded), or once `stop` is set."""
    import llama_cpp
    import numpy as np

    stats = stats if stats is not None else CopyStats()
    lookup = PromptLookup(prompt)
    n_vocab = llm.n_vocab()
    batch = llama_cpp.llama_batch_init(MAX_DRAFT_TOKENS + 1, 0, 1)
    try:
        written: list[int] = []
        pending = prompt[-1]  # written (or read) and not yet decoded
        n_past = len(prompt) - 1
        draft_size = MAX_DRAFT_TOKENS
        while len(written) < max_tokens and not stop.is_set():
            room = min(max_tokens - len(written), llm.n_ctx() - n_past) - 1
            if room < 0:
                return
            draft = lookup.draft(min(draft_size, room))
            tokens = [pending, *draft]
            _fill(batch, tokens, n_past)
            _forget_from(llm, n_past)
            if llama_cpp.llama_decode(llm.ctx, batch) != 0:
                raise RuntimeError("llama_decode failed")
            llm.input_ids[n_past : n_past + len(tokens)] = tokens
            stats.decodes += 1
            stats.drafted += len(draft)
            kept = 0
            for index in range(len(tokens)):
                logits = np.ctypeslib.as_array(
                    llama_cpp.llama_get_logits_ith(llm.ctx, index), shape=(n_vocab,)
                )
                choice = int(logits.argmax())
                if is_end(choice):
                    llm.n_tokens = n_past + index + 1
                    return
                written.append(choice)
                lookup.wrote(written)
                stats.tokens += 1
                yield choice
                if len(written) >= max_tokens or stop.is_set():
                    llm.n_tokens = n_past + index + 1
                    return
                if index < len(draft) and draft[index] == choice:
                    kept += 1
                    stats.kept += 1
                    continue
                break
            # The pending token and the kept draft are in the cache; the last choice is not.
            n_past += 1 + kept
            llm.n_tokens = n_past
            pending = written[-1]
            draft_size = _next_draft_size(draft_size, len(draft), kept)
    finally:
        llama_cpp.llama_batch_free(batch)


def _next_draft_size(size: int, drafted: int, kept: int) -> int:
    if not drafted:
        return max(size, FIRST_DRAFT_TOKENS)
    if kept == drafted:
        return min(MAX_DRAFT_TOKENS, size * 2)
    return kept + 1 if kept >= KEPT_TO_GO_ON else 0


def _fill(batch: llama_batch, tokens: Sequence[int], n_past: int) -> None:
    """`batch` holds `tokens` at positions from `n_past` on, each with its logits."""
    batch.n_tokens = len(tokens)
    for index, token in enumerate(tokens):
        batch.token[index] = token
        batch.pos[index] = n_past + index  # type: ignore[call-overload]  # typed as nested
        batch.seq_id[index][0] = 0
        batch.n_seq_id[index] = 1
        batch.logits[index] = True


def _forget_from(llm: Llama, position: int) -> None:
    """Drop what the KV cache holds from `position` on: a refused draft's entries."""
    llm._ctx.kv_cache_seq_rm(0, position, -1)
