"""A warm keystroke as `model = "auto"` predicts it, against the same keystroke measured.

    python -m bench.bench_keystroke_model [--presets a,b] [--tasks 12] [--keystrokes 3]
                                          [--threads N] [--busy] [--json FILE]

`auto` serves the best preset whose predicted keystrokes fit `local.deadline_ms`
(`backends/local/auto_choice.py`, `keystroke_cost.py`), predicted from the preset's calibration:
a warm one, measured here, and a document's first, printed beside it (`bench_quality --first`
measures that one through the server). Here each installed
preset is calibrated as the server calibrates it (`calibration.measure`, on a model of its own),
then asked bench_quality's tasks (masked lines of the standard library, several files) in this
process, through `LocalBackend` at the shipped settings but for the deadline (none: each
keystroke is measured whole, as bench_quality's generous answer deadline does): each masked
document's cold suggestion first, then `--keystrokes` keystrokes typing the masked code's first
characters, each a whole suggestion as an editor asks for it. Per keystroke it records the
prompt tokens read past the KV cache, the tokens sampled and the time; it prints, per preset,
the measured p50/p90 beside the prediction and their ratio, and the token counts a prediction
rests on. The calibration and the keystrokes run in the same minute, so the ratio holds at the
load there was; the load average is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.harness.busy_machine import one_core_busy
from bench.harness.percentile import percentile
from bench.harness.permits import permit_for
from bench.quality_set import Task, draw_tasks, masked_text, stdlib_root
from lsp_server.backends.base import CompletionRequest, Usage
from lsp_server.backends.bundled_model import ensure_preset_model, preset_installed
from lsp_server.backends.local.auto_choice import fits
from lsp_server.backends.local.backend import LocalBackend
from lsp_server.backends.local.calibration import Speed, measure
from lsp_server.backends.local.keystroke_cost import first_keystroke_s, warm_keystroke_s
from lsp_server.backends.local.loading import open_model
from lsp_server.backends.model_presets import PRESETS, ModelPreset
from lsp_server.config.model import LocalConfig
from lsp_server.suggest.prompt import build_completion_request

# The keystroke is measured whole: no prompt is cut to a deadline and none ends one.
NO_DEADLINE_MS = 600_000
SHIPPED = LocalConfig()


def earlier_prediction_s(speed: Speed) -> float:
    """The prediction before the keystroke was measured: 8 prompt tokens at the calibrated
    prompt speed and a 12-token line; printed beside the measurement for comparison."""
    return 8 / speed.prompt_tps + 12 / speed.generation_tps


@dataclass(frozen=True, slots=True)
class Keystroke:
    preset: str
    task: str
    typed: int  # characters of the masked code typed so far
    read_tokens: int  # prompt tokens the KV cache did not hold
    sampled_tokens: int
    first_text_s: float | None
    seconds: float
    answer: str


async def suggestion(
    backend: LocalBackend, request: CompletionRequest
) -> tuple[str, int, float | None, float]:
    """The whole suggestion: its text, tokens sampled, first text and total seconds."""
    usage = Usage()
    parts: list[str] = []
    first: float | None = None
    start = time.perf_counter()
    async for text in backend.complete(request, usage, permit=permit_for(backend)):
        if first is None and text:
            first = time.perf_counter() - start
        parts.append(text)
    return "".join(parts), usage.completion_tokens, first, time.perf_counter() - start


def calibrate(path: Path, config: LocalConfig) -> Speed:
    """The server's calibration of the model at `path` (a model of its own, closed after)."""
    llm = open_model(path, config)
    try:
        speed = measure(llm, threading.Event())
    finally:
        llm.close()
    if speed is None:
        raise RuntimeError("calibration stopped")
    return speed


def request_at(task: Task, typed: int) -> CompletionRequest:
    """The editor's request after typing `typed` characters of the masked code."""
    source = (stdlib_root() / task.relpath).read_text(encoding="utf-8", errors="replace")
    text, cursor_line = masked_text(source, task, 0)
    lines = text.splitlines(keepends=True)
    offset = sum(len(line) for line in lines[:cursor_line]) + len(task.indent)
    text = text[:offset] + task.target[:typed] + text[offset:]
    return build_completion_request(
        text,
        offset + typed,
        language="python",
        path=f"file:///ws/{task.relpath}",
        max_tokens=SHIPPED.max_tokens,
    )


async def run_preset(
    preset: ModelPreset, tasks: list[Task], keystrokes: int, threads: int
) -> tuple[Speed, list[Keystroke]]:
    path = ensure_preset_model(preset)
    config = LocalConfig(
        model_path=str(path), n_threads=threads, deadline_ms=NO_DEADLINE_MS, model=preset.name
    )
    speed = calibrate(path, config)
    predicted = warm_keystroke_s(speed, SHIPPED.deadline_ms)
    backend = LocalBackend(config)
    await backend.ensure_loaded()
    rows: list[Keystroke] = []
    try:
        for task in tasks:
            await suggestion(backend, request_at(task, 0))  # the cold one: the prompt is read
            for typed in range(1, min(keystrokes, len(task.target) - 1) + 1):
                answer, sampled, first, seconds = await suggestion(backend, request_at(task, typed))
                read = max(backend.last_prompt_tokens - backend.last_reused_tokens, 0)
                rows.append(
                    Keystroke(
                        preset.name,
                        task.key,
                        typed,
                        read,
                        sampled,
                        first,
                        seconds,
                        answer,
                    )
                )
                print(
                    f"  {preset.name} {task.key} +{typed}: read {read}, sampled {sampled}, "
                    f"{seconds * 1000:.0f} ms (predicted {predicted * 1000:.0f}) {answer!r}",
                    file=sys.stderr,
                )
    finally:
        await backend.aclose()
    return speed, rows


def print_table(results: dict[str, tuple[Speed, list[Keystroke]]]) -> None:
    """Per preset: calibration, token counts, measured keystrokes against the prediction (and
    the earlier one), the keystroke in decodes (seconds x calibrated generation speed), the
    predicted first keystroke in a document, and whether `auto` counts the preset as fitting."""
    deadline_s = SHIPPED.deadline_ms / 1000
    print(
        f"{'preset':<20} {'prompt t/s':>10} {'gen t/s':>7} {'n':>3} {'read':>4} "
        f"{'sampled':>7} {'decodes':>7} {'p50 ms':>6} {'p90 ms':>6} {'<=dl %':>6} "
        f"{'pred ms':>7} {'p50/pred':>8} {'before ms':>9} {'p50/before':>10} {'first ms':>8} "
        f"{'fits':>4}"
    )
    for name, (speed, rows) in results.items():
        if not rows:
            continue
        seconds = [r.seconds for r in rows]
        predicted = warm_keystroke_s(speed, SHIPPED.deadline_ms)
        before = earlier_prediction_s(speed)
        first = first_keystroke_s(speed)
        p50 = percentile(seconds, 0.5)
        print(
            f"{name:<20} {speed.prompt_tps:>10.1f} {speed.generation_tps:>7.1f} {len(rows):>3} "
            f"{statistics.median(r.read_tokens for r in rows):>4.0f} "
            f"{statistics.median(r.sampled_tokens for r in rows):>7.0f} "
            f"{percentile([s * speed.generation_tps for s in seconds], 0.5):>7.1f} "
            f"{p50 * 1000:>6.0f} {percentile(seconds, 0.9) * 1000:>6.0f} "
            f"{100 * sum(s <= deadline_s for s in seconds) / len(seconds):>6.0f} "
            f"{predicted * 1000:>7.0f} {p50 / predicted:>8.2f} "
            f"{before * 1000:>9.0f} {p50 / before:>10.2f} {first * 1000:>8.0f} "
            f"{'yes' if fits(speed, SHIPPED.deadline_ms) else 'no':>4}"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="", help="comma-separated; default: every installed")
    parser.add_argument("--tasks", type=int, default=12, help="bench_quality tasks per preset")
    parser.add_argument("--keystrokes", type=int, default=3, help="typed characters per task")
    parser.add_argument("--threads", type=int, default=SHIPPED.n_threads)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--busy", action="store_true", help="keep one core busy")
    parser.add_argument("--json", type=Path, help="also write every keystroke here")
    args = parser.parse_args()
    names = [n.strip() for n in args.presets.split(",") if n.strip()]
    presets = (
        [PRESETS[n] for n in names]
        if names
        else [p for p in PRESETS.values() if p.exact_lines is not None and preset_installed(p)]
    )
    # The default draw mixes lines, spans and cross-file lines; interleave them so that a few
    # tasks still come from several files and kinds.
    drawn = draw_tasks(args.seed, lines=16, spans=6, cross_file=18)
    tasks = drawn[:: max(1, len(drawn) // args.tasks)][: args.tasks]
    print(
        f"{len(tasks)} tasks from {len({t.relpath for t in tasks})} files, {args.keystrokes} "
        f"keystrokes each; n_threads {args.threads}; "
        f"{'one core busy' if args.busy else 'no extra load'}; "
        f"load average before {os.getloadavg()[0]:.2f}"
    )
    results: dict[str, tuple[Speed, list[Keystroke]]] = {}
    with one_core_busy() if args.busy else contextlib.nullcontext():
        for preset in presets:
            results[preset.name] = await run_preset(preset, tasks, args.keystrokes, args.threads)
            if args.json:
                args.json.write_text(
                    json.dumps(
                        {
                            name: {"speed": asdict(speed), "keystrokes": [asdict(r) for r in rows]}
                            for name, (speed, rows) in results.items()
                        },
                        indent=1,
                    )
                )
    print(f"load average after {os.getloadavg()[0]:.2f}")
    print_table(results)


if __name__ == "__main__":
    asyncio.run(main())
