"""The in-process llama.cpp backend with the real bundled model: streaming, cancellation,
KV-cache reuse across keystrokes, one generation at a time, and clear load failures."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from bench.harness.permits import permit_for
from lsp_server.backends.base import (
    BackendError,
    ChatMessage,
    ChatRequest,
    CompletionRequest,
    ContextChunk,
    Usage,
)
from lsp_server.backends.local.backend import LocalBackend
from lsp_server.backends.local.prompt_steps import STEP_TOKENS
from lsp_server.config.model import LocalConfig
from lsp_server.failures import FailureKind

DOCUMENT = '''import math


def area_of_circle(radius: float) -> float:
    """The area of a circle of the given radius."""
    return math.pi * radius**2


def circumference(radius: float) -> float:
    '''

# A prompt the model happily continues for hundreds of tokens.
ENDLESS = "# The first 500 prime numbers\nPRIMES = [2, 3, 5, 7, 11, 13, "


async def collect(backend: LocalBackend, request: CompletionRequest) -> str:
    return "".join([piece async for piece in backend.complete(request, permit=permit_for(backend))])


async def start_streaming(backend: LocalBackend, request: CompletionRequest) -> asyncio.Task[None]:
    """A task consuming `request`; returns once the first piece of text has arrived."""
    first_text = asyncio.Event()

    async def consume() -> None:
        async for _ in backend.complete(request, permit=permit_for(backend)):
            first_text.set()

    task = asyncio.create_task(consume())
    await first_text.wait()
    return task


async def cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.model
async def test_streams_a_continuation_and_reports_usage(local_backend: LocalBackend) -> None:
    usage = Usage()
    pieces = [
        piece
        async for piece in local_backend.complete(
            CompletionRequest(prefix=DOCUMENT, suffix="\n", max_tokens=12),
            usage,
            permit=permit_for(local_backend),
        )
    ]

    assert "".join(pieces).strip()
    assert usage.prompt_tokens == local_backend.last_prompt_tokens > 20
    assert 0 < usage.completion_tokens <= 12


@pytest.mark.model
async def test_stop_sequences_end_the_text(local_backend: LocalBackend) -> None:
    text = await collect(
        local_backend, CompletionRequest(prefix=ENDLESS, suffix="", max_tokens=40, stop=(",",))
    )

    assert text.strip()
    assert "," not in text


@pytest.mark.model
async def test_cancelling_the_consumer_stops_generation_at_once(
    local_backend: LocalBackend,
) -> None:
    before = local_backend.tokens_generated
    task = await start_streaming(
        local_backend, CompletionRequest(prefix=ENDLESS, suffix="", max_tokens=200)
    )

    await cancel(task)
    await local_backend.wait_idle()

    assert 0 < local_backend.tokens_generated - before < 20
    assert await collect(local_backend, CompletionRequest(prefix=DOCUMENT, suffix="", max_tokens=4))


@pytest.mark.model
async def test_cancelling_during_prompt_evaluation_abandons_it(
    local_backend: LocalBackend,
) -> None:
    generations = local_backend.generations
    tokens = local_backend.tokens_generated
    long_prompt = CompletionRequest(prefix=DOCUMENT * 25, suffix="", max_tokens=8)
    task = asyncio.create_task(collect(local_backend, long_prompt))
    while local_backend.generations == generations:
        await asyncio.sleep(0.01)

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await local_backend.wait_idle()

    assert local_backend.last_prompt_tokens > 1000
    assert local_backend.tokens_generated == tokens
    assert await collect(local_backend, CompletionRequest(prefix=ENDLESS, suffix="", max_tokens=4))


@pytest.mark.model
async def test_a_request_cancelled_while_waiting_never_runs(local_backend: LocalBackend) -> None:
    generations = local_backend.generations
    running = await start_streaming(
        local_backend, CompletionRequest(prefix=ENDLESS, suffix="", max_tokens=200)
    )
    waiting = asyncio.create_task(
        collect(local_backend, CompletionRequest(prefix=DOCUMENT, suffix="", max_tokens=8))
    )
    while local_backend.pending < 2:
        await asyncio.sleep(0.01)

    waiting.cancel()
    await cancel(running)
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await local_backend.wait_idle()

    assert local_backend.generations == generations + 1
    assert local_backend.pending == 0


@pytest.mark.model
async def test_the_next_keystroke_reuses_the_kv_cache(local_backend: LocalBackend) -> None:
    await collect(local_backend, CompletionRequest(prefix=DOCUMENT, suffix="", max_tokens=4))

    await collect(
        local_backend, CompletionRequest(prefix=DOCUMENT + "ret", suffix="", max_tokens=4)
    )

    prompt = local_backend.last_prompt_tokens
    assert prompt > 40
    assert local_backend.last_reused_tokens >= prompt - 3


@pytest.mark.model
async def test_on_a_line_of_indentation_the_answer_is_not_indented_again(
    local_backend: LocalBackend,
) -> None:
    """The prompt ends at the line's start and the model writes the indentation itself; what
    reaches the editor starts where the cursor is."""
    text = await collect(local_backend, CompletionRequest(prefix=DOCUMENT, suffix="\n"))
    assert text.strip()
    assert not text[0].isspace(), repr(text)


@pytest.mark.model
async def test_an_unrelated_prompt_reuses_almost_nothing(local_backend: LocalBackend) -> None:
    await collect(local_backend, CompletionRequest(prefix=DOCUMENT, suffix="", max_tokens=4))

    await collect(local_backend, CompletionRequest(prefix=ENDLESS, suffix="", max_tokens=4))

    assert local_backend.last_reused_tokens <= 2


@pytest.mark.model
async def test_the_event_loop_keeps_running_during_generation(
    local_backend: LocalBackend,
) -> None:
    ticks = 0

    async def heartbeat() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    beating = asyncio.create_task(heartbeat())
    try:
        await collect(local_backend, CompletionRequest(prefix=ENDLESS, suffix="", max_tokens=24))
    finally:
        beating.cancel()

    assert ticks >= 5


@pytest.mark.model
async def test_chat_streams_an_answer(local_backend: LocalBackend) -> None:
    usage = Usage()
    request = ChatRequest(
        messages=(
            ChatMessage("system", "You rewrite Python code."),
            ChatMessage("user", "Rename x to total:\n\nx = 1\nprint(x)"),
        ),
        max_tokens=16,
    )

    answer = "".join(
        [
            piece
            async for piece in local_backend.chat(request, usage, permit=permit_for(local_backend))
        ]
    )

    assert answer.strip()
    assert usage.prompt_tokens > 10
    assert 0 < usage.completion_tokens <= 16


@pytest.mark.model
async def test_loading_reports_progress_and_states(bundled_model_path: Path) -> None:
    progress: list[tuple[str, float | None]] = []
    backend = LocalBackend(
        LocalConfig(model_path=str(bundled_model_path), n_ctx=256, n_threads=1, max_tokens=512),
        on_progress=lambda message, fraction: progress.append((message, fraction)),
    )
    assert backend.state == "unloaded"

    backend.start_loading()
    backend.start_loading()
    assert backend.state == "loading"
    await backend.ensure_loaded()

    assert backend.state == "ready"
    assert backend.model_path == bundled_model_path
    assert progress[-1] == ("local model ready", 1.0)
    await backend.aclose()
    with pytest.raises(BackendError) as error:
        await collect(backend, CompletionRequest(prefix="x = ", suffix=""))
    assert error.value.kind is FailureKind.UNAVAILABLE


@pytest.mark.model
async def test_a_broken_model_file_fails_as_unavailable_naming_it(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x00" * 64)
    backend = LocalBackend(LocalConfig(model_path=str(broken)))

    with pytest.raises(BackendError) as error:
        await collect(backend, CompletionRequest(prefix="x = ", suffix=""))

    assert error.value.kind is FailureKind.UNAVAILABLE
    assert str(broken) in error.value.message
    assert backend.state == "failed"
    assert backend.load_error == error.value.message
    await backend.aclose()


async def test_a_missing_model_file_fails_as_unavailable_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "missing.gguf"
    backend = LocalBackend(LocalConfig(model_path=str(missing)))

    with pytest.raises(BackendError) as error:
        await backend.ensure_loaded()

    assert error.value.kind is FailureKind.UNAVAILABLE
    assert str(missing) in error.value.message
    await backend.aclose()


async def test_a_disabled_backend_refuses_work() -> None:
    backend = LocalBackend(LocalConfig(enabled=False))
    backend.start_loading()

    with pytest.raises(BackendError) as error:
        await collect(backend, CompletionRequest(prefix="x = ", suffix=""))

    assert backend.state == "disabled"
    assert error.value.kind is FailureKind.UNAVAILABLE
    await backend.aclose()


@pytest.mark.model
async def test_a_prefill_leaves_the_prompt_in_the_kv_cache(local_backend: LocalBackend) -> None:
    await collect(local_backend, CompletionRequest(prefix=ENDLESS, suffix="", max_tokens=4))
    request = CompletionRequest(prefix=DOCUMENT, suffix="\n", max_tokens=4)

    assert local_backend.prefill(request) is True
    await local_backend.wait_idle()
    await collect(local_backend, request)

    prompt = local_backend.last_prompt_tokens
    assert prompt > 40
    assert local_backend.last_reused_tokens == prompt - 1  # all but the replayed last token


@pytest.mark.model
async def test_a_prefill_never_delays_a_request(local_backend: LocalBackend) -> None:
    """Busy: no prefill is queued. A request arriving during a prefill stops it."""
    running = await start_streaming(
        local_backend, CompletionRequest(prefix=ENDLESS, suffix="", max_tokens=256)
    )
    assert local_backend.prefill(CompletionRequest(prefix=DOCUMENT, suffix="")) is False
    await cancel(running)
    await local_backend.wait_idle()

    long_document = DOCUMENT * 8
    assert local_backend.prefill(CompletionRequest(prefix=long_document, suffix="")) is True
    (prefill,) = local_backend._prefills
    await collect(local_backend, CompletionRequest(prefix=ENDLESS, suffix="", max_tokens=2))
    assert prefill.stop.is_set()  # told to stop (or never start) when the request came
    await local_backend.wait_idle()


@pytest.mark.model
async def test_with_read_ahead_off_the_model_reads_only_when_asked(
    bundled_model_path: Path,
) -> None:
    config = LocalConfig(model_path=str(bundled_model_path), n_ctx=2048, n_threads=1)
    backend = LocalBackend(replace(config, read_ahead=False))
    request = CompletionRequest(prefix=DOCUMENT, suffix="\n", max_tokens=2)
    try:
        backend.start_loading()
        assert backend.prefill(request) is False  # nor promised for once it has loaded
        await backend.ensure_loaded()
        assert backend.prefill(request) is False
        assert not backend._prefills and backend.tokens_read_ahead == 0
        await collect(backend, request)
        assert backend.last_prompt_tokens > 40  # asked, it reads the prompt itself
    finally:
        await backend.aclose()


@pytest.mark.model
async def test_a_read_ahead_stopped_by_a_request_keeps_what_it_read(
    local_backend: LocalBackend,
) -> None:
    """Read in steps: the request that stops it reads only the rest, not the whole prompt."""
    await collect(local_backend, CompletionRequest(prefix=ENDLESS, suffix="", max_tokens=2))
    request = CompletionRequest(prefix=DOCUMENT * 30, suffix="", max_tokens=2)
    read_before = local_backend.tokens_read_ahead
    assert local_backend.prefill(request) is True
    while local_backend.tokens_read_ahead < read_before + STEP_TOKENS:
        await asyncio.sleep(0.01)

    await collect(local_backend, request)

    read_ahead = local_backend.tokens_read_ahead - read_before
    assert local_backend.last_reused_tokens >= min(read_ahead, local_backend.last_prompt_tokens - 1)
    assert local_backend.last_reused_tokens >= STEP_TOKENS


@pytest.mark.model
async def test_a_cold_prompt_too_long_for_the_deadline_is_cut_and_answers(
    bundled_model_path: Path,
) -> None:
    """A keystroke whose prompt nothing has read ahead reads only what its deadline allows at
    the model's measured pace, and answers (the generous cap is for a busy test machine)."""
    config = LocalConfig(
        model_path=str(bundled_model_path), n_ctx=2048, n_threads=1, window_tokens=0
    )
    backend = LocalBackend(config)
    try:
        await collect(backend, CompletionRequest(prefix=DOCUMENT * 3, suffix="", max_tokens=2))
        long_prompt = CompletionRequest(prefix=ENDLESS * 40 + DOCUMENT, suffix="", max_tokens=4)

        answer = await collect(backend, long_prompt)

        assert answer
        assert backend.last_prompt_tokens < 1000  # of about 1400
        assert backend.last_prompt_tokens - backend.last_reused_tokens < 1000
    finally:
        await backend.aclose()


@pytest.mark.model
async def test_context_leads_the_prompt_and_stays_in_the_kv_cache(
    local_backend: LocalBackend,
) -> None:
    """The bundled model has no FIM tokens: context goes as path-comment blocks before the
    prefix, and leads, so the next keystroke with other text reuses its KV cache."""
    chunk = ContextChunk(
        "shapes/circle.py",
        'def area_of_ring(outer: float, inner: float) -> float:\n    """Outer minus inner."""\n',
    )
    plain = CompletionRequest(prefix=DOCUMENT, suffix="", max_tokens=2, language="python")
    await collect(local_backend, plain)
    without = local_backend.last_prompt_tokens
    with_context = replace(plain, context=(chunk,), workspace_path="main.py")
    await collect(local_backend, with_context)
    added = local_backend.last_prompt_tokens - without
    assert added >= 20  # the chunk, its path comment and the current file's
    other_text = replace(with_context, prefix="import math\n\nRADIUS = 2\n")
    await collect(local_backend, other_text)
    assert local_backend.last_reused_tokens >= added
