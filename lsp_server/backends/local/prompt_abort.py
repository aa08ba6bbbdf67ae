"""Abandoning a long prompt evaluation inside llama.cpp when a request no longer wants it."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llama_cpp import Llama


class PromptAbort:
    """Lets llama.cpp abandon a long prompt evaluation as soon as `stop` is set.

    Armed only until the first token: from then on generation stops between tokens anyway, and
    a Python callback at every graph node would cost throughput and contend for the GIL.
    Batches evaluated before an abort stay in the KV cache and serve the next request.
    """

    def __init__(self, llm: Llama, stop: threading.Event) -> None:
        import llama_cpp

        self._llama_cpp = llama_cpp
        self._ctx = llm.ctx
        self._callback = llama_cpp.ggml_abort_callback(lambda _data: stop.is_set())
        self._armed = False

    def __enter__(self) -> PromptAbort:
        self._llama_cpp.llama_set_abort_callback(self._ctx, self._callback, None)
        self._armed = True
        return self

    def __exit__(self, *_exc: object) -> None:
        self.disarm()

    def disarm(self) -> None:
        if self._armed:
            self._armed = False
            no_callback = self._llama_cpp.ggml_abort_callback()
            self._llama_cpp.llama_set_abort_callback(self._ctx, no_callback, None)
