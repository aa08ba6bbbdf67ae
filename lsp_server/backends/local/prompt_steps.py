"""Reading a prompt into the KV cache a few tokens at a time, so that a stopped read keeps what
it read.

llama-cpp-python evaluates a prompt in batches of `n_batch` (512) and records the tokens of a
batch only once the whole batch has been evaluated; a read abandoned inside a batch keeps
nothing. On one CPU core a batch of 512 tokens takes seconds, and a read-ahead is stopped by
every request, so most of it would be lost. Read in steps of `STEP_TOKENS` instead, every step
is kept: the next read (a request, or the read-ahead once the model is idle again) starts where
this one stopped. Small steps cost little throughput on a CPU (bench/README.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llama_cpp import Llama

STEP_TOKENS = 64


def cached_tokens(llm: Llama, prompt: Sequence[int]) -> int:
    """How many of `prompt`'s first tokens the KV cache holds."""
    from llama_cpp import Llama

    held: int = Llama.longest_token_prefix(llm.input_ids[: llm.n_tokens].tolist(), prompt)
    return held


def read_prompt(
    llm: Llama,
    prompt: Sequence[int],
    stop: threading.Event,
    on_step: Callable[[int, float], None] | None = None,
) -> int:
    """Evaluate all but the last token of `prompt` that the KV cache lacks, `STEP_TOKENS` at a
    time, until done or `stop` is set; returns the tokens evaluated.

    The last token is left to the generation, which needs its logits (llama-cpp-python
    evaluates it again when the whole prompt is cached). `on_step(tokens, seconds)` hears
    how long each step took. An abort inside a step (`PromptAbort`) raises from llama.cpp;
    the steps before it stay cached."""
    end = len(prompt) - 1
    start = min(cached_tokens(llm, prompt), max(end, 0))
    llm.n_tokens = start  # `eval` drops whatever the cache holds past this point
    read = 0
    for begin in range(start, end, STEP_TOKENS):
        if stop.is_set():
            break
        step = prompt[begin : min(begin + STEP_TOKENS, end)]
        started = time.perf_counter()
        llm.eval(step)
        read += len(step)
        if on_step is not None:
            on_step(len(step), time.perf_counter() - started)
    return read
