"""What a suggestion is worth: masked lines of real code, asked through the real server over LSP.

    python -m bench.bench_quality [--models gemma-3-270m,qwen2.5-coder-0.5b] [--context off,on]
                                  [--full] [--seed 0] [--threads 1] [--no-busy]
    python -m bench.bench_quality --first 3 [--models auto] [--clients ours,stock]
    python -m bench.bench_quality --llama-server --models qwen2.5-coder-1.5b [--skip N] --limit 18

The tasks (bench/quality_set.py) mask single lines, two- and three-line spans, and a cross-file
subset of lines that use a name imported from another module of their package, all from the
standard library of the Python that runs the bench. For each condition (a local-model preset or
a `.gguf` file, context beyond the file on or off) one `gateway-ls serve` runs over stdio,
configured for the local model alone, and every task is asked as an editor would ask it: the
imported modules are opened first as tabs (context on only), then the masked file; an inline
completion at the cursor (cold: the document was just opened), then one typed character and
another request (warm: the keystroke after it, the prompt's start already in the model's KV
cache).

Scores, on the cold answer: exact match of the masked line(s), whitespace-trimmed; edit
similarity (CrossCodeEval's: rapidfuzz's normalized Indel ratio); identifier match (the same
identifiers in the same order); empty answers. Latency: cold and warm, as the client sees it,
and the share of warm keystrokes inside `local.deadline_ms`; "asked" are the warm keystrokes
that did not type into the cold answer (so the model was asked again, not the server's cache).
The warm suggestion is scored too ("warm ex%"): exact when the typed character and it give
the target.
Each pair of conditions is compared on the same tasks, with a paired bootstrap 95 % confidence
interval of the difference, and what B's cold request costs against A's (the ratio of the cold
medians, and the median of the per-task ratios).

The answer is given time (`--answer-deadline-ms`, default 60 s) so that quality is the model's
own; latency is what decides whether it fits the keystroke budget. By default one core is kept
busy (a build beside the editor), as a two-core laptop would have it.

`--llama-server` asks llama.cpp's own server instead of the local model: each condition runs a
`llama-server` (`make llama-server`) serving the preset's file, reached as a remote endpoint of
`kind = "llamacpp"` at its shipped settings (`/infill`; context on is what that endpoint sends,
`input_extra` within its `context_tokens`). The conditions are asked task by task in turn, each
against its own server and KV cache, so that the load is shared alike and a run stopped early
keeps pairs.

`--first S` measures the first keystroke instead, at the shipped settings (the shipped
`local.deadline_ms`, threads and model unless `--threads` or `--models` name others): each
document is opened, read for S seconds, and asked once. "ours" clients report the cursor
(`gatewayLs/didMoveCursor`, as the VS Code extension does), "stock" ones (plain Neovim, eglot)
do not; the clients alternate task by task within one server, so the load is shared alike.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import io
import json
import os
import statistics
import sys
import tempfile
import time
import tokenize
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass, field, fields
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from rapidfuzz import fuzz

from bench.harness.bootstrap import paired_bootstrap
from bench.harness.busy_machine import one_core_busy
from bench.harness.editor_session import (
    inline,
    isolated_env,
    logging_client,
    open_file,
    utf16_len,
    wait_until_loaded,
)
from bench.harness.llama_server import running_llama_server
from bench.harness.percentile import percentile
from bench.quality_set import Task, draw_tasks, masked_text, stdlib_root
from lsp_server.backends.bundled_model import ensure_preset_model
from lsp_server.backends.model_presets import DEFAULT_PRESET, preset_named
from lsp_server.config.model import LocalConfig, RoutingConfig
from lsp_server.lsp.cursor_report import NOTIFY_CURSOR

DEFAULT_SIZE = {"lines": 16, "spans": 6, "cross_file": 18}
FULL_SIZE = {"lines": 50, "spans": 20, "cross_file": 75}
SHIPPED_DEADLINE_MS = LocalConfig().deadline_ms
CONTEXT_KNOWN = "context" in {f.name for f in fields(RoutingConfig)}
# The context of `--llama-server`'s servers: `/infill` fills only what is left beyond one batch
# (2048 tokens) with `input_extra`, so a server started with less context drops all of it.
LLAMA_SERVER_N_CTX = 8192


@dataclass(frozen=True, slots=True)
class Condition:
    model: str
    context: bool
    client: str = ""  # --first: "ours" (reports the cursor) or "stock"
    read_ahead: bool = True  # `[local] read_ahead`

    @property
    def label(self) -> str:
        client = f" {self.client}" if self.client else ""
        reading = "" if self.read_ahead else " read-ahead-off"
        return f"{Path(self.model).name} ctx-{'on' if self.context else 'off'}{client}{reading}"

    @property
    def model_file(self) -> bool:
        """The model is a `.gguf` file of its own (`[local] model_path`), not a preset."""
        return self.model.endswith(".gguf")


@dataclass(slots=True)
class Outcome:
    task: Task
    answer: str
    cold_ms: float
    warm_ms: float
    warm_answer: str = ""
    exact: bool = field(init=False)
    similarity: float = field(init=False)
    identifiers: bool = field(init=False)
    # The warm keystroke's suggestion, after the typed character, is the rest of the target.
    warm_exact: bool = field(init=False)

    def __post_init__(self) -> None:
        got = _first_lines(self.answer, self.task.lines)
        self.exact = got == self.task.target
        self.similarity = fuzz.ratio(got, self.task.target) / 100
        self.identifiers = _identifiers(got) == _identifiers(self.task.target)
        typed_and_suggested = self.task.target[0] + self.warm_answer
        self.warm_exact = _first_lines(typed_and_suggested, self.task.lines) == self.task.target

    @property
    def empty(self) -> bool:
        return not self.answer.strip()

    @property
    def typed_into_answer(self) -> bool:
        """The warm keystroke typed the cold answer's first character: the server may serve
        the rest of that answer from its cache without asking the model."""
        return self.answer.lstrip().startswith(self.task.target[0])


def _first_lines(answer: str, count: int) -> str:
    lines = [line.strip() for line in answer.splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines[:count])


def _identifiers(code: str) -> list[str]:
    names: list[str] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.NAME:
                names.append(tok.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return names


# Asking the server


def capabilities() -> types.ClientCapabilities:
    return types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(
            inline_completion=types.InlineCompletionClientCapabilities(),
            synchronization=types.TextDocumentSyncClientCapabilities(),
        ),
    )


def config_text(
    condition: Condition, args: argparse.Namespace, llama_server: str | None = None
) -> str:
    if llama_server is not None:
        return llama_server_config(condition, args, llama_server)
    routing = '[routing]\noffline = "always"\n'
    if CONTEXT_KNOWN:
        routing += f"context = {'true' if condition.context else 'false'}\n"
    if condition.model_file:
        local = f"[local]\nmodel_path = {json.dumps(str(Path(condition.model).resolve()))}\n"
    else:
        local = f'[local]\nmodel = "{condition.model}"\n'
    if args.threads is not None:
        local += f"n_threads = {args.threads}\n"
    elif args.first is None:
        local += "n_threads = 1\n"
    if args.first is None:
        local += f"deadline_ms = {args.answer_deadline_ms}\n"
    if not condition.read_ahead:
        local += "read_ahead = false\n"
    if args.window_tokens is not None:
        local += f"window_tokens = {args.window_tokens}\n"
    if condition.context and args.first is None:
        # Context on is a budget: the presets' own is 0, where context measured no help.
        local += f"context_tokens = {args.context_tokens}\n"
    return routing + local


def llama_server_config(condition: Condition, args: argparse.Namespace, root: str) -> str:
    """The local model off, one `llamacpp` endpoint at `root` with the shipped settings of
    its kind (its `context_tokens` unless `--endpoint-context-tokens` names a budget), and the
    answer given time."""
    deadline = args.answer_deadline_ms
    endpoint = (
        f'[[endpoints]]\nname = "llama"\nkind = "llamacpp"\nbase_url = "{root}"\n'
        f'model = "{condition.model}"\nroles = ["inline"]\ntimeout_ms = {deadline}\n'
    )
    if args.endpoint_context_tokens is not None:
        endpoint += f"context_tokens = {args.endpoint_context_tokens}\n"
    return (
        f'[routing]\noffline = "never"\ncontext = {"true" if condition.context else "false"}\n'
        f"inline_deadline_ms = {deadline}\nhedge_after_ms = {deadline - 1}\n"
        f"[local]\nenabled = false\n{endpoint}"
    )


async def run_condition(
    condition: Condition,
    tasks: Sequence[Task],
    args: argparse.Namespace,
    workdir: Path,
    outcomes: list[Outcome],
    after_each: Callable[[], None],
    outcomes_by_client: dict[str, list[Outcome]] | None = None,
) -> None:
    """Ask every task under `condition`, appending to `outcomes` as answers come (with
    `--first`, to `outcomes_by_client`)."""
    root = stdlib_root()
    async with serving(condition, args, workdir) as (client, workspace):
        for index, task in enumerate(tasks):
            folder = workspace / f"t{index}"
            if args.first is not None:
                assert outcomes_by_client is not None
                for variant in outcomes_by_client:
                    ours = dataclasses.replace(condition, client=variant)
                    outcome = await _ask_first(
                        client, task, root, folder / variant, ours, args.first
                    )
                    outcomes_by_client[variant].append(outcome)
                    await _evict(client, workspace)
                after_each()
                continue
            outcomes.append(await _ask(client, task, root, folder, condition, args.window_chars))
            after_each()
            _report(args, condition, outcomes[-1])


async def run_in_turn(
    conditions: Sequence[Condition],
    tasks: Sequence[Task],
    args: argparse.Namespace,
    workdir: Path,
    results: dict[Condition, list[Outcome]],
    after_each: Callable[[], None],
) -> None:
    """Every condition served at once (each by its own servers), each task asked under one
    condition after the other."""
    root = stdlib_root()
    async with AsyncExitStack() as stack:
        sessions = [
            (condition, *await stack.enter_async_context(serving(condition, args, workdir)))
            for condition in conditions
        ]
        for index, task in enumerate(tasks):
            for condition, client, workspace in sessions:
                folder = workspace / f"t{index}"
                outcome = await _ask(client, task, root, folder, condition, args.window_chars)
                results.setdefault(condition, []).append(outcome)
                _report(args, condition, outcome)
            after_each()


def _report(args: argparse.Namespace, condition: Condition, o: Outcome) -> None:
    if args.verbose:
        print(
            f"  {condition.label} {o.task.key} exact={o.exact} "
            f"cold={o.cold_ms:.0f} warm={o.warm_ms:.0f} "
            f"got={_first_lines(o.answer, o.task.lines)!r} want={o.task.target!r}",
            file=sys.stderr,
        )


@contextlib.asynccontextmanager
async def serving(
    condition: Condition, args: argparse.Namespace, workdir: Path
) -> AsyncIterator[tuple[LanguageClient, Path]]:
    """A `gateway-ls serve` for `condition` (with `--llama-server`, in front of a `llama-server`
    of its own), initialized and with its model loaded; the client and its workspace."""
    home = workdir / condition.label.replace(" ", "_")
    workspace = home / "ws"
    workspace.mkdir(parents=True)
    async with contextlib.AsyncExitStack() as stack:
        upstream = None
        if args.llama_server:
            model = ensure_preset_model(preset_named(condition.model))
            upstream = stack.enter_context(
                running_llama_server(
                    model,
                    home / "llama-server.log",
                    n_ctx=LLAMA_SERVER_N_CTX,
                    threads=args.threads or 1,
                )
            )
        config = home / "config.toml"
        config.write_text(config_text(condition, args, upstream))
        env = isolated_env(home)
        client = logging_client("bench-quality")
        await client.start_io(
            sys.executable,
            "-m",
            "lsp_server",
            "serve",
            "--config",
            str(config),
            "--log-level",
            args.server_log_level,
            env=env,
        )
        try:
            await client.initialize_async(
                types.InitializeParams(capabilities=capabilities(), root_uri=workspace.as_uri())
            )
            client.initialized(types.InitializedParams())
            await wait_until_loaded(client, workspace)
            yield client, workspace
        finally:
            # A server that died (its error is what propagates) cannot be shut down politely.
            with contextlib.suppress(RuntimeError):
                await client.shutdown_async(None)
                client.exit(None)
            await client.stop()


async def _ask(
    client: LanguageClient,
    task: Task,
    root: Path,
    folder: Path,
    condition: Condition,
    window_chars: int,
) -> Outcome:
    source = (root / task.relpath).read_text(encoding="utf-8", errors="replace")
    text, cursor_line = masked_text(source, task, window_chars)
    target_path = folder / task.relpath
    target_path.parent.mkdir(parents=True, exist_ok=True)
    target_path.write_text(text, encoding="utf-8")
    opened = []
    for tab in task.tabs:
        tab_path = folder / tab
        tab_path.parent.mkdir(parents=True, exist_ok=True)
        tab_text = (root / tab).read_text(encoding="utf-8", errors="replace")
        tab_path.write_text(tab_text, encoding="utf-8")
        if condition.context:
            open_file(client, tab_path, tab_text)
            opened.append(tab_path)
    open_file(client, target_path, text)
    opened.append(target_path)
    await _gathered(client)
    position = types.Position(line=cursor_line, character=utf16_len(task.indent))

    start = time.perf_counter()
    answer = await inline(client, target_path, position)
    cold_ms = (time.perf_counter() - start) * 1000

    after = _type_first_character(client, target_path, position, task.target[0])
    start = time.perf_counter()
    warm_answer = await inline(client, target_path, after)
    warm_ms = (time.perf_counter() - start) * 1000

    for path in opened:
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=path.as_uri())
            )
        )
    return Outcome(task, answer, cold_ms, warm_ms, warm_answer)


async def _ask_first(
    client: LanguageClient,
    task: Task,
    root: Path,
    folder: Path,
    condition: Condition,
    read_s: float,
) -> Outcome:
    """Open the document (its imports as tabs first, context on only), report the cursor if
    the client is ours, read for `read_s`, ask once; then type the target's first character
    and ask again (the keystroke after a typed character)."""
    source = (root / task.relpath).read_text(encoding="utf-8", errors="replace")
    text, cursor_line = masked_text(source, task, 0)
    target_path = folder / task.relpath
    target_path.parent.mkdir(parents=True, exist_ok=True)
    target_path.write_text(text, encoding="utf-8")
    opened = []
    if condition.context:
        for tab in task.tabs:
            tab_path = folder / tab
            tab_path.parent.mkdir(parents=True, exist_ok=True)
            tab_text = (root / tab).read_text(encoding="utf-8", errors="replace")
            tab_path.write_text(tab_text, encoding="utf-8")
            open_file(client, tab_path, tab_text)
            opened.append(tab_path)
    open_file(client, target_path, text)
    opened.append(target_path)
    position = types.Position(line=cursor_line, character=utf16_len(task.indent))
    if condition.client == "ours":
        client.protocol.notify(
            NOTIFY_CURSOR,
            {
                "textDocument": {"uri": target_path.as_uri()},
                "position": {"line": position.line, "character": position.character},
            },
        )
    await asyncio.sleep(read_s)
    start = time.perf_counter()
    answer = await inline(client, target_path, position)
    first_ms = (time.perf_counter() - start) * 1000
    after = _type_first_character(client, target_path, position, task.target[0])
    start = time.perf_counter()
    typed_answer = await inline(client, target_path, after)
    typed_ms = (time.perf_counter() - start) * 1000
    for path in opened:
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=path.as_uri())
            )
        )
    return Outcome(task, answer, first_ms, typed_ms, typed_answer)


def _type_first_character(
    client: LanguageClient, path: Path, position: types.Position, typed: str
) -> types.Position:
    """Type `typed` at `position` of the just opened `path`; the cursor after it."""
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=path.as_uri(), version=2),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(start=position, end=position), text=typed
                )
            ],
        )
    )
    return types.Position(line=position.line, character=position.character + utf16_len(typed))


async def _evict(client: LanguageClient, workspace: Path) -> None:
    """A short unrelated request: the next document finds nothing of this one in the KV cache
    (and a read-ahead still under way stops)."""
    path = workspace / "evict.py"
    text = "import os\n\nprint(os.getcwd())\n"
    path.write_text(text)
    open_file(client, path, text)
    await inline(client, path, types.Position(line=2, character=0))
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=path.as_uri())
        )
    )


async def _gathered(client: LanguageClient, timeout_s: float = 30.0) -> None:
    """Wait until the server has read what the opened documents give (their chunks, the
    definitions they import), as it would while a person reads the file before typing: the
    first request measures the context, not a race with its gathering."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="gatewayLs.status")
        )
        context = status.get("context", {}) if isinstance(status, dict) else {}
        if not context.get("gathering"):
            return
        await asyncio.sleep(0.02)


# Scores and comparisons


def _rate(values: Sequence[bool | float]) -> float:
    return 100 * statistics.fmean(values) if values else float("nan")


SUBSETS: dict[str, Callable[[Task], bool]] = {
    "all": lambda t: True,
    "line": lambda t: t.kind == "line",
    "span": lambda t: t.kind == "span",
    "cross-file": lambda t: t.kind == "cross-file",
}


def print_scores(results: dict[Condition, list[Outcome]]) -> None:
    header = (
        f"{'condition':<30} {'subset':<11} {'n':>4} {'exact %':>8} {'edit sim':>8} "
        f"{'ident %':>8} {'empty %':>8} {'cold p50':>9} {'cold p90':>9} {'warm p50':>9} "
        f"{'warm p90':>9} {'warm<=dl':>8} {'asked':>5} {'p50':>7} {'<=dl':>6} "
        f"{'warm ex%':>8}"
    )
    print(header)
    print("-" * len(header))
    for condition, outcomes in results.items():
        for subset, keep in SUBSETS.items():
            chosen = [o for o in outcomes if keep(o.task)]
            if not chosen:
                continue
            cold = [o.cold_ms for o in chosen]
            warm = [o.warm_ms for o in chosen]
            asked = [o.warm_ms for o in chosen if not o.typed_into_answer]
            print(
                f"{condition.label:<30} {subset:<11} {len(chosen):>4} "
                f"{_rate([o.exact for o in chosen]):>8.1f} "
                f"{_rate([o.similarity for o in chosen]):>8.1f} "
                f"{_rate([o.identifiers for o in chosen]):>8.1f} "
                f"{_rate([o.empty for o in chosen]):>8.1f} "
                f"{percentile(cold, 0.5):>9.0f} {percentile(cold, 0.9):>9.0f} "
                f"{percentile(warm, 0.5):>9.0f} {percentile(warm, 0.9):>9.0f} "
                f"{_rate([w <= SHIPPED_DEADLINE_MS for w in warm]):>8.1f} "
                f"{len(asked):>5} {percentile(asked, 0.5):>7.0f} "
                f"{_rate([w <= SHIPPED_DEADLINE_MS for w in asked]):>6.1f} "
                f"{_rate([o.warm_exact for o in chosen]):>8.1f}"
            )


def print_first(results: dict[Condition, list[Outcome]]) -> None:
    """The first keystroke per condition: exact, empty, and how long it took; and the
    keystroke after a typed character: how long, and the share within the deadline."""
    header = (
        f"{'condition':<50} {'n':>4} {'exact %':>8} {'edit sim':>8} {'empty %':>8} "
        f"{'first p50':>9} {'first p90':>9} {'typed p50':>9} {'typed p90':>9} {'typed<=dl':>9}"
    )
    print(header)
    print("-" * len(header))
    for condition, outcomes in results.items():
        first = [o.cold_ms for o in outcomes]
        typed = [o.warm_ms for o in outcomes]
        print(
            f"{condition.label:<50} {len(outcomes):>4} "
            f"{_rate([o.exact for o in outcomes]):>8.1f} "
            f"{_rate([o.similarity for o in outcomes]):>8.1f} "
            f"{_rate([o.empty for o in outcomes]):>8.1f} "
            f"{percentile(first, 0.5):>9.0f} {percentile(first, 0.9):>9.0f} "
            f"{percentile(typed, 0.5):>9.0f} {percentile(typed, 0.9):>9.0f} "
            f"{_rate([t <= SHIPPED_DEADLINE_MS for t in typed]):>9.1f}"
        )


def print_comparisons(results: dict[Condition, list[Outcome]], seed: int) -> None:
    conditions = list(results)
    # Context on is compared against off, whichever ran first.
    pairs = [
        (b, a) if a.model == b.model and a.context else (a, b)
        for i, a in enumerate(conditions)
        for b in conditions[i + 1 :]
        if a.model == b.model or a.context == b.context
    ]
    if not pairs:
        return
    print()
    header = (
        f"{'B vs A':<52} {'subset':<11} {'n':>4} {'d exact (95% CI)':>24} "
        f"{'d edit sim (95% CI)':>24} {'cold B/A':>8} {'per task':>8}"
    )
    print(header)
    print("-" * len(header))
    for a, b in pairs:
        by_key = {o.task.key: o for o in results[b]}
        for subset, keep in SUBSETS.items():
            # Paired on the tasks both conditions answered (all of them, unless a run stopped).
            left = [o for o in results[a] if keep(o.task) and o.task.key in by_key]
            right = [by_key[o.task.key] for o in left]
            if not left:
                continue
            exact = paired_bootstrap([o.exact for o in left], [o.exact for o in right], seed)
            sim = paired_bootstrap(
                [o.similarity for o in left], [o.similarity for o in right], seed
            )
            print(
                f"{b.label + ' vs ' + a.label:<52} {subset:<11} {len(left):>4} "
                f"{_interval(exact):>24} {_interval(sim):>24} "
                f"{_cold_ratio(left, right):>8.2f} {_cold_ratio_per_task(left, right):>8.2f}"
            )


def _cold_ratio(a: Sequence[Outcome], b: Sequence[Outcome]) -> float:
    """B's cold median over A's, on the same tasks."""
    return percentile([o.cold_ms for o in b], 0.5) / percentile([o.cold_ms for o in a], 0.5)


def _cold_ratio_per_task(a: Sequence[Outcome], b: Sequence[Outcome]) -> float:
    """The median over tasks of B's cold request over A's."""
    return statistics.median(y.cold_ms / x.cold_ms for x, y in zip(a, b, strict=True))


def _interval(stat: tuple[float, float, float]) -> str:
    mean, low, high = (100 * v for v in stat)
    return f"{mean:+.1f} [{low:+.1f}, {high:+.1f}]"


# Command line


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models",
        default=DEFAULT_PRESET,
        help="comma-separated presets, or .gguf files (as [local] model_path)",
    )
    parser.add_argument(
        "--context",
        default="off,on" if CONTEXT_KNOWN else "off",
        help="comma-separated: off, on (context beyond the file)",
    )
    parser.add_argument("--full", action="store_true", help="the larger set, for decisions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="local.n_threads (default 1; with --first, the shipped value)",
    )
    parser.add_argument(
        "--first",
        type=float,
        default=None,
        metavar="S",
        help="the first keystroke: open, read S seconds, ask once, at the shipped settings",
    )
    parser.add_argument(
        "--clients",
        default="ours,stock",
        help="with --first: ours (reports the cursor), stock (does not), comma-separated",
    )
    parser.add_argument(
        "--read-ahead",
        default="on",
        help="with --first: on, off ([local] read_ahead), comma-separated, one server each",
    )
    parser.add_argument("--answer-deadline-ms", type=int, default=60_000)
    parser.add_argument("--no-busy", action="store_true", help="leave every core free")
    parser.add_argument("--limit", type=int, default=0, help="ask only the first N tasks")
    parser.add_argument(
        "--skip", type=int, default=0, help="leave out the first N tasks (before --limit)"
    )
    parser.add_argument(
        "--window-chars",
        type=int,
        default=0,
        help="keep only this much of the file before the cursor (a third of it after)",
    )
    parser.add_argument(
        "--window-tokens",
        type=int,
        default=None,
        help="[local] window_tokens for the server (default: the shipped value)",
    )
    parser.add_argument(
        "--context-tokens",
        type=int,
        default=256,
        help="[local] context_tokens with context on (not with --first, which ships the preset's)",
    )
    parser.add_argument(
        "--llama-server",
        action="store_true",
        help='ask llama.cpp\'s llama-server serving each preset, as a kind = "llamacpp" '
        "endpoint (make llama-server builds it), the conditions task by task in turn",
    )
    parser.add_argument(
        "--endpoint-context-tokens",
        type=int,
        default=None,
        help="with --llama-server: the endpoint's context_tokens (default: its kind's)",
    )
    parser.add_argument("--json", type=Path, help="also write every outcome here")
    parser.add_argument("--verbose", action="store_true", help="one line per task on stderr")
    parser.add_argument(
        "--server-log-level",
        default="warning",
        help="the server's --log-level (its log goes to stderr); debug shows each prompt's "
        "size and how much of it the KV cache held",
    )
    parser.add_argument(
        "--report",
        type=Path,
        nargs="+",
        metavar="JSON",
        help="ask nothing: score and compare the outcomes that --json runs saved",
    )
    args = parser.parse_args(argv)
    if args.llama_server and any(m.strip().endswith(".gguf") for m in args.models.split(",")):
        parser.error("--llama-server serves presets; a .gguf file goes without it")
    if args.llama_server and args.first is not None:
        parser.error("--first measures the local model; it does not go with --llama-server")
    return args


async def main_async(args: argparse.Namespace) -> dict[Condition, list[Outcome]]:
    size = FULL_SIZE if args.full else DEFAULT_SIZE
    tasks = draw_tasks(args.seed, **size)[args.skip :]
    if args.limit:
        tasks = tasks[: args.limit]
    contexts = [c.strip() == "on" for c in args.context.split(",") if c.strip()]
    readings = [r.strip() == "on" for r in args.read_ahead.split(",") if r.strip()]
    conditions = [
        Condition(m.strip(), c, read_ahead=r)
        for m in args.models.split(",")
        for c in contexts
        for r in (readings if args.first is not None else [True])
    ]
    kinds = {k: sum(t.kind == k for t in tasks) for k in ("line", "span", "cross-file")}
    print(
        f"Python {sys.version.split()[0]} standard library ({stdlib_root()}), seed {args.seed}, "
        f"{len(tasks)} tasks {kinds}; n_threads {args.threads or 'shipped'}; "
        f"window {args.window_chars or 'whole file'} chars, "
        f"window_tokens {'shipped' if args.window_tokens is None else args.window_tokens}; "
        f"{'one core busy' if not args.no_busy else 'no extra load'}; "
        f"{'llama-server as a llamacpp endpoint; ' if args.llama_server else ''}"
        f"load average before {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    results: dict[Condition, list[Outcome]] = {}
    with ExitStack() as stack:
        if not args.no_busy:
            stack.enter_context(one_core_busy())
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-quality-")))
        if args.llama_server:
            started = time.perf_counter()
            await run_in_turn(
                conditions, tasks, args, workdir, results, lambda: save(args, results)
            )
            print(f"  in turn: {time.perf_counter() - started:.0f} s", file=sys.stderr)
            conditions = []
        for condition in conditions:
            started = time.perf_counter()
            by_client = None
            if args.first is not None:
                by_client = {
                    name.strip(): results.setdefault(
                        dataclasses.replace(condition, client=name.strip()), []
                    )
                    for name in args.clients.split(",")
                    if name.strip()
                }
            else:
                results[condition] = []
            await run_condition(
                condition,
                tasks,
                args,
                workdir,
                results.get(condition, []),
                lambda: save(args, results),
                by_client,
            )
            print(f"  {condition.label}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    print(f"load average after {os.getloadavg()[0]:.2f}; warm<=dl: within {SHIPPED_DEADLINE_MS} ms")
    print()
    if args.first is not None:
        print(f"first keystroke after {args.first:g} s reading, deadline {SHIPPED_DEADLINE_MS} ms")
        print_first(results)
        return results
    print_scores(results)
    print_comparisons(results, args.seed)
    return results


def load(paths: Sequence[Path]) -> dict[Condition, list[Outcome]]:
    """Outcomes saved by `--json` runs, to be scored and compared together."""
    results: dict[Condition, list[Outcome]] = {}
    for path in paths:
        for label, rows in json.loads(path.read_text()).items():
            model, _, context = label.rpartition(" ctx-")
            outcomes = results.setdefault(Condition(model, context == "on"), [])
            for row in rows:
                kind, relpath, line = row["task"].rsplit(":", 2)
                target = row["target"]
                task = Task(kind, relpath, int(line) - 1, target, "", target.count("\n") + 1, ())
                outcomes.append(
                    Outcome(
                        task,
                        row["answer"],
                        row["cold_ms"],
                        row["warm_ms"],
                        row.get("warm_answer", ""),
                    )
                )
    return results


def save(args: argparse.Namespace, results: dict[Condition, list[Outcome]]) -> None:
    """Every outcome so far, as JSON (with `--json`): a long run stopped early keeps them."""
    if not args.json:
        return
    args.json.write_text(
        json.dumps(
            {
                c.label: [
                    {
                        "task": o.task.key,
                        "kind": o.task.kind,
                        "target": o.task.target,
                        "answer": o.answer,
                        "exact": o.exact,
                        "similarity": o.similarity,
                        "identifiers": o.identifiers,
                        "cold_ms": o.cold_ms,
                        "warm_ms": o.warm_ms,
                        "warm_answer": o.warm_answer,
                    }
                    for o in outcomes
                ]
                for c, outcomes in results.items()
            },
            indent=1,
        )
    )


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.report:
        results = load(args.report)
        print_scores(results)
        print_comparisons(results, args.seed)
        return
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
