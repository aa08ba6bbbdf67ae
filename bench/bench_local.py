"""Benchmark of the in-process llama.cpp backend; prints a table.

    python -m bench.bench_local [--threads N] [--tokens N] [--sweep-threads]
    python -m bench.bench_local --levers qwen2.5-coder-1.5b [--threads N] [--keystrokes N]

- decode throughput through `LocalBackend` vs a bare `llama_cpp.Llama.create_completion` on the
  same prompt, same settings, same run (target: at least 95 %);
- time to first token of a cold prompt vs the next keystroke in the same document, which reuses
  the KV cache (target: at most 40 % of cold);
- resident memory with the model loaded;
- with `--sweep-threads`: a whole suggestion's time per `n_threads` while one core is busy,
  which is how the default `n_threads` was chosen;
- with `--levers PRESET`: each lever (threads, flash attention, batch sizes, prompt-lookup
  decoding, a single-line stop, a capped suffix) on PRESET's cold prompt and warm keystrokes,
  idle and with one core busy, against the shipped settings in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from bench.harness.permits import permit_for
from lsp_server.backends.base import CompletionRequest, Usage
from lsp_server.backends.bundled_model import ensure_bundled_model
from lsp_server.backends.local.backend import LocalBackend
from lsp_server.backends.local.loading import open_model
from lsp_server.config import model as config_module
from lsp_server.config.model import LocalConfig

THROUGHPUT_PROMPT = "# The first 500 prime numbers\nPRIMES = [2, 3, 5, 7, 11, 13, "
# A real source file as the document being edited; cut so the prompt is a few hundred tokens.
DOCUMENT = Path(config_module.__file__).read_text()
DOCUMENT_CHARS = 2400
ROUNDS = 3
# The model's own speed is measured here, not the deadline: no prompt is cut to fit one.
NO_DEADLINE_MS = 600_000


async def backend_tokens_per_s(backend: LocalBackend, max_tokens: int) -> float:
    usage = Usage()
    request = CompletionRequest(prefix=THROUGHPUT_PROMPT, suffix="", max_tokens=max_tokens)
    start = time.perf_counter()
    async for _ in backend.complete(request, usage, permit=permit_for(backend)):
        pass
    return usage.completion_tokens / (time.perf_counter() - start)


def raw_tokens_per_s(llm: Any, max_tokens: int) -> float:
    """`llm`: a `llama_cpp.Llama` (typed only where llama-cpp-python is installed)."""
    prompt = llm.tokenize(THROUGHPUT_PROMPT.encode(), add_bos=True)
    start = time.perf_counter()
    result = llm.create_completion(prompt, max_tokens=max_tokens, temperature=0.0)
    return float(result["usage"]["completion_tokens"]) / (time.perf_counter() - start)


async def time_to_first_token(backend: LocalBackend, prefix: str) -> float:
    request = CompletionRequest(prefix=prefix, suffix="", max_tokens=8)
    start = time.perf_counter()
    stream = backend.complete(request, permit=permit_for(backend))
    try:
        async for _ in stream:
            return time.perf_counter() - start
        return time.perf_counter() - start
    finally:
        if isinstance(stream, AsyncGenerator):  # stop the generation at the first token
            await stream.aclose()


async def keystroke_latency(backend: LocalBackend) -> tuple[float, float, int, int]:
    """Median cold and next-keystroke time to first token, with the prompt and reuse sizes."""
    cold: list[float] = []
    warm: list[float] = []
    for round_ in range(ROUNDS):
        cut = DOCUMENT_CHARS - 200 * round_
        document = DOCUMENT[:cut]
        await time_to_first_token(backend, THROUGHPUT_PROMPT)  # evict the document
        cold.append(await time_to_first_token(backend, document))
        warm.append(await time_to_first_token(backend, document + "ret"))
    return (
        statistics.median(cold),
        statistics.median(warm),
        backend.last_prompt_tokens,
        backend.last_reused_tokens,
    )


async def suggestion_s(backend: LocalBackend, prefix: str) -> float:
    """Time for one whole 24-token suggestion, as a keystroke asks for it."""
    request = CompletionRequest(prefix=prefix, suffix="\n", max_tokens=24)
    start = time.perf_counter()
    async for _ in backend.complete(request, permit=permit_for(backend)):
        pass
    return time.perf_counter() - start


async def sweep_threads(path: Path) -> None:
    """Suggestion time per thread count while a busy loop holds one core, as a build would."""
    cores = os.cpu_count() or 2
    counts = sorted({1, max(1, cores // 2), max(1, cores - 1), cores})
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    rows = []
    try:
        with contextlib.suppress(AttributeError, OSError):
            os.sched_setaffinity(busy.pid, {0})
        for count in counts:
            backend = LocalBackend(
                LocalConfig(model_path=str(path), n_threads=count, deadline_ms=NO_DEADLINE_MS)
            )
            await backend.ensure_loaded()
            await suggestion_s(backend, THROUGHPUT_PROMPT)
            cold, warm = [], []
            for round_ in range(ROUNDS):
                document = DOCUMENT[: DOCUMENT_CHARS - 200 * round_]
                await suggestion_s(backend, THROUGHPUT_PROMPT)  # evict the document
                cold.append(await suggestion_s(backend, document))
                warm.append(await suggestion_s(backend, document + "ret"))
            await backend.aclose()
            rows.append((count, statistics.median(cold), statistics.median(warm)))
    finally:
        busy.kill()
        busy.wait()
    default = LocalConfig().n_threads
    print(f"{cores} cores, one held by a busy loop; a 24-token suggestion, median of {ROUNDS}")
    print(f"{'n_threads':>9}  {'cold prompt':>11}  {'next keystroke':>14}")
    for count, cold_s, warm_s in rows:
        mark = "  <- default" if count == default else ""
        print(f"{count:>9}  {cold_s * 1000:>8.0f} ms  {warm_s * 1000:>11.0f} ms{mark}")


# --levers: each lever is what the server would do differently, against the shipped settings.
# Levers on the model are extra `llama_cpp.Llama` arguments or the thread count (a backend of
# their own); levers on the request share the baseline's backend.
@dataclass(frozen=True, slots=True)
class Lever:
    name: str
    llama: dict[str, object] = field(default_factory=dict)  # extra `Llama` arguments
    threads: int | None = None  # None: `--threads`
    draft_tokens: int = 0  # prompt-lookup speculative decoding with this many draft tokens
    single_line: bool = False  # the request ends at the line's end
    suffix_lines: int | None = None  # the suffix cut to the line's rest and this many lines
    on: str = "baseline (shipped)"  # a request lever: whose backend it is asked on

    @property
    def own_backend(self) -> bool:
        return bool(self.llama or self.threads or self.draft_tokens)


LEVERS = (
    Lever("baseline (shipped)"),
    Lever("2 threads", threads=2),
    Lever("flash attention", llama={"flash_attn": True}),
    Lever("n_batch=n_ubatch=64", llama={"n_batch": 64, "n_ubatch": 64}),
    Lever("prompt lookup, 2 drafts", draft_tokens=2),
    Lever("single-line stop", single_line=True),
    Lever("2 threads, single-line", single_line=True, on="2 threads"),
    Lever("suffix: line + 3 lines", suffix_lines=3),
)


def _with_lever(lever: Lever) -> contextlib.AbstractContextManager[None]:
    """Open models with `lever`'s extra `Llama` arguments (the bench's only way in)."""
    import llama_cpp

    llama: Any = llama_cpp.Llama  # patched, so read as untyped where the package is typed
    original = llama.__init__
    options = dict(lever.llama)
    if lever.draft_tokens:
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        options["draft_model"] = LlamaPromptLookupDecoding(num_pred_tokens=lever.draft_tokens)
        # A draft model needs every token's logits. llama-cpp-python turns them on for one but
        # sizes its logits array by the `logits_all` argument (n_batch rows), so a prompt longer
        # than n_batch fails to store its logits unless the argument says so too.
        options["logits_all"] = True

    def patched(self: object, *args: object, **kwargs: object) -> None:
        original(self, *args, **{**kwargs, **options})

    @contextlib.contextmanager
    def applied() -> Iterator[None]:
        llama.__init__ = patched
        try:
            yield
        finally:
            llama.__init__ = original

    return applied()


async def keystroke_s(
    backend: LocalBackend, prefix: str, suffix: str, *, single_line: bool = False
) -> float:
    """A whole suggestion, as an editor's keystroke asks for it (a line-end cursor may be
    answered with more lines, within the shipped line time)."""
    request = CompletionRequest(
        prefix=prefix,
        suffix=suffix,
        max_tokens=32,
        stop=("\n\n\n",),
        single_line=single_line,
    )
    start = time.perf_counter()
    async for _ in backend.complete(request, permit=permit_for(backend)):
        pass
    return time.perf_counter() - start


def _lever_document() -> tuple[str, str, str]:
    """Prefix, typed text and suffix: the cursor after a line's indentation mid-file."""
    lines = DOCUMENT.splitlines(keepends=True)
    cut = sum(len(line) for line in lines[: len(lines) // 2])
    while DOCUMENT[cut] in " \n":
        cut += 1
    line_end = DOCUMENT.index("\n", cut)
    return DOCUMENT[:cut], DOCUMENT[cut:line_end], DOCUMENT[line_end : line_end + 1500]


def _cut_suffix(suffix: str, lines: int | None) -> str:
    if lines is None:
        return suffix
    return "".join(suffix.splitlines(keepends=True)[: lines + 1])


async def levers(preset_name: str, threads: int, keystrokes: int) -> None:
    """Cold prompt and warm keystrokes per lever, idle and with one core busy, interleaved."""
    from bench.harness.busy_machine import one_core_busy
    from lsp_server.backends.bundled_model import ensure_preset_model
    from lsp_server.backends.model_presets import PRESETS

    load_before = os.getloadavg()[0]
    path = ensure_preset_model(PRESETS[preset_name])
    backends: dict[str, LocalBackend] = {}
    for lever in LEVERS:
        if not lever.own_backend and lever is not LEVERS[0]:
            backends[lever.name] = backends[lever.on]
            continue
        with _with_lever(lever):
            backend = LocalBackend(
                LocalConfig(
                    model_path=str(path),
                    n_threads=lever.threads or threads,
                    deadline_ms=NO_DEADLINE_MS,
                )
            )
            await backend.ensure_loaded()
        backends[lever.name] = backend
    prefix, typed, suffix = _lever_document()
    cold: dict[str, float] = {}
    warm: dict[tuple[str, bool], list[float]] = {}
    # Request levers on the shared backend first: each one's cold prompt is evicted after it.
    for lever in sorted(LEVERS, key=lambda lever: lever.own_backend or lever is LEVERS[0]):
        backend = backends[lever.name]
        await keystroke_s(backend, THROUGHPUT_PROMPT, "")  # evict any document
        cold[lever.name] = await keystroke_s(
            backend, prefix, _cut_suffix(suffix, lever.suffix_lines), single_line=lever.single_line
        )
    warm_levers = [lever for lever in LEVERS if lever.suffix_lines is None]
    for count in range(1, keystrokes + 1):
        for busy in (False, True):
            with one_core_busy() if busy else contextlib.nullcontext():
                for lever in warm_levers:
                    seconds = await keystroke_s(
                        backends[lever.name],
                        prefix + typed[:count],
                        suffix,
                        single_line=lever.single_line,
                    )
                    warm.setdefault((lever.name, busy), []).append(seconds)
    for backend in set(backends.values()):
        await backend.aclose()
    import llama_cpp

    print(llama_cpp.llama_print_system_info().decode().strip())
    print(
        f"{preset_name}, {threads} thread(s) unless the lever says; load average "
        f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after; a whole suggestion "
        f"(32 tokens at most, more lines for 0.75 s); warm: {keystrokes} keystrokes typed one "
        "character at a time after the cold request, idle and one core busy interleaved"
    )
    print(
        f"{'lever':<24} {'cold s':>7} {'warm p50 idle':>13} {'warm p50 busy':>13} "
        f"{'idle/base':>9} {'busy/base':>9}"
    )
    base = LEVERS[0].name
    base_idle = statistics.median(warm[(base, False)])
    base_busy = statistics.median(warm[(base, True)])
    for lever in LEVERS:
        if lever.suffix_lines is not None:
            print(f"{lever.name:<24} {cold[lever.name]:>7.1f}  (warm: the baseline's prompt)")
            continue
        idle = statistics.median(warm[(lever.name, False)])
        busy_s = statistics.median(warm[(lever.name, True)])
        print(
            f"{lever.name:<24} {cold[lever.name]:>7.1f} {idle:>13.2f} {busy_s:>13.2f} "
            f"{idle / base_idle:>9.2f} {busy_s / base_busy:>9.2f}"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=LocalConfig().n_threads, help="0: all cores")
    parser.add_argument("--tokens", type=int, default=96, help="tokens per throughput run")
    parser.add_argument(
        "--sweep-threads",
        action="store_true",
        help="compare thread counts with one core busy (how the default was chosen)",
    )
    parser.add_argument(
        "--levers",
        metavar="PRESET",
        help="compare llama.cpp settings on PRESET's warm keystroke, idle and one core busy",
    )
    parser.add_argument(
        "--keystrokes", type=int, default=8, help="warm keystrokes per lever and load (--levers)"
    )
    args = parser.parse_args()
    if args.levers:
        await levers(args.levers, args.threads, args.keystrokes)
        return
    if args.sweep_threads:
        await sweep_threads(ensure_bundled_model())
        return

    path = ensure_bundled_model()
    config = LocalConfig(
        model_path=str(path),
        n_threads=args.threads,
        max_tokens=args.tokens,
        deadline_ms=NO_DEADLINE_MS,
    )
    process = psutil.Process()
    rss_before = process.memory_info().rss
    backend = LocalBackend(config)
    start = time.perf_counter()
    await backend.ensure_loaded()
    load_s = time.perf_counter() - start
    await backend_tokens_per_s(backend, 8)
    rss_loaded = process.memory_info().rss

    cold, warm, prompt_tokens, reused = await keystroke_latency(backend)

    raw = open_model(path, config)
    raw_tokens_per_s(raw, 8)
    ours: list[float] = []
    bare: list[float] = []
    for _ in range(ROUNDS):
        ours.append(await backend_tokens_per_s(backend, args.tokens))
        bare.append(raw_tokens_per_s(raw, args.tokens))
    raw.close()
    await backend.aclose()

    ours_best, bare_best = max(ours), max(bare)
    threads = args.threads or os.cpu_count()
    rows = [
        ("model", path.name, ""),
        ("threads", str(threads), ""),
        ("load time", f"{load_s:.2f} s", ""),
        ("RSS with model loaded", f"{rss_loaded / 2**20:.0f} MiB", ""),
        ("RSS added by the model", f"{(rss_loaded - rss_before) / 2**20:.0f} MiB", ""),
        ("tokens/s, LocalBackend (best of 3)", f"{ours_best:.1f}", ""),
        ("tokens/s, bare create_completion", f"{bare_best:.1f}", ""),
        (
            "LocalBackend / bare",
            f"{ours_best / bare_best:.0%}",
            _verdict(ours_best / bare_best >= 0.95, ">= 95 %"),
        ),
        ("first token, cold prompt", f"{cold * 1000:.0f} ms", ""),
        ("first token, next keystroke", f"{warm * 1000:.0f} ms", ""),
        ("next / cold", f"{warm / cold:.0%}", _verdict(warm / cold <= 0.40, "<= 40 %")),
        ("prompt tokens reused (last keystroke)", f"{reused} of {prompt_tokens}", ""),
    ]
    width = max(len(name) for name, _, _ in rows)
    value_width = max(len(value) for _, value, _ in rows)
    for name, value, verdict in rows:
        print(f"{name:<{width}}  {value:>{value_width}}  {verdict}".rstrip())


def _verdict(ok: bool, target: str) -> str:
    return f"{'ok' if ok else 'MISSED'} (target {target})"


if __name__ == "__main__":
    asyncio.run(main())
