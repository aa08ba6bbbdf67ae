"""The local model's one worker thread and the jobs on it.

One `Llama` instance serves every request, and it is not thread-safe, so all model work (loading
and generation) runs on one dedicated worker thread, one job at a time, in the order submitted.
That single thread is the lock: a job still queued when its request is cancelled never runs, and
the next job starts only after the current one has really returned. Tokens reach the event loop
through an `asyncio.Queue` fed with `call_soon_threadsafe` (`job`); cancelling the consuming
task sets a stop flag the worker checks after every token.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
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
from lsp_server.backends.local.edit_threads import CoreVerdict
from lsp_server.backends.local.first_keystrokes import FirstKeystrokes
from lsp_server.backends.local.job import END, Job
from lsp_server.backends.local.loading import load_failure_message, open_model
from lsp_server.backends.local.pace import Pace
from lsp_server.backends.local.prompt import CompletionPrompts
from lsp_server.backends.local_model import LocalModel, LocalState
from lsp_server.backends.model_presets import ModelPreset, local_context_tokens, preset_named
from lsp_server.config.model import LOCAL_MODEL_AUTO, LocalConfig
from lsp_server.failures import FailureKind

if TYPE_CHECKING:
    from llama_cpp import Llama

T = TypeVar("T")

log = logging.getLogger(__name__)


class ModelWorker(LocalModel):
    """The model, its one worker thread and the jobs on it: loading, the read-ahead in the way
    of a request stopped, and what the chooser of `model = "auto"` may do."""

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
        self.first_keystrokes = FirstKeystrokes()  # how often the deadline cut them
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

    def _start_prefill(self, work: Callable[[Job], None], edit: EditCall | None = None) -> bool:
        """Run `work` on the model's thread as the one read-ahead, in place of any other (of
        `edit`'s prompt, if given); False if the worker closed meanwhile or reading ahead is
        off (`local.read_ahead`)."""
        if not self._config.read_ahead:
            return False
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
