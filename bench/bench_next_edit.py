"""What a next-edit prediction is worth: real edit sequences replayed through the real server.

    python -m bench.bench_next_edit [--models gemma-3-270m,qwen2.5-coder-0.5b]
                                    [--regions 4+8,2+5,8+16] [--history 8] [--limit N]
                                    [--warm 12] [--threads 1] [--no-busy] [--json FILE]
                                    [--rejoin on,off] [--read-ahead on,off]
                                    [--eagerness low,medium,high] [--editor-pause-ms 400]

The tasks (bench/next_edit_set.py) are commits of public Python projects that change one file
in a few small hunks: the earlier hunks are the history, the last is the edit to predict; a
nothing-to-do subset asks after the last hunk, where the right answer is no edit. For each
condition (a local-model preset, the editable region as lines before+after the cursor's, the
history's bound in edits) `gateway-ls serve` runs over stdio, configured for the local model
alone (bench/next_edit_server.py sets the sizes), a new one for each task so that no task sees
another's edits or files, and each task is replayed as an editor sends it: the file opened,
each hunk of the history one `didChange`, then `textDocument/copilotInlineEdit` at the cursor
the last hunk left (cold: the first request on the document), and for the first `--warm`
tasks the same request again (warm: the prompt is in the model's KV cache). With
`--editor-pause-ms P` each change is followed by a pause of P and a request, as an editor that
asks after each pause in typing does, and the last request is the one timed and scored.
`--rejoin off` has the local model write its rewritten region out whole; `--read-ahead off`
keeps it from reading a prepared prompt while typing pauses; `--eagerness` sets
`routing.edit_eagerness`, how much the filter between the model and the screen drops
(`nextedit/edit_filter.py`). The levels differ in the filter alone, so each task is predicted
once, by a server at `high` (which passes what the others pass), and the filter's verdict at
every level on that prediction (bench/next_edit_server.py writes them down) scores each level.

Scores: exact match (the document after the proposed edit is the document after the commit's
next hunk, trailing whitespace aside); edit similarity of the changed lines (rapidfuzz's
normalized Indel ratio, as bench_quality.py's, over the lines either edit changes); "edited":
the share of edit tasks with any edit proposed; "reach": the share whose next hunk lies inside
the region, the ceiling of exact match for that size; the false-edit rate on the nothing-to-do
subset; latency cold and warm, and the share of cold answers inside the shipped
`local.deadline_ms`. The first row, "no edit", is the floor, computed without a model: what
proposing nothing scores. Conditions are compared on the same tasks with a paired bootstrap 95 %
confidence interval.

The answer is given time (`--answer-deadline-ms`, default 60 s) so that quality is the model's
own. By default one core is kept busy (a build beside the editor), as bench_quality.py does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from rapidfuzz import fuzz

from bench.harness.bootstrap import paired_bootstrap
from bench.harness.busy_machine import one_core_busy
from bench.harness.editor_session import (
    isolated_env,
    logging_client,
    open_file,
    utf16_len,
    wait_until_loaded,
)
from bench.harness.percentile import percentile
from bench.next_edit_set import Step, Task, chosen_tasks
from lsp_server.backends.model_presets import DEFAULT_PRESET
from lsp_server.config.model import LocalConfig, RoutingConfig
from lsp_server.nextedit.history import HISTORY_MAX_EDITS
from lsp_server.nextedit.prompts import LOCAL_REJOIN
from lsp_server.nextedit.region import (
    LOCAL_CONTEXT_LINES,
    REGION_LINES_AFTER,
    REGION_LINES_BEFORE,
    editable_region,
)

COPILOT_INLINE_EDIT = "textDocument/copilotInlineEdit"
SHIPPED_REGION = f"{REGION_LINES_BEFORE}+{REGION_LINES_AFTER}"
SHIPPED_DEADLINE_MS = LocalConfig().deadline_ms
SHIPPED_EAGERNESS = RoutingConfig().edit_eagerness
BASELINE = " (baseline)"  # the label's end for a condition read from an earlier run


@dataclass(frozen=True, slots=True)
class Condition:
    model: str
    before: int  # region lines above the cursor's
    after: int  # and below
    history: int  # edits kept
    context: int = LOCAL_CONTEXT_LINES  # lines of the file shown either side of the region
    rejoin: bool = LOCAL_REJOIN  # the local model ends a region once it copies the rest
    read_ahead: bool = True  # offline, the local model reads the prompt while typing pauses
    eagerness: str = SHIPPED_EAGERNESS  # routing.edit_eagerness

    @property
    def label(self) -> str:
        shown = "" if self.context == LOCAL_CONTEXT_LINES else f" c{self.context}"
        whole = "" if self.rejoin else " whole"
        ahead = "" if self.read_ahead else " not-ahead"
        eager = "" if self.eagerness == SHIPPED_EAGERNESS else f" {self.eagerness}"
        return (
            f"{self.model} r{self.before}+{self.after} h{self.history}{shown}{whole}{ahead}{eager}"
        )


@dataclass(slots=True)
class Outcome:
    task: Task
    predicted: str  # the document after the proposed edit (itself when none)
    cold_ms: float
    warm_ms: float | None
    reach: bool
    exact: bool = field(init=False)
    similarity: float = field(init=False)
    edited: bool = field(init=False)

    def __post_init__(self) -> None:
        document = self.task.document
        self.edited = _normal(self.predicted) != _normal(document)
        expected = self.task.expected
        if expected is None:
            self.exact, self.similarity = not self.edited, float(not self.edited)
            return
        self.exact = _normal(self.predicted) == _normal(expected)
        self.similarity = changed_lines_similarity(document, self.predicted, expected)


def _normal(text: str) -> list[str]:
    return [line.rstrip() for line in text.rstrip("\n").split("\n")]


def changed_lines_similarity(document: str, predicted: str, expected: str) -> float:
    """The similarity of the lines either edit changed: both results over the union of the
    stretches of `document` that they rewrite (outside it, both equal the document)."""
    base, got, want = _normal(document), _normal(predicted), _normal(expected)
    head = min(_same_head(base, got), _same_head(base, want))
    tail = min(_same_tail(base, got, head), _same_tail(base, want, head))
    got_lines = got[head : len(got) - tail]
    want_lines = want[head : len(want) - tail]
    return fuzz.ratio("\n".join(got_lines), "\n".join(want_lines)) / 100


def _same_head(a: list[str], b: list[str]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _same_tail(a: list[str], b: list[str], head: int) -> int:
    n = 0
    while n < min(len(a), len(b)) - head and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def reaches(task: Task, before: int, after: int) -> bool:
    """The next hunk lies inside the region of `before`+`after` lines around the cursor."""
    if task.expected is None:
        return True
    base, want = _normal(task.document), _normal(task.expected)
    head = _same_head(base, want)
    tail = _same_tail(base, want, head)
    line = task.cursor[0]
    first, last = head, max(head, len(base) - tail - 1)
    return line - before <= first and last <= line + after


# Replaying a task


def _range_of_lines(lines: list[str], start: int, end: int, new: tuple[str, ...]) -> types.Range:
    """The range whose replacement by `_replacement_text` makes lines [start, end) `new`."""
    if end < len(lines):
        return types.Range(types.Position(start, 0), types.Position(end, 0))
    last = types.Position(len(lines) - 1, utf16_len(lines[-1]))
    if new or start == 0:
        return types.Range(types.Position(start, 0), last)
    # Deleting the last lines: the break before them goes too.
    return types.Range(types.Position(start - 1, utf16_len(lines[start - 1])), last)


def _replacement_text(lines: list[str], start: int, end: int, new: tuple[str, ...]) -> str:
    if end < len(lines):
        return "".join(line + "\n" for line in new)
    return "\n".join(new)


def _did_change(client: LanguageClient, path: Path, version: int, text: str, step: Step) -> str:
    lines = text.split("\n")
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=path.as_uri(), version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=_range_of_lines(lines, step.start, step.end, step.new),
                    text=_replacement_text(lines, step.start, step.end, step.new),
                )
            ],
        )
    )
    lines[step.start : step.end] = step.new
    return "\n".join(lines)


async def _inline_edit(
    client: LanguageClient, path: Path, version: int, text: str, cursor: tuple[int, int]
) -> str:
    """The document after the first edit the server proposes (`text` when none)."""
    line, column = cursor
    character = utf16_len(text.split("\n")[line][:column])
    result = await client.protocol.send_request_async(
        COPILOT_INLINE_EDIT,
        {
            "textDocument": {"uri": path.as_uri(), "version": version},
            "position": {"line": line, "character": character},
        },
    )
    edits = _plain(result).get("edits") or []
    return _applied(text, edits[0]) if edits else text


def _plain(value: Any) -> Any:
    """pygls hands the result of a method it has no type for as nested named tuples."""
    if hasattr(value, "_asdict"):
        return {key: _plain(item) for key, item in value._asdict().items()}
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _applied(text: str, edit: Mapping[str, Any]) -> str:
    lines = text.split("\n")

    def offset(position: Mapping[str, int]) -> int:
        line = position["line"]
        before = sum(len(x) + 1 for x in lines[:line])
        units, column = position["character"], 0
        for char in lines[line] if line < len(lines) else "":
            if units <= 0:
                break
            units -= 2 if ord(char) > 0xFFFF else 1
            column += 1
        return before + column

    start, end = offset(edit["range"]["start"]), offset(edit["range"]["end"])
    return text[:start] + str(edit["text"]) + text[end:]


@dataclass(frozen=True, slots=True)
class Asked:
    """One task asked of a server at `high`: the document after the edit it proposed, its
    times, and the filter's verdict at each level on that edit (None: it proposed none)."""

    predicted: str
    cold_ms: float
    warm_ms: float | None
    verdicts: dict[str, str | None] | None

    def outcome(self, task: Task, condition: Condition) -> Outcome:
        """The outcome at `condition`'s eagerness: the edit, or none where its level drops it."""
        dropped = self.verdicts is not None and self.verdicts[condition.eagerness] is not None
        predicted = task.document if dropped else self.predicted
        reach = reaches(task, condition.before, condition.after)
        return Outcome(task, predicted, self.cold_ms, self.warm_ms, reach)


def _verdicts_since(path: Path, seen: int) -> dict[str, str | None] | None:
    """The last verdicts written to `path` after its first `seen` lines."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return json.loads(lines[-1]) if len(lines) > seen else None


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


async def _ask(
    client: LanguageClient,
    task: Task,
    folder: Path,
    verdicts: Path,
    warm: bool,
    editor_pause_s: float = 0.0,
) -> Asked:
    """`editor_pause_s`: ask as an editor that asks after each pause in typing does, that long
    after each change (the earlier answers unused); else each change follows the one before at
    once and the one request comes right after the last. `verdicts`: where the server writes
    the filter's verdicts."""
    path = folder / task.path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(task.opened, encoding="utf-8")
    open_file(client, path, task.opened)
    text, version = task.opened, 1
    for index, step in enumerate(task.history):
        version += 1
        text = _did_change(client, path, version, text, step)
        if editor_pause_s:
            await asyncio.sleep(editor_pause_s)
            if index < len(task.history) - 1:
                await _inline_edit(client, path, version, text, step.cursor)
    assert text == task.document

    seen = _lines(verdicts)
    start = time.perf_counter()
    predicted = await _inline_edit(client, path, version, text, task.cursor)
    cold_ms = (time.perf_counter() - start) * 1000
    judged = _verdicts_since(verdicts, seen)
    warm_ms = None
    if warm:
        start = time.perf_counter()
        await _inline_edit(client, path, version, text, task.cursor)
        warm_ms = (time.perf_counter() - start) * 1000
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=path.as_uri())
        )
    )
    return Asked(predicted, cold_ms, warm_ms, judged)


def config_text(condition: Condition, args: argparse.Namespace) -> str:
    return (
        f'[routing]\noffline = "always"\nedit_eagerness = "{condition.eagerness}"\n'
        f'[local]\nmodel = "{condition.model}"\nn_threads = {args.threads}\n'
        f"deadline_ms = {args.answer_deadline_ms}\n"
    )


async def run_levels(
    levels: Sequence[Condition],
    chosen: Sequence[Task],
    args: argparse.Namespace,
    workdir: Path,
    results: dict[str, list[Outcome]],
    after_each: Callable[[], None],
) -> None:
    """`levels`: conditions that differ in their eagerness alone, each task predicted once for
    all of them, by a server at `high`. Each task in a server of its own: the edit history
    spans a workspace's documents and the context store remembers what was viewed, so one
    server would show a task the edits and files of the tasks before it."""
    asking = replace(levels[0], eagerness="high")
    for index, task in enumerate(chosen):
        home = workdir / asking.label.replace(" ", "_") / f"t{index}"
        verdicts = home / "verdicts.jsonl"
        async with _server(asking, args, home, verdicts) as client:
            warm = index < args.warm
            asked = await _ask(
                client, task, home / "ws", verdicts, warm, args.editor_pause_ms / 1000
            )
        for condition in levels:
            outcome = asked.outcome(task, condition)
            results[condition.label].append(outcome)
            if args.verbose:
                print(
                    f"  {condition.label} {task.kind} {task.key} exact={outcome.exact} "
                    f"sim={outcome.similarity:.2f} edited={outcome.edited} "
                    f"cold={outcome.cold_ms:.0f}",
                    file=sys.stderr,
                )
        after_each()


@contextlib.asynccontextmanager
async def _server(
    condition: Condition, args: argparse.Namespace, home: Path, verdicts: Path
) -> AsyncIterator[LanguageClient]:
    """A `gateway-ls serve` for `condition`, its local model loaded, writing the filter's
    verdicts to `verdicts`."""
    workspace = home / "ws"
    workspace.mkdir(parents=True)
    config = home / "config.toml"
    config.write_text(config_text(condition, args))
    env = isolated_env(home)
    client = logging_client("bench-next-edit")
    sizes = (
        str(condition.before),
        str(condition.after),
        str(condition.history),
        str(condition.context),
        "rejoin" if condition.rejoin else "whole",
        "ahead" if condition.read_ahead else "not-ahead",
        str(verdicts),
    )
    await client.start_io(
        sys.executable,
        "-m",
        "bench.next_edit_server",
        *sizes,
        "serve",
        "--config",
        str(config),
        "--log-level",
        args.server_log_level,
        env=env,
    )
    try:
        await client.initialize_async(
            types.InitializeParams(
                capabilities=types.ClientCapabilities(
                    text_document=types.TextDocumentClientCapabilities(
                        inline_completion=types.InlineCompletionClientCapabilities(),
                        synchronization=types.TextDocumentSyncClientCapabilities(),
                    )
                ),
                root_uri=workspace.as_uri(),
            )
        )
        client.initialized(types.InitializedParams())
        await wait_until_loaded(client, workspace)
        yield client
    finally:
        with contextlib.suppress(RuntimeError):
            await client.shutdown_async(None)
            client.exit(None)
        await client.stop()


# Scores and comparisons


def _rate(values: Sequence[bool | float]) -> str:
    return f"{100 * statistics.fmean(values):.1f}" if values else "-"


def _ms(values: Sequence[float], q: float) -> str:
    return f"{percentile(values, q):.0f}" if values else "-"


def no_edit_outcomes(chosen: Sequence[Task], condition: Condition) -> list[Outcome]:
    return [
        Outcome(t, t.document, 0.0, None, reaches(t, condition.before, condition.after))
        for t in chosen
    ]


REACH_SIZES = ((2, 5), (3, 6), (4, 8), (6, 12), (8, 16))


def print_reach(chosen: Sequence[Task]) -> None:
    """What a region size can reach and what it costs, without a model: the share of edit tasks
    whose next hunk lies inside it, and its median size (the model writes it out whole)."""
    edits = [t for t in chosen if t.kind == "edit"]
    print(f"{'region':<8} {'reach %':>8} {'median chars':>13}")
    for before, after in REACH_SIZES:
        sizes = []
        for task in edits:
            lines = task.document.split("\n")
            line, column = task.cursor
            offset = sum(len(x) + 1 for x in lines[:line]) + column
            start, end = editable_region(
                task.document, offset, lines_before=before, lines_after=after
            )
            sizes.append(end - start)
        reach = _rate([reaches(t, before, after) for t in edits])
        print(f"{before}+{after:<6} {reach:>8} {statistics.median(sizes):>13.0f}")
    print()


def print_scores(results: dict[str, list[Outcome]]) -> None:
    header = (
        f"{'condition':<40} {'n edit':>6} {'exact %':>8} {'edit sim':>8} {'edited %':>8} "
        f"{'reach %':>8} {'n none':>6} {'false %':>8} {'cold p50':>9} {'cold p90':>9} "
        f"{'<=dl %':>7} {'warm p50':>9}"
    )
    print(header)
    print("-" * len(header))
    for label, outcomes in results.items():
        edits = [o for o in outcomes if o.task.kind == "edit"]
        nones = [o for o in outcomes if o.task.kind == "none"]
        cold = [o.cold_ms for o in outcomes]
        warm = [o.warm_ms for o in outcomes if o.warm_ms is not None]
        timed = label != "no edit"
        print(
            f"{label:<40} {len(edits):>6} {_rate([o.exact for o in edits]):>8} "
            f"{_rate([o.similarity for o in edits]):>8} {_rate([o.edited for o in edits]):>8} "
            f"{_rate([o.reach for o in edits]):>8} {len(nones):>6} "
            f"{_rate([o.edited for o in nones]):>8} "
            f"{_ms(cold, 0.5) if timed else '-':>9} {_ms(cold, 0.9) if timed else '-':>9} "
            f"{_rate([c <= SHIPPED_DEADLINE_MS for c in cold]) if timed else '-':>7} "
            f"{_ms(warm, 0.5):>9}"
        )


def print_comparisons(results: dict[str, list[Outcome]], seed: int) -> None:
    labels = [label for label in results if label != "no edit"]
    if len(labels) < 2:
        return
    first = labels[0]
    print()
    header = (
        f"{'B vs A':<76} {'d exact (95% CI)':>22} {'d edit sim (95% CI)':>22} "
        f"{'d false (95% CI)':>22}"
    )
    print(header)
    print("-" * len(header))
    for other in labels[1:]:
        a_by_key = {(o.task.kind, o.task.key): o for o in results[first]}
        pairs = [(a_by_key[(o.task.kind, o.task.key)], o) for o in results[other]]
        pairs = [p for p in pairs if (p[0].task.kind, p[0].task.key) in a_by_key]
        edits = [(a, b) for a, b in pairs if a.task.kind == "edit"]
        nones = [(a, b) for a, b in pairs if a.task.kind == "none"]
        cells = []
        for chosen, score in (
            (edits, lambda o: float(o.exact)),
            (edits, lambda o: o.similarity),
            (nones, lambda o: float(o.edited)),
        ):
            if not chosen:
                cells.append("-")
                continue
            mean, low, high = (
                100 * v
                for v in paired_bootstrap(
                    [score(a) for a, _ in chosen], [score(b) for _, b in chosen], seed
                )
            )
            cells.append(f"{mean:+.1f} [{low:+.1f}, {high:+.1f}]")
        print(f"{other + ' vs ' + first:<76} {cells[0]:>22} {cells[1]:>22} {cells[2]:>22}")


# Command line


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=DEFAULT_PRESET, help="comma-separated presets")
    parser.add_argument(
        "--regions",
        default=SHIPPED_REGION,
        help="comma-separated region sizes, lines before+after the cursor's",
    )
    parser.add_argument(
        "--history", default=str(HISTORY_MAX_EDITS), help="comma-separated bounds, in edits"
    )
    parser.add_argument(
        "--context",
        default=str(LOCAL_CONTEXT_LINES),
        help="comma-separated lines of the file the local model is shown around the region",
    )
    parser.add_argument(
        "--rejoin",
        default="on" if LOCAL_REJOIN else "off",
        help="comma-separated: on, the local model ends a region once it copies the rest; "
        "off, it writes the region out whole",
    )
    parser.add_argument(
        "--read-ahead",
        default="on",
        help="comma-separated: on, the local model reads a prepared prompt while typing "
        "pauses (with --editor-pause-ms); off, it reads it when asked",
    )
    parser.add_argument(
        "--eagerness",
        default=SHIPPED_EAGERNESS,
        help="comma-separated routing.edit_eagerness levels: low, medium, high",
    )
    parser.add_argument("--limit", type=int, default=0, help="the first N edit and none tasks")
    parser.add_argument("--warm", type=int, default=12, help="ask the first N tasks twice")
    parser.add_argument("--threads", type=int, default=1, help="local.n_threads")
    parser.add_argument(
        "--editor-pause-ms",
        type=int,
        default=0,
        help="ask as an editor does: this long after each change (the VS Code extension "
        "waits 400), the last request timed as cold; 0: the changes at once, one request",
    )
    parser.add_argument("--answer-deadline-ms", type=int, default=60_000)
    parser.add_argument("--no-busy", action="store_true", help="leave every core free")
    parser.add_argument("--seed", type=int, default=0, help="of the bootstrap")
    parser.add_argument("--json", type=Path, help="also write every outcome here")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a condition's outcomes from an earlier run's --json (another commit's), "
        "shown first and compared with the others on the tasks both ran",
    )
    parser.add_argument("--verbose", action="store_true", help="one line per task on stderr")
    parser.add_argument("--server-log-level", default="warning")
    return parser.parse_args(argv)


def conditions(args: argparse.Namespace) -> list[Condition]:
    chosen = []
    for model in args.models.split(","):
        for region in args.regions.split(","):
            before, _, after = region.partition("+")
            for history in args.history.split(","):
                for context in args.context.split(","):
                    for rejoin in args.rejoin.split(","):
                        for ahead in args.read_ahead.split(","):
                            chosen += [
                                Condition(
                                    model.strip(),
                                    int(before),
                                    int(after),
                                    int(history),
                                    int(context),
                                    rejoin.strip() == "on",
                                    ahead.strip() == "on",
                                    eagerness.strip(),
                                )
                                for eagerness in args.eagerness.split(",")
                            ]
    return chosen


def by_levels(plan: Sequence[Condition]) -> list[list[Condition]]:
    """The conditions grouped by all but their eagerness, in the plan's order."""
    groups: dict[Condition, list[Condition]] = {}
    for condition in plan:
        groups.setdefault(replace(condition, eagerness="high"), []).append(condition)
    return list(groups.values())


async def main_async(args: argparse.Namespace) -> dict[str, list[Outcome]]:
    chosen = chosen_tasks(args.limit)
    plan = conditions(args)
    kinds = {k: sum(t.kind == k for t in chosen) for k in ("edit", "none")}
    print(
        f"{len(chosen)} tasks {kinds} from bench/data/next_edit; n_threads {args.threads}; "
        f"warm on the first {args.warm}; "
        f"{f'asked {args.editor_pause_ms} ms after each change; ' if args.editor_pause_ms else ''}"
        f"{'one core busy' if not args.no_busy else 'no extra load'}; "
        f"load average before {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    results: dict[str, list[Outcome]] = {"no edit": no_edit_outcomes(chosen, plan[0])}
    if args.baseline:
        results.update(baseline_outcomes(args.baseline, chosen))
    with ExitStack() as stack:
        if not args.no_busy:
            stack.enter_context(one_core_busy())
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-nextedit-")))
        for levels in by_levels(plan):
            started = time.perf_counter()
            results.update({condition.label: [] for condition in levels})
            await run_levels(levels, chosen, args, workdir, results, lambda: save(args, results))
            names = ", ".join(condition.label for condition in levels)
            print(f"  {names}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    print(
        f"load average after {os.getloadavg()[0]:.2f}; <=dl: cold within the shipped "
        f"local.deadline_ms, {SHIPPED_DEADLINE_MS} ms; reach: of the region of the condition "
        f"(no edit: of {plan[0].before}+{plan[0].after})"
    )
    print()
    print_reach(chosen)
    print_scores(results)
    print_comparisons(results, args.seed)
    return results


def baseline_outcomes(path: Path, chosen: Sequence[Task]) -> dict[str, list[Outcome]]:
    """The first model condition of an earlier run's --json, on the tasks chosen now, scored
    again from what it proposed."""
    saved = json.loads(path.read_text())
    label, rows = next(
        (k, v) for k, v in saved.items() if k != "no edit" and not k.endswith(BASELINE)
    )
    by_key = {(t.kind, t.key): t for t in chosen}
    outcomes = [
        Outcome(task, row["predicted"], row["cold_ms"], row["warm_ms"], row["reach"])
        for row in rows
        if (task := by_key.get((row["kind"], row["task"]))) is not None
    ]
    return {f"{label}{BASELINE}": outcomes}


def save(args: argparse.Namespace, results: dict[str, list[Outcome]]) -> None:
    """Every outcome so far, as JSON (with `--json`): a long run stopped early keeps them."""
    if not args.json:
        return
    args.json.write_text(
        json.dumps(
            {
                label: [
                    {
                        "task": o.task.key,
                        "kind": o.task.kind,
                        "exact": o.exact,
                        "similarity": o.similarity,
                        "edited": o.edited,
                        "reach": o.reach,
                        "cold_ms": o.cold_ms,
                        "warm_ms": o.warm_ms,
                        "predicted": o.predicted,
                    }
                    for o in outcomes
                ]
                for label, outcomes in results.items()
            },
            indent=1,
        )
    )


def main(argv: Sequence[str] | None = None) -> None:
    asyncio.run(main_async(parse_args(argv)))


if __name__ == "__main__":
    main()
