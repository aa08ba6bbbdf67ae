"""What a read-ahead leaves reusable when the first keystroke comes elsewhere: deterministic.

    python -m bench.bench_prompt_reuse [--models gemma-3-270m,qwen2.5-coder-0.5b]
                                       [--moves -20,-5,5,20,40] [--seed 0] [--limit N]

Each of bench_quality's cold tasks (bench/quality_set.py) is a document opened with the cursor
reported at the task's line: the read-ahead reads that prompt whole into the KV cache. The first
keystroke then comes N lines lower (N > 0) or higher, after that line's indentation. The prompts
are written as the server writes them (the editor's request, then the local model's prompt in
its own tokens); the figure is how many of the keystroke's prompt tokens the cache lacks, which
is what llama-cpp-python evaluates (its longest common prefix with what it holds). Only the
tokenizer is loaded: the counts do not depend on the machine or its load.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.quality_set import Task, draw_tasks, masked_text, stdlib_root
from lsp_server.backends.base import CompletionRequest
from lsp_server.backends.bundled_model import ensure_preset_model
from lsp_server.backends.local.prompt import CompletionPrompts
from lsp_server.backends.model_presets import preset_named
from lsp_server.config.model import LocalConfig
from lsp_server.suggest.prompt import build_completion_request

if TYPE_CHECKING:
    from llama_cpp import Llama

DEFAULT_SIZE = {"lines": 16, "spans": 6, "cross_file": 18}


@dataclass(frozen=True, slots=True)
class Move:
    prompt_tokens: int
    evaluated: int  # tokens of the keystroke's prompt the KV cache lacked


def request_at(text: str, line: int, config: LocalConfig) -> CompletionRequest:
    """The editor's request with the cursor after `line`'s indentation."""
    lines = text.splitlines(keepends=True)
    body = lines[line].rstrip("\r\n")
    offset = sum(len(earlier) for earlier in lines[:line]) + len(body) - len(body.lstrip(" \t"))
    return build_completion_request(
        text, offset, language="python", path="task.py", max_tokens=config.max_tokens
    )


def moves(
    llm: Llama,
    config: LocalConfig,
    task: Task,
    offsets: Sequence[int],
) -> dict[int, Move]:
    """Per line offset: the keystroke's prompt after the read-ahead at the task's cursor."""
    from llama_cpp import Llama

    source = (stdlib_root() / task.relpath).read_text(encoding="utf-8", errors="replace")
    text, cursor_line = masked_text(source, task, 0)
    line_count = len(text.splitlines())
    found: dict[int, Move] = {}
    for offset in offsets:
        target = cursor_line + offset
        if not 0 <= target < line_count:
            continue
        prompts = CompletionPrompts(llm, config, 0)
        read_ahead = prompts.build(request_at(text, cursor_line, config), config.max_tokens)
        keystroke = prompts.build(request_at(text, target, config), config.max_tokens)
        held = min(Llama.longest_token_prefix(read_ahead, keystroke), len(keystroke) - 1)
        found[offset] = Move(len(keystroke), len(keystroke) - held)
    return found


def run(model: str, tasks: Sequence[Task], offsets: Sequence[int]) -> None:
    import llama_cpp

    config = LocalConfig(model=model)
    path = ensure_preset_model(preset_named(model))
    llm = llama_cpp.Llama(str(path), vocab_only=True, n_ctx=config.n_ctx, verbose=False)
    by_offset: dict[int, list[Move]] = {offset: [] for offset in offsets}
    for task in tasks:
        for offset, move in moves(llm, config, task, offsets).items():
            by_offset[offset].append(move)
    print(f"{model}: window_tokens {config.window_tokens}, {len(tasks)} tasks")
    print("  lines moved  tasks  prompt  evaluated (mean, median)  reused share")
    for offset, found in by_offset.items():
        if not found:
            continue
        evaluated = [m.evaluated for m in found]
        reused = statistics.fmean(1 - m.evaluated / m.prompt_tokens for m in found)
        prompt = statistics.fmean(m.prompt_tokens for m in found)
        print(
            f"  {offset:+11d}  {len(found):5d}  {prompt:6.0f}"
            f"  {statistics.fmean(evaluated):9.0f} {statistics.median(evaluated):8.0f}"
            f"        {100 * reused:5.1f} %"
        )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gemma-3-270m,qwen2.5-coder-0.5b")
    parser.add_argument("--moves", default="-20,-5,5,20,40", help="lines, comma-separated")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=0, help="only the first N tasks")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    tasks = draw_tasks(args.seed, **DEFAULT_SIZE)
    if args.limit:
        tasks = tasks[: args.limit]
    offsets = [int(o) for o in args.moves.split(",") if o.strip()]
    for model in (m.strip() for m in args.models.split(",") if m.strip()):
        run(model, tasks, offsets)


if __name__ == "__main__":
    main()
