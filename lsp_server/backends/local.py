"""The in-process llama.cpp model (llama-cpp-python), for offline and sensitive work.

One `Llama` instance serves every request, and it is not thread-safe, so all model work (loading
and generation) runs on one dedicated worker thread, one job at a time, in the order submitted.
That single thread is the lock: a job still queued when its request is cancelled never runs, and
the next job starts only after the current one has really returned. Tokens reach the event loop
through an `asyncio.Queue` fed with `call_soon_threadsafe`; cancelling the consuming task sets a
stop flag the worker checks after every token.

Consecutive keystrokes in one document share most of their prompt; llama-cpp-python keeps the
KV cache of the previous evaluation and re-evaluates only the tokens after the longest common
prefix. The counters below measure how much was reused. `prefill` does that evaluation ahead of
time, while the model is idle (a document opened or edited), as llama.vim and llama.vscode do:
the next request pays only for what changed since. A prefill never delays a request: one that
is queued when a request comes is dropped, one that is running stops within a graph node.

Context beyond the file leads the prompt (it changes least from one keystroke to the next): in
the repository-level format (`<|repo_name|>`, `<|file_sep|>path`) for a model that has those
tokens and FIM (Qwen2.5-Coder, StarCoder2), else as path-comment blocks, which is what a model
without FIM tokens (the bundled Gemma 3 270M) can read as plain code.

An editor's suggestion is shaped for a CPU (`local_completion_text`): on a line of indentation
alone the prompt ends at the line's start, and a suggestion stops growing by lines once it has
had its time.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import math
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from lsp_server.backends.base import (
    BackendError,
    ChatEvent,
    ChatMessage,
    ChatRequest,
    CompletionRequest,
    ContextChunk,
    FailureKind,
    ToolCallDelta,
    Usage,
    context_within,
)
from lsp_server.backends.bundled_model import (
    INSTALL_HINT,
    ModelUnavailable,
    Progress,
    resolve_model_path,
)
from lsp_server.backends.context_prompt import path_comment_blocks, repo_level_parts
from lsp_server.backends.local_completion_text import (
    LeadingBlanks,
    LineTime,
    MiddleAnchor,
    indent_to_heal,
    more_lines_seconds,
)
from lsp_server.backends.local_model import LocalModel, LocalState
from lsp_server.backends.local_tools import (
    handler_messages,
    handler_tool_choice,
    template_is_chatml,
)
from lsp_server.backends.model_presets import preset_named
from lsp_server.backends.tool_calls import ToolCallStream
from lsp_server.config.model import LOCAL_CHAT_MAX_TOKENS, LocalConfig

if TYPE_CHECKING:
    from llama_cpp import Llama

log = logging.getLogger(__name__)

# Room kept free in the context for the special tokens of a fill-in-the-middle prompt.
_SPECIAL_TOKENS_ROOM = 4


_END = object()


@dataclass(eq=False)
class _Job:
    """One generation: its channel to the event loop, its stop flag and its token counts."""

    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[Any]
    stop: threading.Event = field(default_factory=threading.Event)
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def send(self, item: object) -> None:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            self.stop.set()


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
        self._bos: list[int] = []
        self._fim_tokens: tuple[int, int, int] | None = None
        # The repository-level markers ("repo_name", "file_sep") as the model's own tokens.
        self._repo_tokens: dict[str, int] = {}
        self._anchor: MiddleAnchor | None = None  # touched on the worker thread only
        self._fold_system_prompt = False
        self._chat_template = ""
        self._jobs: set[_Job] = set()
        self._prefills: set[_Job] = set()
        self.prefills = 0
        self._closed = False
        self.tokens_generated = 0
        self.generations = 0
        self.last_prompt_tokens = 0
        self.last_reused_tokens = 0

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
        return None if self._state != LocalState.READY else self._fim_tokens is not None

    @property
    def tools_supported(self) -> bool | None:
        """Whether gateway chat with tools can be served here (`local_tools`); None while
        that depends on a model not yet loaded."""
        mode = self._config.tool_calls
        if mode != "auto":
            return mode == "chatml"
        return None if self._state != LocalState.READY else template_is_chatml(self._chat_template)

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
            self._model_path = resolve_model_path(self._config, progress)
            if progress:
                progress(f"loading local model {self._model_path.name}", None)
            self._llm = self._open_model(self._model_path)
        except Exception as exc:  # every failure becomes a state with a message, not a crash
            self._load_error = _load_failure_message(self._model_path, exc)
            self._state = LocalState.FAILED
            if progress:
                progress(f"local model unavailable: {self._load_error}", 1.0)
            return
        self._state = LocalState.READY
        if progress:
            progress("local model ready", 1.0)

    def _open_model(self, path: Path) -> Llama:
        import llama_cpp

        preset = None if self._config.model_path else preset_named(self._config.model)
        llm = open_model(path, self._config, chat_format=preset.chat_format if preset else None)
        self._fold_system_prompt = preset is not None and preset.fold_system_prompt
        template = llm.metadata.get("tokenizer.chat_template", "")
        self._chat_template = template if isinstance(template, str) else ""
        self._bos = llm.tokenize(b"", add_bos=True)
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        fim = (
            llama_cpp.llama_vocab_fim_pre(vocab),
            llama_cpp.llama_vocab_fim_suf(vocab),
            llama_cpp.llama_vocab_fim_mid(vocab),
        )
        self._fim_tokens = fim if min(fim) >= 0 else None
        self._repo_tokens = _repo_level_tokens(llm)
        return llm

    # Generation

    async def complete(
        self, request: CompletionRequest, usage: Usage | None = None
    ) -> AsyncIterator[str]:
        await self.ensure_loaded()
        async for text in self._stream(lambda job: self._run_completion(job, request), usage):
            if isinstance(text, str):
                yield text

    async def chat(self, request: ChatRequest, usage: Usage | None = None) -> AsyncIterator[str]:
        await self.ensure_loaded()
        async for text in self._stream(lambda job: self._run_chat(job, request), usage):
            if isinstance(text, str):
                yield text

    async def chat_events(
        self, request: ChatRequest, usage: Usage | None = None
    ) -> AsyncIterator[ChatEvent]:
        if not request.uses_tools:
            async for text in self.chat(request, usage):
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
        if self._state != LocalState.READY or self._closed or self._jobs:
            return False
        self._stop_prefills()
        job = _Job(asyncio.get_running_loop(), asyncio.Queue())
        self._prefills.add(job)
        try:
            future = self._worker.submit(self._run, job, lambda j: self._run_prefill(j, request))
        except RuntimeError:  # closed meanwhile
            self._prefills.discard(job)
            return False
        future.add_done_callback(lambda _f: self._prefills.discard(job))
        return True

    def _stop_prefills(self) -> None:
        for job in self._prefills:
            job.stop.set()

    async def wait_idle(self) -> None:
        """Return once every job submitted so far has finished on the worker thread."""
        await asyncio.wrap_future(self._worker.submit(lambda: None))

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        for job in self._jobs:
            job.stop.set()
        await asyncio.wrap_future(self._worker.submit(self._free))
        self._worker.shutdown(wait=False)

    def _free(self) -> None:
        if self._llm is not None:
            self._llm.close()
            self._llm = None
        self._state = LocalState.UNLOADED

    async def _stream(
        self, body: Callable[[_Job], None], usage: Usage | None
    ) -> AsyncIterator[ChatEvent]:
        job = _Job(asyncio.get_running_loop(), asyncio.Queue())
        self._jobs.add(job)
        self._stop_prefills()  # a request goes first: a prefill in its way stops now
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
                if item is _END:
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

    def _run(self, job: _Job, body: Callable[[_Job], None]) -> None:
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
            job.send(_END)

    def _run_completion(self, job: _Job, request: CompletionRequest) -> None:
        llm = self._require_model()
        # `local.max_tokens` sizes editor suggestions; a gateway client's explicit ask is honoured.
        cap = request.max_tokens if request.client_max_tokens else self._config.max_tokens
        max_tokens = max(1, min(request.max_tokens, cap, llm.n_ctx() // 2))
        prompt = self._completion_prompt(llm, request, max_tokens)
        if not prompt:
            return
        self._record_prompt(job, list(llm.eval_tokens), prompt)
        stop = list(request.stop)
        if request.single_line and "\n" not in stop:
            stop.append("\n")

        prompt_abort = _PromptAbort(llm, job.stop)

        def after_token(ids: Any, _logits: Any) -> bool:
            prompt_abort.disarm()
            # `ids` holds the prompt and every sampled token but the newest; llama-cpp-python
            # calls this once per token and once more at the end, hence the max().
            self._count_tokens(job, max(job.completion_tokens, len(ids) - len(prompt) + 1))
            return job.stop.is_set()

        from llama_cpp import StoppingCriteriaList

        chunks = llm.create_completion(
            prompt,
            max_tokens=max_tokens,
            temperature=request.temperature,
            stop=stop,
            stream=True,
            stopping_criteria=StoppingCriteriaList([after_token]),
        )
        unindent = LeadingBlanks(len(indent_to_heal(request)))
        more_lines_s = more_lines_seconds(self._config.deadline_ms)
        lines = LineTime(None if request.client_max_tokens else more_lines_s)

        def text_of(chunk: Any) -> str:
            text, enough = lines.feed(unindent.drop(chunk["choices"][0]["text"]))
            if enough:
                job.stop.set()  # the generation ends after this piece; what it wrote stands
            return text

        with prompt_abort:
            self._pump(job, chunks, text_of)

    def _run_prefill(self, job: _Job, request: CompletionRequest) -> None:
        """The prompt a completion at this position would evaluate, and one token: the next
        request finds it in the KV cache."""
        llm = self._require_model()
        max_tokens = max(1, min(request.max_tokens, self._config.max_tokens, llm.n_ctx() // 2))
        prompt = self._completion_prompt(llm, request, max_tokens)
        if not prompt:
            return
        self.prefills += 1
        chunks: Any = llm.create_completion(prompt, max_tokens=1, temperature=0.0, stream=True)
        with _PromptAbort(llm, job.stop):
            for _chunk in chunks:
                if job.stop.is_set():
                    break
            chunks.close()

    def _run_chat(self, job: _Job, request: ChatRequest) -> None:
        llm = self._require_model()
        previous = list(llm.eval_tokens)
        eos = llm.token_eos()

        prompt_abort = _PromptAbort(llm, job.stop)

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
        messages: Any = _chat_messages(request.messages, fold_system=self._fold_system_prompt)
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

    def _run_tool_chat(self, job: _Job, request: ChatRequest) -> None:
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
        self._pump(job, chunks, _tool_chat_events)

    def _require_model(self) -> Llama:
        if self._llm is None:
            raise RuntimeError("the model is not loaded")
        return self._llm

    @staticmethod
    def _pump(
        job: _Job, chunks: Any, events_of: Callable[[Any], str | list[ChatEvent] | None]
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

    def _completion_prompt(
        self, llm: Llama, request: CompletionRequest, max_tokens: int
    ) -> list[int]:
        """Prompt tokens: FIM when the model has FIM tokens, else the prefix alone; context
        beyond the file leads, in the repository-level format where the model has its tokens,
        else as path-comment blocks. Text typed since the last FIM prompt follows it as the
        start of the middle (`MiddleAnchor`)."""
        anchor = self._anchor
        typed = anchor.typed_since(request) if anchor is not None else None
        if anchor is not None and typed is not None:
            tokens = [*anchor.tokens, *_plain_tokens(llm, typed)]
            if len(tokens) + max_tokens <= llm.n_ctx():
                return tokens
        budget = llm.n_ctx() - max_tokens - _SPECIAL_TOKENS_ROOM - len(self._bos)
        chunks = context_within(request.context, self._config.context_tokens)
        if chunks and log.isEnabledFor(logging.DEBUG):
            log.debug("local context: %s", ", ".join(f"{c.path} ({c.tokens})" for c in chunks))
        repo_level = self._fim_tokens is not None and len(self._repo_tokens) == 2
        if repo_level:
            context = self._repo_level_context(llm, chunks, request.workspace_path)
        else:
            blocks = path_comment_blocks(chunks, request.language, request.workspace_path)
            context = _plain_tokens(llm, blocks)
        if len(context) > budget // 2:
            context = []  # a context this large would crowd out the file itself
        budget -= len(context)
        if self._config.window_tokens:
            budget = min(budget, self._config.window_tokens)
        healed_prefix = request.prefix[: len(request.prefix) - len(indent_to_heal(request))]
        prefix = _plain_tokens(llm, healed_prefix)
        if self._fim_tokens is None:
            return self._bos + context + _keep_tail(prefix, budget)
        fim_pre, fim_suf, fim_mid = self._fim_tokens
        suffix = _plain_tokens(llm, request.suffix)
        suffix = suffix[: budget // 4]
        prefix = _keep_tail(prefix, budget - len(suffix))
        if repo_level:
            tokens = [*self._bos, *context, fim_pre, *prefix, fim_suf, *suffix, fim_mid]
        else:
            tokens = [*self._bos, fim_pre, *context, *prefix, fim_suf, *suffix, fim_mid]
        self._anchor = MiddleAnchor(healed_prefix, request.suffix, request.context, tuple(tokens))
        return tokens

    def _repo_level_context(
        self, llm: Llama, chunks: Sequence[ContextChunk], current_path: str
    ) -> list[int]:
        tokens: list[int] = []
        for marker, text in repo_level_parts(chunks, current_path):
            tokens.append(self._repo_tokens[marker])
            tokens += _plain_tokens(llm, text)
        return tokens

    def _record_prompt(self, job: _Job, previous: Sequence[int], prompt: Sequence[int]) -> None:
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

    def _count_tokens(self, job: _Job, completion_tokens: int) -> None:
        self.tokens_generated += completion_tokens - job.completion_tokens
        job.completion_tokens = completion_tokens


def open_model(path: Path, config: LocalConfig, *, chat_format: str | None = None) -> Llama:
    """A `llama_cpp.Llama` for `path` with the server's settings; blocks while it loads."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise ModelUnavailable(f"llama-cpp-python is not installed: {INSTALL_HINT}") from exc
    _send_native_logs_to_logging(llama_cpp)
    threads = config.n_threads or os.cpu_count() or 1
    with _plain_weight_buffers(llama_cpp):
        return llama_cpp.Llama(
            model_path=str(path),
            n_ctx=config.n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            # Sliding-window layers keep the whole context, so a shared prompt prefix stays valid.
            swa_full=True,
            chat_format=chat_format,
            verbose=False,
        )


_native_log = logging.getLogger("lsp_server.llama_cpp")
_log_bridge: Any = None  # the ctypes callback must outlive every call into llama.cpp


def _send_native_logs_to_logging(llama_cpp: ModuleType) -> None:
    """llama.cpp's own messages (cache layout notes and the like) go to debug logging instead
    of the terminal: stderr is the editor's server log, and they are not for the person."""
    global _log_bridge
    if _log_bridge is not None:
        return

    @llama_cpp.llama_log_callback
    def bridge(_level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
        _native_log.debug("%s", text.decode("utf-8", "replace").rstrip())

    _log_bridge = bridge
    llama_cpp.llama_log_set(bridge, ctypes.c_void_p(0))


class _PromptAbort:
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

    def __enter__(self) -> _PromptAbort:
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


_DEFAULT_PARAMS_LOCK = threading.Lock()


@contextlib.contextmanager
def _plain_weight_buffers(llama_cpp: ModuleType) -> Iterator[None]:
    """Load weights without repacking them into AMX buffers where llama.cpp was built with AMX.

    The AMX matrix kernel crashes the process on some CPUs (llama.cpp issue 20824, seen with
    Q4_K_M models); llama-cpp-python does not expose `use_extra_bufts`, so the default model
    parameters are adjusted while the model loads.
    """
    if b"AMX_INT8 = 1" not in llama_cpp.llama_print_system_info():
        yield
        return
    low_level = llama_cpp.llama_cpp
    original = low_level.llama_model_default_params

    def without_extra_buffers() -> Any:
        params = original()
        params.use_extra_bufts = False
        return params

    with _DEFAULT_PARAMS_LOCK:
        low_level.llama_model_default_params = without_extra_buffers
        try:
            yield
        finally:
            low_level.llama_model_default_params = original


def _tool_chat_events(chunk: Any) -> list[ChatEvent]:
    """The text and tool-call pieces of one chunk of the function-calling handler."""
    delta = chunk["choices"][0].get("delta") or {}
    events: list[ChatEvent] = []
    if delta.get("content"):
        events.append(delta["content"])
    for position, call in enumerate(delta.get("tool_calls") or []):
        function = call.get("function") or {}
        events.append(
            ToolCallDelta(
                call.get("index", position),
                id=call.get("id") or "",
                name=function.get("name") or "",
                arguments=function.get("arguments") or "",
            )
        )
    return events


def _chat_messages(messages: Sequence[ChatMessage], *, fold_system: bool) -> list[dict[str, str]]:
    """Messages for llama-cpp-python; for Gemma, system text opens the first user turn."""
    plain = [
        {"role": "system" if m.role == "developer" else m.role, "content": m.content}
        for m in messages
    ]
    if not fold_system:
        return plain
    system = "\n\n".join(m["content"] for m in plain if m["role"] == "system")
    turns = [m for m in plain if m["role"] != "system"]
    if system and turns and turns[0]["role"] == "user":
        turns[0] = {"role": "user", "content": f"{system}\n\n{turns[0]['content']}"}
    elif system:
        turns.insert(0, {"role": "user", "content": system})
    return turns


# The repository-level markers of Qwen2.5-Coder and of StarCoder2, by what they mark.
_REPO_MARKERS = {
    "repo_name": ("<|repo_name|>", "<repo_name>"),
    "file_sep": ("<|file_sep|>", "<file_sep>"),
}


def _repo_level_tokens(llm: Llama) -> dict[str, int]:
    """The model's own token for each repository-level marker it has."""
    found: dict[str, int] = {}
    for marker, spellings in _REPO_MARKERS.items():
        for spelling in spellings:
            tokens = llm.tokenize(spelling.encode(), add_bos=False, special=True)
            if len(tokens) == 1:
                found[marker] = tokens[0]
                break
    return found


def _plain_tokens(llm: Llama, text: str) -> list[int]:
    """`text` as tokens, a special token's spelling in it read as plain text: a file cannot
    write the model's control tokens."""
    if not text:
        return []
    return llm.tokenize(text.encode(), add_bos=False, special=False)


def _keep_tail(tokens: list[int], budget: int) -> list[int]:
    """The end of `tokens` within `budget`, cut at multiples of a quarter budget.

    Cutting in coarse steps keeps the start of the window fixed while the user types, so the
    KV cache of the previous keystroke stays reusable.
    """
    if len(tokens) <= budget:
        return tokens
    step = max(1, budget // 4)
    excess = len(tokens) - budget
    cut = -(-excess // step) * step
    return tokens[cut:]


def _load_failure_message(path: Path | None, exc: Exception) -> str:
    if isinstance(exc, ModelUnavailable):
        return str(exc)
    where = str(path) if path is not None else "the local model"
    return (
        f"cannot load {where}: {exc}; check that it is a llama.cpp GGUF model "
        "([local] model_path), or leave model_path empty for the bundled model"
    )
