"""The in-process llama.cpp model (llama-cpp-python), for offline and sensitive work.

One `Llama` instance serves every request, and it is not thread-safe, so all model work (loading
and generation) runs on one dedicated worker thread, one job at a time, in the order submitted.
That single thread is the lock: a job still queued when its request is cancelled never runs, and
the next job starts only after the current one has really returned. Tokens reach the event loop
through an `asyncio.Queue` fed with `call_soon_threadsafe` (`job`); cancelling the consuming
task sets a stop flag the worker checks after every token.

Consecutive keystrokes in one document share most of their prompt; llama-cpp-python keeps the
KV cache of the previous evaluation and re-evaluates only the tokens after the longest common
prefix. The counters below measure how much was reused. `prefill` does that evaluation ahead of
time, while the model is idle (a document opened or edited), as llama.vim and llama.vscode do:
the next request pays only for what changed since. A prefill never delays a request: one that
is queued when a request comes is dropped, one that is running stops within a graph node
(`prompt_abort`) and keeps the steps it read (`prompt_steps`). A keystroke that finds less of
its prompt read than it can read in time has its prompt cut to fit (`pace`, `prompt_fit`).

The prompt is written by `prompt`; an editor's suggestion is shaped for a CPU
(`completion_text`): on a line of indentation alone the prompt ends at the line's start, and a
suggestion stops growing by lines once it has had its time.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from lsp_server.backends.base import (
    BackendError,
    ChatEvent,
    ChatRequest,
    CompletionRequest,
    EditCall,
    Usage,
)
from lsp_server.backends.bundled_model import (
    INSTALL_HINT,
    ModelUnavailable,
    Progress,
    resolve_model_path,
)
from lsp_server.backends.local import copy_decoding, edit_cache
from lsp_server.backends.local.auto_model import AutoModel
from lsp_server.backends.local.chat_messages import (
    chat_messages,
    own_template_prompt,
    tool_chat_events,
)
from lsp_server.backends.local.completion_text import (
    LeadingBlanks,
    LineTime,
    indent_to_heal,
    more_lines_seconds,
)
from lsp_server.backends.local.edit_threads import CoreVerdict, EditThreads
from lsp_server.backends.local.job import END, Job
from lsp_server.backends.local.loading import load_failure_message, open_model
from lsp_server.backends.local.machine_fit import threads_used
from lsp_server.backends.local.pace import Pace
from lsp_server.backends.local.prompt import CompletionPrompts
from lsp_server.backends.local.prompt_abort import PromptAbort
from lsp_server.backends.local.prompt_steps import STEP_TOKENS, cached_tokens, read_prompt
from lsp_server.backends.local.rejoin import rest_of_answer
from lsp_server.backends.local.tools import (
    handler_messages,
    handler_tool_choice,
    template_is_chatml,
)
from lsp_server.backends.local_model import LocalModel, LocalState
from lsp_server.backends.model_presets import ModelPreset, local_context_tokens, preset_named
from lsp_server.backends.tool_calls import ToolCallStream
from lsp_server.config.model import LOCAL_CHAT_MAX_TOKENS, LOCAL_MODEL_AUTO, LocalConfig
from lsp_server.failures import FailureKind
from lsp_server.permit import Permit

if TYPE_CHECKING:
    from llama_cpp import Llama

T = TypeVar("T")

log = logging.getLogger(__name__)


class LocalBackend(LocalModel):
    """A llama.cpp model inside the server process, loaded lazily on a background thread."""

    def __init__(self, config: LocalConfig, *, on_progress: Progress | None = None) -> None:
        self._config = config
        self._on_progress = on_progress
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gateway-ls-llama")
        self._llm: Llama | None = None
        self._state = LocalState.UNLOADED if config.enabled else LocalState.DISABLED
        self._load_error: str | None = None
        self._load_future: Future[None] | None = None
        self._model_path: Path | None = None
        self._prompts: CompletionPrompts | None = None  # used on the worker thread only
        self._pace = Pace()  # how fast the loaded model reads and writes; the worker's
        self._fold_system_prompt = False
        self._chat_template = ""
        self._jobs: set[Job] = set()
        # Next edits under way: a keystroke stops them (see `complete`).
        self._next_edits: set[Job] = set()
        self._prefills: set[Job] = set()
        # The next edit's prompt being read ahead, and by which job: its own request lets it
        # finish instead of stopping it (a read stopped inside a step loses that step).
        self._edit_reading: tuple[EditCall, Job] | None = None
        self._edit_cores = os.cpu_count() or 1  # what a next edit may run on (`edit_threads`)
        self._core_verdict = CoreVerdict()
        self._edit_saved: edit_cache.Saved | None = None  # the last next edit's prompt
        self.prefills = 0
        self.tokens_read_ahead = 0
        self._closed = False
        self.tokens_generated = 0
        self.generations = 0
        self.last_prompt_tokens = 0
        self.last_reused_tokens = 0
        self.copying = copy_decoding.CopyStats()  # every next edit's decodes, all told
        self._last_activity = time.monotonic()
        self._idle_stops: set[threading.Event] = set()  # background work a request stops
        self._preset: ModelPreset | None = None
        # The read-ahead asked for while the model was loading, and the loop that asked.
        self._after_load: tuple[CompletionRequest, asyncio.AbstractEventLoop] | None = None
        # `model = "auto"`: the chooser, which calibrates, switches and adapts.
        self._auto = (
            AutoModel(config, self)
            if config.model == LOCAL_MODEL_AUTO and not config.model_path
            else None
        )

    @property
    def state(self) -> LocalState:
        return self._state

    @property
    def load_error(self) -> str | None:
        return self._load_error

    @property
    def model_path(self) -> Path | None:
        """The GGUF file in use, known once loading has resolved it."""
        return self._model_path

    @property
    def pending(self) -> int:
        """Generations submitted and not yet finished, the running one included."""
        return len(self._jobs)

    @property
    def fim_supported(self) -> bool | None:
        """Whether the model has fill-in-the-middle tokens; None until it is loaded."""
        if self._state != LocalState.READY or self._prompts is None:
            return None
        return self._prompts.fim_supported

    @property
    def tools_supported(self) -> bool | None:
        """Whether gateway chat with tools can be served here (`tools`); None while
        that depends on a model not yet loaded."""
        mode = self._config.tool_calls
        if mode != "auto":
            return mode == "chatml"
        return None if self._state != LocalState.READY else template_is_chatml(self._chat_template)

    @property
    def next_edit_supported(self) -> bool | None:
        """A preset's own `next_edit`; a model file of the user's own is asked (their
        choice); None under `model = "auto"` until a preset is loaded."""
        if self._config.model_path:
            return True
        if self._auto is None:
            return preset_named(self._config.model).next_edit
        return (
            None
            if self._state != LocalState.READY or self._preset is None
            else self._preset.next_edit
        )

    @property
    def context_tokens(self) -> int:
        """The configured budget, else the preset's in use (before loading: the one named, or
        for `auto` the bundled default's)."""
        if self._preset is not None or self._config.model_path:
            return local_context_tokens(self._config, self._preset)
        return local_context_tokens(self._config, preset_named(self._config.model))

    # Loading

    def start_loading(self) -> None:
        """Begin loading in the background; does nothing if loading already began."""
        if self._state != LocalState.UNLOADED or self._closed:
            return
        self._state = LocalState.LOADING
        self._load_future = self._worker.submit(self._load, self._progress_forwarder())

    async def ensure_loaded(self) -> None:
        """Wait until the model is ready; raise `BackendError(UNAVAILABLE)` if it cannot be."""
        if self._closed:
            raise BackendError(self.name, FailureKind.UNAVAILABLE, "the local model was closed")
        if self._state == LocalState.DISABLED:
            raise BackendError(
                self.name, FailureKind.UNAVAILABLE, "the local model is disabled ([local] enabled)"
            )
        self.start_loading()
        if self._state == LocalState.LOADING and self._load_future is not None:
            await asyncio.shield(asyncio.wrap_future(self._load_future))
        if self._state != LocalState.READY:
            raise BackendError(self.name, FailureKind.UNAVAILABLE, self._load_error or "not loaded")

    def _progress_forwarder(self) -> Progress | None:
        """Progress is reported on the event loop that asked for loading, if there is one."""
        callback = self._on_progress
        if callback is None:
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return callback

        def forward(message: str, fraction: float | None) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed meanwhile
                loop.call_soon_threadsafe(callback, message, fraction)

        return forward

    def _load(self, progress: Progress | None) -> None:
        try:
            config = self._config
            if self._auto is not None:
                chosen = self._auto.initial()
                if chosen is None:
                    raise ModelUnavailable(f"no local model is installed: {INSTALL_HINT}")
                config = replace(config, model=chosen.name)
            self._model_path = resolve_model_path(config, progress)
            if progress:
                progress(f"loading local model {self._model_path.name}", None)
            preset = None if config.model_path else preset_named(config.model)
            llm = open_model(
                self._model_path, config, chat_format=preset.chat_format if preset else None
            )
            self._adopt(llm, preset)
        except Exception as exc:  # every failure becomes a state with a message, not a crash
            self._load_error = load_failure_message(self._model_path, exc)
            self._state = LocalState.FAILED
            if progress:
                progress(f"local model unavailable: {self._load_error}", 1.0)
            return
        self._state = LocalState.READY
        if progress:
            progress("local model ready", 1.0)
        if self._auto is not None:
            self._auto.start()
        if self._after_load is not None:
            request, loop = self._after_load
            self._after_load = None
            with contextlib.suppress(RuntimeError):  # the loop has closed meanwhile
                loop.call_soon_threadsafe(self.prefill, request)

    def _adopt(self, llm: Llama, preset: ModelPreset | None) -> None:
        """Serve `llm` from now on; on the worker thread."""
        self._llm = llm
        self._preset = preset
        self._fold_system_prompt = preset is not None and preset.fold_system_prompt
        template = llm.metadata.get("tokenizer.chat_template", "")
        self._chat_template = template if isinstance(template, str) else ""
        self._prompts = CompletionPrompts(
            llm, self._config, local_context_tokens(self._config, preset)
        )
        # A calibrated model's pace is known before its first read (then measured as it goes).
        speed = self._auto.calibrated(preset) if self._auto is not None and preset else None
        self._pace = Pace(speed.prompt_tps, speed.generation_tps) if speed else Pace()

    # What the chooser of `model = "auto"` may do (`auto_model.ModelHost`)

    @property
    def closed(self) -> bool:
        return self._closed

    def idle_for(self) -> float:
        if self._jobs or self._prefills:
            return 0.0
        return time.monotonic() - self._last_activity

    def run_when_idle(self, work: Callable[[threading.Event], T]) -> T | None:
        stop = threading.Event()
        self._idle_stops.add(stop)
        try:
            future = self._worker.submit(self._idle_job, work, stop)
        except RuntimeError:  # closed
            self._idle_stops.discard(stop)
            return None
        try:
            return future.result()
        finally:
            self._idle_stops.discard(stop)

    def _idle_job(self, work: Callable[[threading.Event], T], stop: threading.Event) -> T | None:
        if stop.is_set() or self._closed or self._jobs:
            return None
        try:
            return work(stop)
        except Exception:
            log.exception("background work on the local model failed")
            return None

    def switch_to(self, preset: ModelPreset, llm: Llama) -> None:
        try:
            self._worker.submit(self._swap, preset, llm).result()
        except RuntimeError:  # closed meanwhile
            llm.close()

    def _swap(self, preset: ModelPreset, llm: Llama) -> None:
        if self._closed:
            llm.close()
            return
        previous = self._llm
        self._edit_saved = None
        self._adopt(llm, preset)
        self._model_path = Path(llm.model_path)
        if previous is not None:
            previous.close()

    def details(self) -> dict[str, Any]:
        details: dict[str, Any] = {
            "preset": self._preset.name if self._preset else "",
            "prompt_tokens": self.last_prompt_tokens,
            "reused_tokens": self.last_reused_tokens,
            "prefills": self.prefills,
            "read_ahead_tokens": self.tokens_read_ahead,
            "reading_ahead": bool(self._prefills),
        }
        if self._auto is not None:
            details["auto"] = self._auto.status()
        return details

    # Generation

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
        try:
            async for text in self._stream(lambda job: self._run_completion(job, request), usage):
                if isinstance(text, str):
                    if first_text_s is None and text:
                        first_text_s = time.monotonic() - started
                    yield text
        finally:
            self._keep_count(time.monotonic() - started, first_text_s)

    def _keep_count(self, elapsed_s: float, first_text_s: float | None) -> None:
        """Tell the chooser of `auto` how the deadline was kept (an answer, or a request that
        ran its whole budget without one; one stopped sooner was superseded: no verdict) and
        how fast the model reads and writes now."""
        if self._auto is None:
            return
        if first_text_s is not None:
            self._auto.answered(first_text_s)
        elif elapsed_s >= self._config.deadline_ms / 1000 * 0.95:
            self._auto.missed()
        live = self._pace.speed()
        if live is not None:
            self._auto.observed(live)

    async def chat(
        self, request: ChatRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        await self.ensure_loaded()
        async for text in self._stream(lambda job: self._run_chat(job, request), usage):
            if isinstance(text, str):
                yield text

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

    async def chat_events(
        self, request: ChatRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[ChatEvent]:
        if not request.uses_tools:
            async for text in self.chat(request, usage, permit=permit):
                yield text
            return
        await self.ensure_loaded()
        if not self.tools_supported:
            raise BackendError(
                self.name,
                FailureKind.UNSUPPORTED,
                "the local model's chat template has no tool calling "
                '(set [local] tool_calls = "chatml" to use ChatML function calling)',
            )
        calls = ToolCallStream(self.name)
        async for event in self._stream(lambda job: self._run_tool_chat(job, request), usage):
            if isinstance(event, str):
                yield event
                continue
            for piece in calls.feed(
                event.index, id=event.id, name=event.name, arguments=event.arguments
            ):
                yield piece
        for piece in calls.finish():
            yield piece
        if usage is not None and calls.calls():
            usage.finish_reason = "tool_calls"

    def prefill(self, request: CompletionRequest) -> bool:
        """Evaluate `request`'s prompt into the KV cache in the background if the model is
        idle; False if it was busy or not loaded. Whatever it evaluated before a request
        stopped it stays cached."""
        if self._state == LocalState.LOADING and not self._closed:
            # Read once loaded: the last place asked for is where the first keystroke will be.
            self._after_load = (request, asyncio.get_running_loop())
            return True
        if self._state != LocalState.READY or self._closed:
            return False
        if any(not job.stop.is_set() for job in self._jobs):
            return False  # a request is under way (one told to stop is ending: queue behind it)
        return self._start_prefill(lambda j: self._run_prefill(j, request))

    def prefill_edit(self, call: EditCall) -> bool:
        """Read a next edit's prompt ahead, as `prefill` does a keystroke's, if the model is
        idle and would answer `call` on its own template; False otherwise."""
        if self._state != LocalState.READY or self._closed or call.prompt is not None:
            return False
        if call.stop or any(not job.stop.is_set() for job in self._jobs):
            return False
        return self._start_prefill(lambda j: self._run_edit_prefill(j, call), edit=call)

    def _start_prefill(self, work: Callable[[Job], None], edit: EditCall | None = None) -> bool:
        """Run `work` on the model's thread as the one read-ahead, in place of any other (of
        `edit`'s prompt, if given); False if the worker closed meanwhile."""
        self._stop_prefills()
        job = Job(asyncio.get_running_loop(), asyncio.Queue())
        self._prefills.add(job)
        try:
            future = self._worker.submit(self._run, job, work)
        except RuntimeError:  # closed meanwhile
            self._prefills.discard(job)
            return False
        if edit is not None:
            self._edit_reading = (edit, job)  # before the callback, which may run at once
        future.add_done_callback(lambda _f: self._prefill_ended(job))
        return True

    def _prefill_ended(self, job: Job) -> None:
        self._prefills.discard(job)
        if self._edit_reading is not None and self._edit_reading[1] is job:
            self._edit_reading = None

    def _stop_prefills(self, keep: Job | None = None) -> None:
        for job in self._prefills:
            if job is not keep:
                job.stop.set()
        for stop in self._idle_stops:
            stop.set()

    async def wait_idle(self) -> None:
        """Return once every job submitted so far has finished on the worker thread."""
        await asyncio.wrap_future(self._worker.submit(lambda: None))

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._auto is not None:
            self._auto.stop()
        for job in self._jobs:
            job.stop.set()
        self._stop_prefills()
        await asyncio.wrap_future(self._worker.submit(self._free))
        self._worker.shutdown(wait=False)

    def _free(self) -> None:
        self._edit_saved = None
        if self._llm is not None:
            self._llm.close()
            self._llm = None
            self._prompts = None
        self._state = LocalState.UNLOADED

    async def _stream(
        self,
        body: Callable[[Job], None],
        usage: Usage | None,
        also_in: set[Job] | None = None,
        *,
        keep: Job | None = None,
    ) -> AsyncIterator[ChatEvent]:
        """Run `body` on the worker thread as one job and relay what it sends; the job is
        also kept in `also_in` while it lasts. `keep`: a prefill reading this request's own
        prompt, left to finish (the request runs after it)."""
        job = Job(asyncio.get_running_loop(), asyncio.Queue())
        self._jobs.add(job)
        if also_in is not None:
            also_in.add(job)
        self._last_activity = time.monotonic()
        self._stop_prefills(keep)  # a request goes first: a prefill in its way stops now
        try:
            future = self._worker.submit(self._run, job, body)
        except RuntimeError as exc:  # the worker was shut down by aclose()
            self._jobs.discard(job)
            raise BackendError(
                self.name, FailureKind.UNAVAILABLE, "the local model was closed"
            ) from exc
        try:
            while True:
                item = await job.queue.get()
                if usage is not None:
                    usage.prompt_tokens = job.prompt_tokens
                    usage.completion_tokens = job.completion_tokens
                if item is END:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            # Cancelled or abandoned: a queued job never starts, a running one stops at its
            # next token; the worker thread runs nothing else until it has returned.
            job.stop.set()
            future.cancel()
            self._jobs.discard(job)
            if also_in is not None:
                also_in.discard(job)
            self._last_activity = time.monotonic()

    def _run(self, job: Job, body: Callable[[Job], None]) -> None:
        try:
            if job.stop.is_set() or self._llm is None:
                return
            if job not in self._prefills:
                self.generations += 1
            body(job)
        except Exception as exc:
            # A cancelled prompt evaluation ends with an aborted decode; nobody is listening.
            if not job.stop.is_set():
                job.send(BackendError(self.name, FailureKind.SERVER, f"generation failed: {exc}"))
        finally:
            job.send(END)

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

    def _run_chat(self, job: Job, request: ChatRequest) -> None:
        llm = self._require_model()
        previous = list(llm.eval_tokens)
        eos = llm.token_eos()

        prompt_abort = PromptAbort(llm, job.stop)

        def before_token(ids: Any, scores: Any) -> Any:
            prompt_abort.disarm()
            # The first call sees exactly the prompt the chat template produced.
            if job.completion_tokens == 0:
                self._record_prompt(job, previous, ids.tolist())
            if job.stop.is_set():
                # Force end-of-sequence: generation ends cleanly on this token. (Raising here
                # would be swallowed by the ctypes callback layer and printed to stderr.)
                scores[:] = -math.inf
                scores[eos] = 0.0
                return scores
            self._count_tokens(job, job.completion_tokens + 1)
            return scores

        from llama_cpp import LogitsProcessorList

        # llama-cpp-python types each role's message apart; these are plain role/content dicts.
        messages: Any = chat_messages(request.messages, fold_system=self._fold_system_prompt)
        chunks = llm.create_chat_completion(
            messages=messages,
            max_tokens=min(request.max_tokens, LOCAL_CHAT_MAX_TOKENS, llm.n_ctx() // 2),
            temperature=0.0 if request.temperature is None else request.temperature,
            stop=list(request.stop),
            stream=True,
            logits_processor=LogitsProcessorList([before_token]),
        )
        with prompt_abort:
            self._pump(job, chunks, lambda chunk: chunk["choices"][0]["delta"].get("content"))

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

    def _run_tool_chat(self, job: Job, request: ChatRequest) -> None:
        """A chat offering tools, through llama-cpp-python's ChatML function calling."""
        from llama_cpp import LogitsProcessorList
        from llama_cpp.llama_chat_format import chatml_function_calling

        llm = self._require_model()
        eos = llm.token_eos()

        def before_token(ids: Any, scores: Any) -> Any:
            if job.stop.is_set():
                scores[:] = -math.inf
                scores[eos] = 0.0
                return scores
            self._count_tokens(job, job.completion_tokens + 1)
            return scores

        chunks = chatml_function_calling(
            llm,
            messages=handler_messages(request.messages),
            tools=[dict(tool) for tool in request.tools],
            tool_choice=handler_tool_choice(request.tools, request.tool_choice),
            max_tokens=min(request.max_tokens, LOCAL_CHAT_MAX_TOKENS, llm.n_ctx() // 2),
            temperature=0.0 if request.temperature is None else request.temperature,
            stop=list(request.stop),
            stream=True,
            logits_processor=LogitsProcessorList([before_token]),
        )
        self._pump(job, chunks, tool_chat_events)

    def _require_model(self) -> Llama:
        if self._llm is None:
            raise RuntimeError("the model is not loaded")
        return self._llm

    def _require_prompts(self) -> CompletionPrompts:
        if self._prompts is None:
            raise RuntimeError("the model is not loaded")
        return self._prompts

    @staticmethod
    def _pump(
        job: Job, chunks: Any, events_of: Callable[[Any], str | list[ChatEvent] | None]
    ) -> None:
        """Send each chunk's text or tool-call pieces; `chunks` is llama-cpp-python's stream
        (a generator)."""
        try:
            for chunk in chunks:
                events = events_of(chunk)
                for event in [events] if isinstance(events, str) else events or []:
                    if event:
                        job.send(event)
                if job.stop.is_set():
                    return
        finally:
            chunks.close()

    def _record_prompt(self, job: Job, previous: Sequence[int], prompt: Sequence[int]) -> None:
        """Note the prompt size and how much of it the KV cache already held."""
        from llama_cpp import Llama

        common = Llama.longest_token_prefix(previous, prompt)
        # A fully cached prompt still replays its last token to get fresh logits.
        self.last_reused_tokens = min(common, max(len(prompt) - 1, 0))
        self.last_prompt_tokens = len(prompt)
        job.prompt_tokens = len(prompt)
        log.debug(
            "local prompt: %d tokens, %d from the KV cache", len(prompt), self.last_reused_tokens
        )

    def _count_tokens(self, job: Job, completion_tokens: int) -> None:
        self.tokens_generated += completion_tokens - job.completion_tokens
        job.completion_tokens = completion_tokens
