"""The local model's next edit, written with drafts from its prompt against one token a decode,
or on all cores against the configured threads, on the same requests in the same run; prints a
table.

    python -m bench.bench_local_edit [--model qwen2.5-coder-0.5b] [--threads 1] [--limit 6]
                                     [--rounds 1] [--cores] [--keystroke-after 1.0]
                                     [--interleaved] [--busy] [--rejoin]

Each request is a next edit as the server asks it of the local model (`edit_call`): the rename
case of the real-editor tests (a parameter renamed in a signature, its use below), then the
first `--limit` edit tasks of bench_next_edit.py, their history replayed into an `EditHistory`.
Each is asked through `LocalBackend.chat` (llama-cpp-python's chat completion: greedy, one
token a decode, the path before drafting) and through `LocalBackend.edit` (`copy_decoding`),
alternately, with the KV cache emptied before each, so both read the whole prompt. Reported
per path: the time to the first text (mostly the prompt's reading), the time after it (the
writing), its milliseconds per token, the tokens per decode, and whether both wrote the same.
First, what one decode of n tokens costs after a 300-token prompt, with logits at every
position (as a drafted decode asks) and at the last only (as a prompt is read): what a draft
must save to pay.

`--cores`: the drafted edit with the configured threads alone against the shipped one, which
may run on every core (`edit_threads`), alternately; then, with `--keystroke-after S`, a
keystroke sent S seconds into each edit on each path, and its time to its first text beside
the same keystroke with no edit under way (each with the KV cache emptied before the edit):
what a wider edit costs the keystroke that stops it.

`--busy`: one core held by a busy loop throughout (a build beside the editor).

`--rejoin`: the drafted edit writing the region out whole against the shipped one, which ends
once its answer copies the rest of the region (`rejoin`), alternately; "same" then compares
the edits each answer makes of the document.

`--interleaved`: a keystroke, the next edit, the keystroke again, the edit again, each on the
cache the one before left: what each finds of its prompt there (`edit_cache`), and the edit
again with its prompt not kept aside, as before.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from bench.harness.busy_machine import one_core_busy
from bench.harness.permits import permit_for
from bench.next_edit_set import Task, chosen_tasks
from lsp_server.backends.base import CompletionRequest, EditCall, Usage
from lsp_server.backends.local.backend import LocalBackend
from lsp_server.backends.local.copy_decoding import _fill
from lsp_server.config.model import LocalConfig
from lsp_server.nextedit.edits import region_edits
from lsp_server.nextedit.history import EditHistory
from lsp_server.nextedit.prompts import edit_call, read_answer
from lsp_server.nextedit.region import editable_region
from lsp_server.nextedit.request import EditRequest
from lsp_server.text_edits import OffsetEdit

RENAME_BEFORE = "def scale(value, factor):\n    result = value * factor\n    return result\n"
RENAME_AFTER = RENAME_BEFORE.replace("(value,", "(amount,")


@dataclass(frozen=True, slots=True)
class Timing:
    text: str
    first_s: float  # to the first text
    rest_s: float  # after it
    tokens: int
    decodes: int | None  # None: one a token


def request_of(key: str, opened: str, steps: list[tuple[int, str]], cursor: int) -> EditRequest:
    """The request the service assembles after `steps` (each: the line changed, the text
    after), with the cursor at offset `cursor` of the last text."""
    clock = [0.0]
    history = EditHistory(clock=lambda: clock[0])
    uri = f"file:///ws/{key}"
    history.opened(uri, opened)
    for line, text in steps:
        clock[0] += 10  # each step an edit of its own
        history.changed(uri, key, text, line)
    clock[0] += 10
    text = steps[-1][1]
    return EditRequest(
        uri=uri,
        path=key,
        text=text,
        cursor=cursor,
        region=editable_region(text, cursor),
        history=history.recent(),
        language="python",
    )


def task_request(task: Task) -> EditRequest:
    steps, text = [], task.opened
    for step in task.history:
        lines = text.split("\n")
        lines[step.start : step.end] = step.new
        text = "\n".join(lines)
        steps.append((step.start, text))
    line, column = task.cursor
    cursor = sum(len(x) + 1 for x in text.split("\n")[:line]) + column
    return request_of(task.path, task.opened, steps, cursor)


def requests(limit: int) -> list[tuple[str, EditRequest]]:
    rename = request_of("scale.py", RENAME_BEFORE, [(0, RENAME_AFTER)], len("def scale(amount"))
    edits = [t for t in chosen_tasks(limit) if t.kind == "edit"]
    return [("rename", rename)] + [(t.key.split("@")[1][:24], task_request(t)) for t in edits]


async def timed(
    backend: LocalBackend, ask: Callable[[Usage], AsyncIterator[str]], drafted: bool
) -> Timing:
    llm = backend._llm
    assert llm is not None
    llm.reset()  # both paths read the whole prompt
    backend._edit_saved = None
    decodes_before = backend.copying.decodes
    usage = Usage()
    started = time.perf_counter()
    first: float | None = None
    pieces = []
    async for piece in ask(usage):
        if first is None:
            first = time.perf_counter()
        pieces.append(piece)
    ended = time.perf_counter()
    first = first if first is not None else ended
    decodes = backend.copying.decodes - decodes_before if drafted else None
    return Timing("".join(pieces), first - started, ended - first, usage.completion_tokens, decodes)


def print_decode_costs(backend: LocalBackend) -> None:
    import llama_cpp
    import numpy as np

    llm = backend._llm
    assert llm is not None
    llm.reset()
    prompt = llm.tokenize(Path(__file__).read_bytes())[:300]
    llm.eval(prompt)
    batch = llama_cpp.llama_batch_init(16, 0, 1)
    print(f"{'decode of n tokens':<20} {'logits at each':>15} {'at the last':>12}")
    for n in (1, 2, 4, 8, 13, 16):
        cells = []
        for every in (True, False):
            times = []
            for _ in range(5):
                llm._ctx.kv_cache_seq_rm(0, len(prompt), -1)
                _fill(batch, prompt[100 : 100 + n], len(prompt))
                for index in range(n - 1):
                    batch.logits[index] = every
                started = time.perf_counter()
                llama_cpp.llama_decode(llm.ctx, batch)
                for index in range(n if every else 0):
                    logits = llama_cpp.llama_get_logits_ith(llm.ctx, index)
                    np.ctypeslib.as_array(logits, shape=(llm.n_vocab(),)).argmax()
                times.append(time.perf_counter() - started)
            cells.append(f"{1000 * statistics.median(times):.0f} ms")
        print(f"{n:<20} {cells[0]:>15} {cells[1]:>12}")
    llama_cpp.llama_batch_free(batch)
    llm.reset()
    print()


def row(name: str, path: str, timing: Timing, same: bool) -> str:
    per_token = 1000 * timing.rest_s / max(timing.tokens - 1, 1)
    per_decode = timing.tokens / timing.decodes if timing.decodes else 1.0
    return (
        f"{name:<26} {path:<8} {timing.first_s:>8.2f} {timing.rest_s:>8.2f} "
        f"{timing.first_s + timing.rest_s:>8.2f} {timing.tokens:>7} {per_token:>9.0f} "
        f"{per_decode:>9.1f} {'yes' if same else 'NO':>5}"
    )


async def main_async(args: argparse.Namespace) -> None:
    config = LocalConfig(model=args.model, n_threads=args.threads, deadline_ms=600_000)
    backend = LocalBackend(config)
    await backend.ensure_loaded()
    print(
        f"{args.model}, n_threads {args.threads}; load average before "
        f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    print_decode_costs(backend)
    header = (
        f"{'request':<26} {'path':<8} {'first s':>8} {'after s':>8} {'total s':>8} "
        f"{'tokens':>7} {'ms/token':>9} {'tok/dec':>9} {'same':>5}"
    )
    print(header)
    print("-" * len(header))
    first, second = (
        ("configured", "cores")
        if args.cores
        else ("whole", "rejoin")
        if args.rejoin
        else ("chat", "drafted")
    )
    totals: dict[str, list[float]] = {first: [], second: []}
    writing: dict[str, list[float]] = {first: [], second: []}
    cores = backend._edit_cores
    permit = permit_for(backend)
    for name, request in requests(args.limit):
        call: EditCall = edit_call(request, None)
        for _ in range(args.rounds):
            if args.cores:
                backend._edit_cores = 1
                one = await timed(backend, partial(backend.edit, call, permit=permit), True)
                backend._edit_cores = cores
                other = await timed(backend, partial(backend.edit, call, permit=permit), True)
            elif args.rejoin:
                whole = replace(call, rewrites=None)
                one = await timed(backend, partial(backend.edit, whole, permit=permit), True)
                other = await timed(backend, partial(backend.edit, call, permit=permit), True)
            else:
                one = await timed(
                    backend,
                    partial(backend.chat, call.as_chat(), permit=permit),
                    False,
                )
                other = await timed(backend, partial(backend.edit, call, permit=permit), True)
            if args.rejoin:
                same = edits_of(request, one.text) == edits_of(request, other.text)
            else:
                same = one.text == other.text
            for path, timing in ((first, one), (second, other)):
                print(row(name, path, timing, same), flush=True)
                totals[path].append(timing.first_s + timing.rest_s)
                writing[path].append(timing.rest_s)
    print(f"load average after {os.getloadavg()[0]:.2f}")
    for path in (first, second):
        print(
            f"{path}: total p50 {statistics.median(totals[path]):.2f} s, "
            f"writing p50 {statistics.median(writing[path]):.2f} s"
        )
    for part, figures in (("writing", writing), ("total", totals)):
        ratio = statistics.median(
            b / a for b, a in zip(figures[second], figures[first], strict=True)
        )
        print(f"{part}, {second} over {first}, median of the per-request ratios: {ratio:.2f}")
    if args.cores and args.keystroke_after is not None:
        await print_keystrokes(backend, args.limit, args.keystroke_after)
    if args.interleaved:
        await print_interleaved(backend, args.limit)
    await backend.aclose()


def edits_of(request: EditRequest, answer: str) -> list[OffsetEdit] | str:
    """The document edits an answer makes, or why it was dropped."""
    try:
        new_region = read_answer("chat", answer)
        return region_edits(request, new_region) if new_region is not None else []
    except ValueError as error:
        return str(error)


async def edit_s(backend: LocalBackend, call: EditCall) -> float:
    started = time.perf_counter()
    await drain(backend.edit(call, Usage(), permit=permit_for(backend)))
    return time.perf_counter() - started


async def print_interleaved(backend: LocalBackend, limit: int) -> None:
    """A next edit and a keystroke taking turns on the model: each one's time, and the next
    edit's prompt tokens found in the cache, after the other ran (`edit_cache`); "before":
    the edit's prompt not kept aside, as each keystroke's and edit's own turn found it."""
    llm = backend._llm
    assert llm is not None
    print()
    print("a next edit and a keystroke taking turns, s (prompt tokens found in the cache)")
    print(
        f"{'request':<26} {'keystroke':>10} {'edit':>12} {'keystroke':>10} "
        f"{'edit, before':>13} {'edit, now':>13}"
    )
    columns: dict[str, list[float]] = {name: [] for name in ("k0", "e0", "k1", "before", "now")}
    for name, request in requests(limit):
        call = edit_call(request, None)
        llm.reset()
        backend._edit_saved = None
        cold_keystroke = await first_text_s(backend)
        cold_edit = await edit_s(backend, call)
        cold_found = backend.last_reused_tokens
        keystroke = await first_text_s(backend)  # after the edit
        now = await edit_s(backend, call)
        now_found = backend.last_reused_tokens
        backend._edit_saved = None  # before: the keystroke's turn left nothing of the edit
        await first_text_s(backend)
        before = await edit_s(backend, call)
        before_found = backend.last_reused_tokens
        for key, value in zip(
            columns, (cold_keystroke, cold_edit, keystroke, before, now), strict=True
        ):
            columns[key].append(value)
        print(
            f"{name:<26} {cold_keystroke:>10.2f} {cold_edit:>6.2f} ({cold_found:>3}) "
            f"{keystroke:>10.2f} {before:>6.2f} ({before_found:>3}) {now:>6.2f} ({now_found:>3})",
            flush=True,
        )
    print(
        "p50: "
        + ", ".join(f"{key} {statistics.median(values):.2f} s" for key, values in columns.items())
        + " (k0: the keystroke first, e0: the edit after it, k1: the keystroke after the edit)"
    )


KEYSTROKE = CompletionRequest(
    prefix="import statistics\n\n\ndef average(values):\n    return ",
    suffix="\n",
    max_tokens=8,
)


async def first_text_s(backend: LocalBackend) -> float:
    started = time.perf_counter()
    async for piece in backend.complete(KEYSTROKE, permit=permit_for(backend)):
        if piece:
            break
    return time.perf_counter() - started


async def print_keystrokes(backend: LocalBackend, limit: int, after_s: float) -> None:
    """A keystroke `after_s` into each edit, on the configured threads and on all cores, and
    alone: its time to the first text."""
    llm = backend._llm
    assert llm is not None
    cores = backend._edit_cores
    seconds: dict[str, list[float]] = {"alone": [], "configured": [], "cores": []}
    print()
    print(f"a keystroke {after_s:.1f} s into a next edit: its time to the first text, s")
    print(f"{'request':<26} {'alone':>8} {'configured':>11} {'cores':>8}")
    for name, request in requests(limit):
        call = edit_call(request, None)
        row_s = []
        for path in ("alone", "configured", "cores"):
            llm.reset()
            backend._edit_saved = None
            backend._edit_cores = 1 if path == "configured" else cores
            edit = None
            if path != "alone":
                edit = asyncio.create_task(
                    drain(backend.edit(call, Usage(), permit=permit_for(backend)))
                )
                await asyncio.sleep(after_s)
            took = await first_text_s(backend)
            if edit is not None:
                await edit
            seconds[path].append(took)
            row_s.append(took)
        backend._edit_cores = cores
        print(f"{name:<26} {row_s[0]:>8.2f} {row_s[1]:>11.2f} {row_s[2]:>8.2f}", flush=True)
    print(
        "p50: "
        + ", ".join(f"{path} {statistics.median(times):.2f} s" for path, times in seconds.items())
    )


async def drain(pieces: AsyncIterator[str]) -> None:
    async for _piece in pieces:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--limit", type=int, default=6, help="bench_next_edit's first N edits")
    parser.add_argument("--rounds", type=int, default=1, help="each request this many times")
    parser.add_argument(
        "--cores", action="store_true", help="the configured threads against every core"
    )
    parser.add_argument("--busy", action="store_true", help="one core held by a busy loop")
    parser.add_argument(
        "--rejoin", action="store_true", help="the region written out whole against rejoin"
    )
    parser.add_argument(
        "--interleaved", action="store_true", help="next edits and keystrokes taking turns"
    )
    parser.add_argument(
        "--keystroke-after", type=float, default=None, help="with --cores: a keystroke this late"
    )
    args = parser.parse_args()
    with one_core_busy() if args.busy else contextlib.nullcontext():
        asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
