"""Editor suggestions and gateway completions on the local model, and the read-ahead of their
prompts.

Consecutive keystrokes in one document share most of their prompt; llama-cpp-python keeps the KV
cache of the previous evaluation and re-evaluates only the tokens after the longest common
prefix. The worker's counters (`last_reused_tokens`) measure how much was reused. `prefill` does
that evaluation ahead of time, while the model is idle (a document opened or edited), as
llama.vim and llama.vscode do: the next request pays only for what changed since. A prefill
never delays a request: one that is queued when a request comes is dropped, one that is running
stops within a graph node (`prompt_abort`) and keeps the steps it read (`prompt_steps`). A
keystroke that finds less of its prompt read than it can read in time has its prompt cut to fit
(`pace`, `prompt_fit`).

The prompt is written by `prompt`; an editor's suggestion is shaped for a CPU
(`completion_text`): on a line of indentation alone the prompt ends at the line's start, and a
suggestion stops growing by lines once it has had its time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from lsp_server.backends.base import (
    CompletionRequest,
    Usage,
)
from lsp_server.backends.local.completion_text import (
    LeadingBlanks,
    LineTime,
    indent_to_heal,
    more_lines_seconds,
)
from lsp_server.backends.local.job import Job
from lsp_server.backends.local.prompt_abort import PromptAbort
from lsp_server.backends.local.prompt_steps import STEP_TOKENS, cached_tokens, read_prompt
from lsp_server.backends.local.worker import ModelWorker
from lsp_server.backends.local_model import LocalState
from lsp_server.permit import Permit

if TYPE_CHECKING:
    from llama_cpp import Llama

log = logging.getLogger(__name__)


# A request stopped after this share of `local.deadline_ms` was stopped by the deadline.
DEADLINE_REACHED = 0.95


class CompletionRunner(ModelWorker):
    """`complete` and `prefill`: a keystroke's suggestion, its prompt read ahead."""

    async def complete(
        self, request: CompletionRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        await self.ensure_loaded()
        for job in self._next_edits:
            # A keystroke goes first: a next edit takes seconds on a CPU and the keystroke
            # would queue behind it on the one worker. Stopped, its cut region is dropped.
            job.stop.set()
        started = time.monotonic()
        first_text_s: float | None = None
        ended = False
        try:
            async for text in self._stream(lambda job: self._run_completion(job, request), usage):
                if isinstance(text, str):
                    if first_text_s is None and text:
                        first_text_s = time.monotonic() - started
                    yield text
            ended = True
        finally:
            elapsed_s = time.monotonic() - started
            self._keep_count(elapsed_s, first_text_s)
            self._note_first_keystroke(request, ended=ended, elapsed_s=elapsed_s)

    def _note_first_keystroke(
        self, request: CompletionRequest, *, ended: bool, elapsed_s: float
    ) -> None:
        """Count an editor's keystroke that ended by itself or ran its whole budget."""
        if not request.path or request.client_max_tokens or self._preset is None:
            return
        cut = not ended and elapsed_s >= self._config.deadline_ms / 1000 * DEADLINE_REACHED
        if ended or cut:
            self.first_keystrokes.record(self._preset.name, request.path, cut=cut)

    def _keep_count(self, elapsed_s: float, first_text_s: float | None) -> None:
        """Tell the chooser of `auto` how the deadline was kept (an answer, or a request that
        ran its whole budget without one; one stopped sooner was superseded: no verdict) and
        how fast the model reads and writes now."""
        if self._auto is None:
            return
        if first_text_s is not None:
            self._auto.answered(first_text_s)
        elif elapsed_s >= self._config.deadline_ms / 1000 * DEADLINE_REACHED:
            self._auto.missed()
        live = self._pace.speed()
        if live is not None:
            self._auto.observed(live)

    def prefill(self, request: CompletionRequest) -> bool:
        """Evaluate `request`'s prompt into the KV cache in the background if the model is
        idle; False if it was busy or not loaded. Whatever it evaluated before a request
        stopped it stays cached."""
        if self._state == LocalState.LOADING and not self._closed and self._config.read_ahead:
            # Read once loaded: the last place asked for is where the first keystroke will be.
            self._after_load = (request, asyncio.get_running_loop())
            return True
        if self._state != LocalState.READY or self._closed:
            return False
        if any(not job.stop.is_set() for job in self._jobs):
            return False  # a request is under way (one told to stop is ending: queue behind it)
        return self._start_prefill(lambda j: self._run_prefill(j, request))

    def _run_completion(self, job: Job, request: CompletionRequest) -> None:
        llm = self._require_model()
        # `local.max_tokens` sizes editor suggestions; a gateway client's explicit ask is honoured.
        cap = request.max_tokens if request.client_max_tokens else self._config.max_tokens
        max_tokens = max(1, min(request.max_tokens, cap, llm.n_ctx() // 2))
        prompt = self._prompt_in_time(llm, request, max_tokens)
        if not prompt:
            return
        self._record_prompt(job, list(llm.eval_tokens), prompt)
        stop = list(request.stop)
        if request.single_line and "\n" not in stop:
            stop.append("\n")

        prompt_abort = PromptAbort(llm, job.stop)
        first_token_at: float | None = None

        def after_token(ids: Any, _logits: Any) -> bool:
            nonlocal first_token_at
            prompt_abort.disarm()
            if first_token_at is None:
                first_token_at = time.perf_counter()
            # `ids` holds the prompt and every sampled token but the newest; llama-cpp-python
            # calls this once per token and once more at the end, hence the max().
            self._count_tokens(job, max(job.completion_tokens, len(ids) - len(prompt) + 1))
            return job.stop.is_set()

        from llama_cpp import StoppingCriteriaList

        unindent = LeadingBlanks(len(indent_to_heal(request)))
        more_lines_s = more_lines_seconds(self._config.deadline_ms)
        lines = LineTime(None if request.client_max_tokens else more_lines_s)

        def text_of(chunk: Any) -> str:
            text, enough = lines.feed(unindent.drop(chunk["choices"][0]["text"]))
            if enough:
                job.stop.set()  # the generation ends after this piece; what it wrote stands
            return text

        with prompt_abort:
            if len(prompt) - cached_tokens(llm, prompt) > STEP_TOKENS:
                # Read in steps first: a request stopped by its deadline keeps what it read.
                read_prompt(llm, prompt, job.stop, self._pace.read)
                if job.stop.is_set():
                    return
            chunks = llm.create_completion(
                prompt,
                max_tokens=max_tokens,
                temperature=request.temperature,
                stop=stop,
                stream=True,
                stopping_criteria=StoppingCriteriaList([after_token]),
            )
            self._pump(job, chunks, text_of)
        if not job.stop.is_set() and (last_line := lines.rest()):
            job.send(last_line)  # the generation ended by itself: its last line is complete
        if first_token_at is not None:
            self._pace.wrote(job.completion_tokens - 1, time.perf_counter() - first_token_at)

    def _prompt_in_time(self, llm: Llama, request: CompletionRequest, max_tokens: int) -> list[int]:
        """The prompt for `request`; when the KV cache lacks more of it than can be read
        within `local.deadline_ms` at the model's pace, one cut to fit (`prompt_fit`).
        A gateway client's explicit `max_tokens` asks for its prompt as sent."""
        prompts = self._require_prompts()
        prompt = prompts.build(request, max_tokens)
        if not prompt or request.client_max_tokens:
            return prompt
        affordable = self._pace.affordable_tokens(self._config.deadline_ms)
        cached = cached_tokens(llm, prompt)
        if affordable is None or len(prompt) - cached <= affordable:
            return prompt
        fitted = prompts.fit(prompt, cached, affordable)
        log.debug(
            "local prompt: %d tokens, %d read ahead, %d more fit the deadline: %d tokens",
            len(prompt),
            cached,
            affordable,
            len(fitted),
        )
        return fitted

    def _run_prefill(self, job: Job, request: CompletionRequest) -> None:
        """The prompt a completion at this position would evaluate: the next request finds it
        in the KV cache, all of it or as many steps as were read before it came."""
        llm = self._require_model()
        max_tokens = max(1, min(request.max_tokens, self._config.max_tokens, llm.n_ctx() // 2))
        prompt = self._require_prompts().build(request, max_tokens)
        if not prompt:
            return
        self.prefills += 1

        def on_step(tokens: int, seconds: float) -> None:
            self.tokens_read_ahead += tokens
            self._pace.read(tokens, seconds)

        with PromptAbort(llm, job.stop):
            read_prompt(llm, prompt, job.stop, on_step)
