"""Next edits on the local model: on the next edits' own KV state (`edit_cache`), drafted from the
prompt (`copy_decoding`), on every core while that reads faster (`edit_threads`); a next
edit asked with stop sequences is a chat.
"""

from __future__ import annotations

import codecs
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING

from lsp_server.backends.base import (
    EditCall,
    Usage,
)
from lsp_server.backends.local import copy_decoding, edit_cache
from lsp_server.backends.local.chat_messages import (
    own_template_prompt,
)
from lsp_server.backends.local.chat_runner import ChatRunner
from lsp_server.backends.local.edit_threads import EditThreads
from lsp_server.backends.local.job import Job
from lsp_server.backends.local.machine_fit import threads_used
from lsp_server.backends.local.prompt_abort import PromptAbort
from lsp_server.backends.local.prompt_steps import cached_tokens, read_prompt
from lsp_server.backends.local.rejoin import rest_of_answer
from lsp_server.backends.local_model import LocalState
from lsp_server.config.model import LOCAL_CHAT_MAX_TOKENS
from lsp_server.permit import Permit

if TYPE_CHECKING:
    from llama_cpp import Llama

log = logging.getLogger(__name__)


class NextEditRunner(ChatRunner):
    """`edit` and `prefill_edit`."""

    def edit(
        self, call: EditCall, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        if call.prompt is not None:
            return super().edit(call, usage, permit=permit)  # refused: the local model only chats
        return self._edit(call, usage)

    async def _edit(self, call: EditCall, usage: Usage | None) -> AsyncIterator[str]:
        await self.ensure_loaded()
        reading = self._edit_reading
        keep = reading[1] if reading is not None and reading[0] == call else None
        async for text in self._stream(
            lambda job: self._run_edit(job, call), usage, self._next_edits, keep=keep
        ):
            if isinstance(text, str):
                yield text

    def prefill_edit(self, call: EditCall) -> bool:
        """Read a next edit's prompt ahead, as `prefill` does a keystroke's, if the model is
        idle and would answer `call` on its own template; False otherwise."""
        if self._state != LocalState.READY or self._closed or call.prompt is not None:
            return False
        if call.stop or any(not job.stop.is_set() for job in self._jobs):
            return False
        return self._start_prefill(lambda j: self._run_edit_prefill(j, call), edit=call)

    def _run_edit(self, job: Job, call: EditCall) -> None:
        """A next edit: the chat answer, greedy, with its copy of the region drafted from the
        prompt (`copy_decoding`) where the prompt is the model's own template's and no stop
        sequence is asked for (else through the chat completion, one token a decode); on every
        core while they read faster than the configured threads (`edit_threads`)."""
        llm = self._require_model()
        prompt = None if call.stop else own_template_prompt(llm, call.messages)
        if prompt is None:
            self._run_chat(job, call.as_chat())
            return
        if len(prompt) >= llm.n_ctx():
            raise ValueError(f"the prompt's {len(prompt)} tokens fill the context window")
        max_tokens = min(call.max_tokens, LOCAL_CHAT_MAX_TOKENS, llm.n_ctx() // 2)
        stats = copy_decoding.CopyStats()

        def write() -> None:
            stats.add(self._write_edit(job, llm, prompt, max_tokens, call.rewrites))

        threads = self._edit_on_its_cache(job, llm, prompt, write)
        self.copying.add(stats)
        log.debug(
            "local edit: %d tokens in %d decodes, %d of %d drafted kept, %d threads",
            stats.tokens,
            stats.decodes,
            stats.kept,
            stats.drafted,
            threads,
        )

    def _run_edit_prefill(self, job: Job, call: EditCall) -> None:
        """A next edit's prompt read ahead into the next edits' own KV state (`edit_cache`):
        the request that comes for it, or for any prompt that begins the same, reads only
        the rest. A request stops it; what it read by then is kept."""
        llm = self._require_model()
        prompt = own_template_prompt(llm, call.messages)
        if prompt is None or len(prompt) >= llm.n_ctx():
            return
        self.prefills += 1
        self._edit_on_its_cache(job, llm, prompt, None)

    def _edit_on_its_cache(
        self, job: Job, llm: Llama, prompt: list[int], write: Callable[[], None] | None
    ) -> int:
        """Read `prompt` on the next edits' KV state, then `write` (if any) while the prompt's
        reading is still under way or done; the keystrokes' state is put back after. Returns
        the threads it ran on."""
        aside = self._edit_cache_in(llm, prompt)
        if write is not None:
            self._record_prompt(job, list(llm.eval_tokens), prompt)
        configured = threads_used(self._config)
        threads = EditThreads(
            llm,
            configured=configured,
            cores=self._edit_cores if self._core_verdict.allowed() else configured,
            configured_tps=self._pace.prompt_tps,
            configured_read=self._pace.read,
        )

        def on_step(tokens: int, seconds: float) -> None:
            if write is None:
                self.tokens_read_ahead += tokens
            threads.on_step(tokens, seconds)

        try:
            with threads:
                with PromptAbort(llm, job.stop):
                    read_prompt(llm, prompt, job.stop, on_step)
                if write is not None and not job.stop.is_set():
                    write()
        finally:
            if threads.fell_back:
                self._core_verdict.slower()
            # What it read of its prompt (a stop before any keeps the last edit's).
            self._edit_saved = edit_cache.save(llm, len(prompt) - 1) or self._edit_saved
            if aside is not None:
                edit_cache.restore(llm, aside)
        return threads.threads

    def _edit_cache_in(self, llm: Llama, prompt: Sequence[int]) -> edit_cache.Saved | None:
        """Give the cache the last next edit's prompt where that shares more of `prompt` than
        the cache does (`edit_cache`); the keystrokes' state it held, put aside, if any."""
        live = cached_tokens(llm, prompt)
        aside = edit_cache.save(llm) if live == 0 else None  # else an edit's: not kept
        saved = self._edit_saved
        if saved is not None and llm.longest_token_prefix(saved.tokens, prompt) > live:
            edit_cache.restore(llm, saved)
        return aside

    def _write_edit(
        self, job: Job, llm: Llama, prompt: list[int], max_tokens: int, rewrites: str | None
    ) -> copy_decoding.CopyStats:
        """The answer, drafted; where it rewrites `rewrites`, it ends once it copies the rest,
        which is sent as it stands (`rejoin`)."""
        import llama_cpp

        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        stats = copy_decoding.CopyStats()
        answer = ""
        for token in copy_decoding.generate(
            llm,
            prompt,
            max_tokens=max_tokens,
            stop=job.stop,
            is_end=lambda token: bool(llama_cpp.llama_vocab_is_eog(vocab, token)),
            stats=stats,
        ):
            self._count_tokens(job, job.completion_tokens + 1)
            piece = text.decode(llm.detokenize([token]))
            if not piece:
                continue
            job.send(piece)
            if rewrites is None:
                continue
            answer += piece
            rest = rest_of_answer(answer, rewrites) if "\n" in piece else None
            if rest is not None:
                job.send(rest)
                stats.rejoined += 1
                break
        return stats
